"""Score any user simulator's realism on real conversations: the Python API behind
``mimesis evaluate-simulator``.

Simulators (:class:`SimulatorSource`):

* ``frozen`` — a frozen simulator folder (``data/freeze_user/simulator``, sha256-verified), with
  its training prompt (``user_simulator``);
* ``openai`` — any OpenAI-compatible chat-completions endpoint (``mimesis serve``, vLLM, a
  hosted API) through :class:`mimesis.openai_chat.ChatClient`, the API key read from the
  environment variable named by ``api_key_env``; an opening turn gets
  :data:`mimesis.eval.unseen_users.OPENING_CUE` as the message to answer;
* ``hf`` — a local HF model (``load_base`` name or folder) with a prompt style:
  ``prompted_user`` (an assistant model prompted to act as a user) or ``user_simulator``.

Conversations: ``data/label/test.jsonl`` (``LabeledConversation``), or a JSONL of one's own with
one conversation per line (:func:`load_conversations`)::

    {"id": "c1", "goal": "get a cover letter for a barista job",
     "turns": [{"role": "user", "text": "hi i need a cover letter"},
               {"role": "assistant", "text": "Sure! What's the job?"}, ...],
     "ended": true}

The protocol, the metrics and the outputs are the ``evaluate_user`` stage's (one simulator row
beside the real-vs-real ceiling): :mod:`mimesis.eval.realism_run`, logged to the MLflow run
``evaluate_simulator``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from mimesis.eval.generate import STYLE_VIEWS, Generated, simulate_local, simulate_runtime
from mimesis.eval.protocol import EvalItem, build_items
from mimesis.eval.realism_run import counts, print_summary, score, write_outputs
from mimesis.eval.unseen_users import api_messages
from mimesis.openai_chat import ChatAPIError, ChatClient
from mimesis.schemas import LabeledConversation, Messages, Scenario, Turn, TurnLabel
from mimesis.stages.evaluate_user import EvaluateUserParams
from mimesis.tracking import stage_run

KINDS = ("frozen", "openai", "hf")


class SimulatorEndpointError(ChatAPIError):
    """The simulator's endpoint cannot be reached or refuses the key or the model."""


@dataclass(frozen=True)
class SimulatorSource:
    """What to score.

    Attributes:
        kind: ``frozen``, ``openai`` or ``hf``.
        target: ``frozen``: the folder; ``openai``: the model id at the endpoint; ``hf``: a
            ``load_base`` name or HF folder.
        name: Row name in the table (not ``real``).
        prompt_style: ``openai``/``hf``: ``prompted_user`` or ``user_simulator``.
        base_url: ``openai``: endpoint base URL, e.g. ``http://127.0.0.1:8000/v1``.
        api_key_env: ``openai``: name of the environment variable holding the key.
        concurrency / timeout_s / max_retries: ``openai`` requests in flight, seconds per
            request, client retries.
    """

    kind: str
    target: str
    name: str = "simulator"
    prompt_style: str = "prompted_user"
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    concurrency: int = 4
    timeout_s: float = 60.0
    max_retries: int = 2

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"simulator kind {self.kind!r} not in {KINDS}")
        if not self.target:
            raise ValueError(f"a {self.kind} simulator needs a folder or model name")
        if self.name == "real" or not self.name:
            raise ValueError("the row name must be non-empty and not 'real' (the ceiling row)")
        if self.prompt_style not in STYLE_VIEWS:
            raise ValueError(f"prompt_style {self.prompt_style!r} not in {sorted(STYLE_VIEWS)}")

    @property
    def model_id(self) -> str:
        return {"frozen": "frozen:", "openai": "openai:", "hf": "hf:"}[self.kind] + self.target

    @property
    def prompt(self) -> str:
        return "user_simulator" if self.kind == "frozen" else self.prompt_style


def load_conversations(path: Path) -> list[LabeledConversation]:
    """Conversations of a JSONL file: ``LabeledConversation`` lines (the label stage's splits) or
    the plain format of the module docstring (``goal``, ``turns`` with ``text`` or ``content``,
    optional ``id``, ``ended`` (default true), ``behaviors``).

    Raises:
        FileNotFoundError: no such file.
        ValueError: a line is not JSON, lacks a goal or turns (the message names the line).
    """
    if not path.is_file():
        raise FileNotFoundError(f"conversations file {path} not found")
    out = []
    for n, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
            out.append(LabeledConversation.model_validate(row) if "scenario" in row
                       else _plain(row, n))
        except (ValueError, KeyError, TypeError) as err:
            raise ValueError(f"{path}:{n}: not a conversation ({err})") from err
    if not out:
        raise ValueError(f"{path} holds no conversation")
    return out


def _plain(row: dict, n: int) -> LabeledConversation:
    if not str(row.get("goal", "")).strip() or not row.get("turns"):
        raise ValueError("needs a non-empty 'goal' and 'turns'")
    turns = [Turn(role=t["role"], text=t.get("text", t.get("content", ""))) for t in row["turns"]]
    labels = [TurnLabel(turn_index=i, reasoning="", reasoning_annotator="none")
              for i, t in enumerate(turns) if t.role == "user"]
    return LabeledConversation(
        id=str(row.get("id", f"line{n}")), turns=turns, labels=labels, end_reasoning="",
        end_reasoning_annotator="none", ended=bool(row.get("ended", True)),
        scenario=Scenario(goal=row["goal"], behaviors=list(row.get("behaviors", [])),
                          annotator="user-file"))


class EndpointUser:
    """``generate_fn`` over an OpenAI-compatible endpoint: one request per chat, concurrently.

    Raises:
        SimulatorEndpointError: the key variable is unset or empty (when built), or the endpoint
            fails after retries (when called).
    """

    def __init__(self, source: SimulatorSource, params: EvaluateUserParams) -> None:
        self.source, self.params = source, params
        self.client = ChatClient(source.target, source.base_url, source.api_key_env,
                                 timeout_s=source.timeout_s, max_retries=source.max_retries,
                                 error=SimulatorEndpointError,
                                 label=f"simulator {source.name!r} ({source.target})",
                                 key_hint=" (--api-key-env names it)")

    def check(self) -> None:
        """One 1-token request, so an unreachable or misaddressed endpoint fails before any
        work. The request is valid for both kinds of endpoint: a chat model, and ``mimesis
        serve``'s simulator view, where the system message is the scenario goal.

        Raises:
            SimulatorEndpointError: unreachable, or the minimal request was refused (4xx).
        """
        reply = self.client.complete(
            [{"role": "system", "content": "You want help writing a short birthday message."},
             {"role": "user", "content": "Hello! How can I help you today?"}],
            max_tokens=1, temperature=0.0)
        if reply.rejected:
            raise SimulatorEndpointError(
                f"{self.client.host} refused a minimal request ({reply.rejected}); for `mimesis "
                f"serve`, --endpoint is its simulator view, http://HOST:PORT/sim/v1")

    def __call__(self, batch: Sequence[Messages]) -> list[str]:
        if not batch:
            return []
        with ThreadPoolExecutor(min(self.source.concurrency, len(batch))) as pool:
            return list(pool.map(self._one, batch))

    def _one(self, view: Messages) -> str:
        p = self.params
        return self.client.complete(api_messages(view), max_tokens=p.max_new_tokens,
                                    temperature=p.temperature, top_p=p.top_p, seed=p.seed).text


def generate(source: SimulatorSource, items: Sequence[EvalItem], params: EvaluateUserParams,
             endpoint: EndpointUser | None = None) -> list[Generated]:
    """One parsed turn per item from ``source`` (progress bar per batch)."""
    desc = f"evaluate_simulator:{source.name}"
    if source.kind == "openai":
        fn = endpoint or EndpointUser(source, params)
        return simulate_runtime(fn, source.prompt_style, items, None, 0, params.max_user_chars,
                                params.max_agent_chars, params.batch_size, desc)
    device_map = params.device_map or None
    if source.kind == "frozen":
        from mimesis.simulator.frozen import load_frozen

        model, tokenizer, _ = load_frozen(Path(source.target), params.dtype, device_map)
        style = "user_simulator"
    else:
        from mimesis.models.base import load_base

        model, tokenizer = load_base(source.target, params.dtype, device_map)
        style = source.prompt_style
    return simulate_local(model, tokenizer, style, items, params, desc)


def evaluate_simulator(source: SimulatorSource, conversations_path: Path, out_dir: Path,
                       params: EvaluateUserParams | None = None) -> dict:
    """Score ``source`` on the conversations of ``conversations_path`` and write the realism
    outputs (``table.md``, ``metrics.json``, ``plots/``, ``generations.jsonl``) to ``out_dir``
    and the MLflow run ``evaluate_simulator``.

    Args:
        source: The simulator.
        conversations_path: JSONL (:func:`load_conversations`).
        out_dir: Output folder (created).
        params: Protocol and statistics settings (default: ``EvaluateUserParams()``).

    Returns:
        The metrics (rows ``source.name`` and ``real``, ``slices``, ``counts``).

    Raises:
        FileNotFoundError / ValueError: see :func:`load_conversations`; no conversation
            could be evaluated.
        SimulatorEndpointError: the endpoint is unreachable or refuses the key (checked with
            one request before any work).
        FrozenSimulatorError: a frozen file's sha256 does not match its meta.json.
    """
    params = params or EvaluateUserParams()
    started = time.time()
    convs = load_conversations(Path(conversations_path))
    items, skipped = build_items(convs, params.max_conversations, params.next_positions,
                                 params.seed)
    if not items:
        raise ValueError(f"no conversation of {conversations_path} can be evaluated: {skipped}")
    endpoint = None
    if source.kind == "openai":
        endpoint = EndpointUser(source, params)
        endpoint.check()
    run_params = {**dataclasses.asdict(params), "simulator": dataclasses.asdict(source),
                  "conversations": str(conversations_path)}
    with stage_run("evaluate_simulator", run_params):
        outputs = {source.name: generate(source, items, params, endpoint)}
        metrics, simulated, real = score(items, outputs, params)
        metrics["counts"] = counts(len(convs), items, skipped, time.time() - started)
        write_outputs(out_dir, metrics, items, outputs, simulated, real,
                      {source.name: source.model_id}, prompts=(source.prompt,))
    print_summary(metrics, [source.name, "real"], out_dir, "evaluate_simulator")
    return metrics
