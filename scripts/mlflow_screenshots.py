"""Screenshots of the MLflow UI for the docs: the sessions of a run's evaluation episodes and one
conversation, taken by a real headless Chromium (Debian's ``chromium`` package).

Starts ``mlflow server`` on the given tracking database (loopback, a free port), picks the
``evaluate_agents`` session with the most turns (the frozen simulator as the user when there is
one), and writes ``mlflow_sessions.png`` and ``mlflow_conversation.png`` to ``--out``. The UI
is a JavaScript app: Chromium's virtual time budget lets it fetch and render before the shot.

    python scripts/mlflow_screenshots.py --db /path/to/project/mlflow.db --out docs/images
"""

from __future__ import annotations

import argparse
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

BIN = Path(sys.executable).parent
CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                  "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--hide-scrollbars"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pick_session(uri: str) -> tuple[str, str]:
    """(experiment id, session id): the evaluation episode with the most agent turns, under the
    frozen simulator when there is one."""
    import mlflow

    mlflow.set_tracking_uri(uri)
    experiment = mlflow.get_experiment_by_name("mimesis")
    traces = mlflow.search_traces(locations=[experiment.experiment_id], return_type="list",
                                  filter_string="tags.`mimesis.stage` = 'evaluate_agents'",
                                  include_spans=False)
    if not traces:
        raise SystemExit("no evaluate_agents traces in this database")
    turns: dict[str, int] = {}
    frozen: set[str] = set()
    for t in traces:
        session = t.info.trace_metadata["mlflow.trace.session"]
        turns[session] = turns.get(session, 0) + 1
        if t.info.trace_metadata.get("mlflow.trace.user") == "frozen":
            frozen.add(session)
    best = max(turns, key=lambda s: (s in frozen, turns[s], s))
    return experiment.experiment_id, best


def shoot(url: str, path: Path, budget_ms: int, size: str) -> None:
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        raise SystemExit("chromium is not installed (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory() as profile:
        subprocess.run([chromium, *CHROMIUM_FLAGS, f"--user-data-dir={profile}",
                        f"--screenshot={path}", f"--window-size={size}",
                        f"--virtual-time-budget={budget_ms}", url],
                       check=True, capture_output=True, timeout=180)
    print(f"{url} -> {path} ({path.stat().st_size} bytes)")


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--db", type=Path, required=True, help="the project's mlflow.db")
    p.add_argument("--out", type=Path, default=Path("docs/images"))
    p.add_argument("--budget-ms", type=int, default=15000, help="Chromium's virtual time budget")
    p.add_argument("--size", default="1900,1000", help="window size, pixels")
    args = p.parse_args(argv)
    uri = f"sqlite:///{args.db.resolve()}"
    experiment, session = pick_session(uri)
    port = free_port()
    env = {**os.environ, "MLFLOW_TRACKING_URI": uri}
    with tempfile.TemporaryDirectory() as artifacts:
        server = subprocess.Popen(
            [str(BIN / "mlflow"), "server", "--backend-store-uri", uri, "--host", "127.0.0.1",
             "--port", str(port), "--workers", "1", "--default-artifact-root", artifacts],
            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            base = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 120
            while True:
                try:
                    urllib.request.urlopen(f"{base}/health", timeout=2)
                    break
                except OSError:
                    if time.monotonic() > deadline or server.poll() is not None:
                        raise SystemExit("mlflow server did not come up") from None
                    time.sleep(1)
            args.out.mkdir(parents=True, exist_ok=True)
            # MLflow >= 3.17 lists sessions in the Traces tab, grouped by session
            listing = f"{base}/#/experiments/{experiment}/traces?groupBy=session"
            shoot(listing, args.out / "mlflow_sessions.png", args.budget_ms, args.size)
            conversation = f"{base}/#/experiments/{experiment}/chat-sessions/{session}"
            shoot(conversation, args.out / "mlflow_conversation.png", args.budget_ms, args.size)
        finally:
            server.terminate()
            server.wait(timeout=30)


if __name__ == "__main__":
    main()
