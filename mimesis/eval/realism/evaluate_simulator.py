"""Score any user simulator's realism on real conversations: the Python API behind
``mimesis evaluate-simulator``.

Simulators: a :class:`~mimesis.users.spec.UserSpec` of kind

* ``frozen`` — a frozen simulator folder (``model`` = ``data/freeze_user/simulator``,
  sha256-verified), with its training prompt (``user_simulator``);
* ``openai`` — any OpenAI-compatible chat-completions endpoint (``mimesis serve``, vLLM, a
  hosted API) built by :func:`mimesis.users.factory.make_user`, the API key read from the
  environment variable named by ``api_key_env``; an opening turn gets
  :data:`mimesis.users.chat.OPENING_CUE` as the message to answer;
* ``prompted`` (``hf``) — a local HF model (``load_base`` name or folder) with a prompt style:
  ``prompted_user`` (an assistant model prompted to act as a user) or ``user_simulator``.

The spec's sampling, dtype and seed are the ``evaluate_user`` protocol's (:func:`protocol_spec`),
so every simulator is sampled alike.

Conversations: ``data/label/test.jsonl`` (``LabeledConversation``), or a JSONL of one's own with
one conversation per line (:func:`load_conversations`)::

    {"id": "c1", "goal": "get a cover letter for a barista job",
     "turns": [{"role": "user", "text": "hi i need a cover letter"},
               {"role": "assistant", "text": "Sure! What's the job?"}, ...],
     "ended": true}

The protocol, the metrics and the outputs are the ``evaluate_user`` stage's (one simulator row
beside the real-vs-real ceiling): :mod:`mimesis.eval.realism.run`, logged to the MLflow run
``evaluate_simulator``.
"""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import Sequence
from pathlib import Path

from mimesis.eval.realism.generate import Generated, simulate_local, simulate_runtime
from mimesis.eval.realism.protocol import EvalItem, build_items
from mimesis.eval.realism.run import RealismParams, counts, print_summary, score, write_outputs
from mimesis.schemas import LabeledConversation, Scenario, Turn, TurnLabel
from mimesis.tracking import stage_run
from mimesis.users.chat import OpenAIUser
from mimesis.users.spec import UserSamplingParams, UserSpec

KINDS = ("frozen", "openai", "prompted")
KEY_HINT = " (--api-key-env names it)"


def protocol_spec(spec: UserSpec, params: RealismParams) -> UserSpec:
    """``spec`` sampled by the ``evaluate_user`` protocol (sampling, dtype, seed of
    ``params``).

    Raises:
        ValueError: a kind outside :data:`KINDS`, or the row name ``real`` (the ceiling row).
    """
    if spec.kind not in KINDS:
        raise ValueError(f"simulator kind {spec.kind!r} not in {KINDS}")
    if spec.name == "real":
        raise ValueError("the row name must not be 'real' (the ceiling row)")
    if spec.kind != "openai" and not spec.model:
        raise ValueError(f"a {spec.kind} simulator needs a folder or model name")
    sampling = UserSamplingParams(temperature=params.temperature, top_p=params.top_p,
                                  max_new_tokens=params.max_new_tokens,
                                  batch_size=params.batch_size)
    return spec.with_sampling(sampling, dtype=params.dtype, seed=params.seed)


def model_id(spec: UserSpec) -> str:
    """The simulator's id in the outputs (``frozen:<folder>``, ``openai:<model>``,
    ``hf:<model>`` for ``prompted``, as the realism tables have always named it)."""
    return {"frozen": "frozen:", "openai": "openai:", "prompted": "hf:"}[spec.kind] + spec.model


def prompt_of(spec: UserSpec) -> str:
    """The system prompt style the simulator is scored with (a frozen one: its own)."""
    return "user_simulator" if spec.kind == "frozen" else spec.prompt_style


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


def endpoint_user(spec: UserSpec) -> OpenAIUser:
    """The ``openai`` simulator's ``generate_fn`` (:func:`~mimesis.users.factory.make_user`),
    sending the protocol's seed with every request.

    Raises:
        UserEndpointError: the key variable is unset or empty.
    """
    from mimesis.users.factory import make_user

    fn = make_user(spec, key_hint=KEY_HINT).generate_fn
    fn.reseed(spec.seed)
    return fn


def generate(spec: UserSpec, items: Sequence[EvalItem], params: RealismParams,
             endpoint: OpenAIUser | None = None) -> list[Generated]:
    """One parsed turn per item from ``spec`` (sampled as :func:`protocol_spec` says; progress
    bar per batch)."""
    desc = f"evaluate_simulator:{spec.name}"
    if spec.kind == "openai":
        fn = endpoint or endpoint_user(spec)
        return simulate_runtime(fn, spec.prompt_style, items, None, 0, params.max_user_chars,
                                params.max_agent_chars, params.batch_size, desc)
    from mimesis.users.factory import load_weights

    model, tokenizer = load_weights(spec, params.device_map or None)
    return simulate_local(model, tokenizer, prompt_of(spec), items, params, desc)


def evaluate_simulator(spec: UserSpec, conversations_path: Path, out_dir: Path,
                       params: RealismParams | None = None) -> dict:
    """Score ``spec`` on the conversations of ``conversations_path`` and write the realism
    outputs (``table.md``, ``metrics.json``, ``plots/``, ``generations.jsonl``) to ``out_dir``
    and the MLflow run ``evaluate_simulator``.

    Args:
        spec: The simulator (kind ``frozen``, ``openai`` or ``prompted``; its name is the row;
            its sampling, dtype and seed are replaced by ``params``', :func:`protocol_spec`).
        conversations_path: JSONL (:func:`load_conversations`).
        out_dir: Output folder (created).
        params: Protocol and statistics settings (default: ``RealismParams()``).

    Returns:
        The metrics (rows ``spec.name`` and ``real``, ``slices``, ``counts``).

    Raises:
        FileNotFoundError / ValueError: see :func:`load_conversations` and
            :func:`protocol_spec`; no conversation could be evaluated.
        UserEndpointError: the endpoint is unreachable or refuses the key (checked with one
            request before any work).
        FrozenSimulatorError: a frozen file's sha256 does not match its meta.json.
    """
    params = params or RealismParams()
    spec = protocol_spec(spec, params)
    started = time.time()
    convs = load_conversations(Path(conversations_path))
    items, skipped = build_items(convs, params.max_conversations, params.next_positions,
                                 params.seed)
    if not items:
        raise ValueError(f"no conversation of {conversations_path} can be evaluated: {skipped}")
    endpoint = None
    if spec.kind == "openai":
        endpoint = endpoint_user(spec)
        endpoint.check()
    run_params = {**dataclasses.asdict(params), "simulator": dataclasses.asdict(spec),
                  "conversations": str(conversations_path)}
    with stage_run("evaluate_simulator", run_params):
        outputs = {spec.name: generate(spec, items, params, endpoint)}
        metrics, simulated, real = score(items, outputs, params)
        metrics["counts"] = counts(len(convs), items, skipped, time.time() - started)
        write_outputs(out_dir, metrics, items, outputs, simulated, real,
                      {spec.name: model_id(spec)}, prompts=(prompt_of(spec),))
    print_summary(metrics, [spec.name, "real"], out_dir, "evaluate_simulator")
    return metrics
