"""Stage ``evaluate_user``: offline realism of the frozen user simulator (user-side metrics).

Reads ``<label>/test.jsonl`` (held-out real conversations, ``LabeledConversation``) and the frozen
simulator ``<freeze_user>/simulator`` (+ its ``meta.json``, whose ``base_model`` names the base
prompted as a user for the baseline). On a seeded sample of test conversations, split into two
halves by conversation, each simulator writes the first user turn from the scenario alone and the
next user turn at a few positions after agent replies, given the real history (always the one after
the final agent reply when the real user ended there). Rows: trained simulator, prompted baseline,
real vs real (the ceiling). Metrics: C2ST Turing distance with a permutation p-value and a
bootstrap CI over conversations, beside it the scored positions (share of positions with a
spoken turn) and the distance over all positions (lost ones as empty turns, with its paired
trained − baseline difference), turn-loss rate and realism index, the raw leak and raw empty
rates of each position's first draw, style distances,
behaviour-frequency JS, goal identifiability, opening quality, reasoning rate, first-turn
diversity, intent decomposition, termination F1, role adherence; the two-sample ones also per
behaviour. Real and simulated turns are cut to one character cap (``max_turn_chars``).
Scoring and outputs are :mod:`mimesis.eval.realism.run`'s, shared with ``mimesis
evaluate-simulator`` (any simulator: :mod:`mimesis.eval.realism.evaluate_simulator`).

Needs only ``freeze_user`` and ``label``: the agents and the fact-reveal check are the
``evaluate_agents`` stage, so a change to an agent stage does not re-run this one.

Writes to ``<out>``: ``metrics.json``, ``headline.json`` (what ``dvc metrics show`` prints:
:mod:`mimesis.eval.headline`), ``table.md``,
``plots/{lengths,behaviors}.png`` and ``generations.jsonl`` (every generated turn, reasoning in
its own field). Everything is also logged to the MLflow run ``evaluate_user``.

Run: ``python -m mimesis.stages.evaluate_user --freeze-user data/freeze_user --label data/label
--out data/evaluate_user`` (or ``dvc repro evaluate_user``).
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import time
from dataclasses import dataclass, field
from pathlib import Path

from mimesis.eval.headline import write_headline
from mimesis.eval.realism.generate import VIEW_STYLES, simulate_local
from mimesis.eval.realism.protocol import build_items
from mimesis.eval.realism.run import RealismParams, counts, print_summary, score, write_outputs
from mimesis.io import read_jsonl, write_json
from mimesis.params import build, stage_params
from mimesis.runtime_env import configure_environment
from mimesis.schemas import LabeledConversation
from mimesis.tracking import stage_run


@dataclass(frozen=True)
class EvaluateUserParams(RealismParams):
    """Parameters of the ``evaluate_user`` section of params.yaml (active profile applied): the
    realism protocol and statistics (:class:`~mimesis.eval.realism.run.RealismParams`), whether
    to score at all, and the active profile."""

    enabled: bool = field(default=True, metadata={"help": "false: score nothing, write a note "
                                                  "(a profile that only trains agents)"})
    profile: str = "default"


def run(freeze_user_dir: Path, label_dir: Path, out_dir: Path,
        params: EvaluateUserParams) -> Path:
    """Evaluate the frozen simulator and the prompted baseline against real users (module
    docstring); returns ``out_dir``.

    Raises:
        FileNotFoundError: ``test.jsonl`` or the frozen simulator is missing.
        FrozenSimulatorError: a frozen file's sha256 does not match its meta.json.
        KeyError: the frozen simulator's meta.json names no ``base_model``.
    """
    if not params.enabled:
        return write_disabled(out_dir, params)
    import mlflow

    started = time.time()
    convs = list(read_jsonl(label_dir / "test.jsonl", LabeledConversation))
    items, skipped = build_items(convs, params.max_conversations, params.next_positions,
                                 params.seed)
    with stage_run("evaluate_user", dataclasses.asdict(params)):
        outputs, model_ids = generate_both(freeze_user_dir, items, params)
        metrics, simulated, real = score(items, outputs, params)
        metrics["counts"] = counts(len(convs), items, skipped, time.time() - started)
        mlflow.log_dict(skipped, "skipped_conversations.json")  # id -> reason (malformed turns)
        write_outputs(out_dir, metrics, items, outputs, simulated, real, model_ids,
                      prompts=("user_simulator", "prompted_user"))
    print_summary(metrics, ["trained", "baseline", "real"], out_dir, "evaluate_user")
    return out_dir


def write_disabled(out_dir: Path, params: EvaluateUserParams) -> Path:
    """The stage's declared outputs when ``enabled`` is false: ``metrics.json`` saying so (with
    the params), a one-line ``table.md``, an empty ``generations.jsonl`` and ``plots/``. Nothing
    is generated or logged to MLflow. Returns ``out_dir``."""
    out_dir.mkdir(parents=True, exist_ok=True)
    write_json(out_dir / "metrics.json", {"enabled": False, "params": dataclasses.asdict(params)})
    write_headline(out_dir, {})
    (out_dir / "table.md").write_text("Realism not scored in this profile "
                                      "(evaluate_user.enabled: false).\n")
    (out_dir / "generations.jsonl").write_text("")
    (out_dir / "plots").mkdir(exist_ok=True)
    print("evaluate_user: disabled (evaluate_user.enabled: false); nothing scored")
    return out_dir


def generate_both(freeze_user_dir: Path, items: list, params: EvaluateUserParams) -> tuple[dict, dict]:
    """Generations of the trained simulator, then of its base model prompted as a user (loaded
    one at a time to keep memory low), both through the RL user's sampler and runtime
    (:func:`~mimesis.eval.realism.generate.simulate_local`)."""
    from mimesis.models.base import load_base
    from mimesis.simulator.frozen import load_frozen, turn_prefill

    device_map = params.device_map or None
    model, tokenizer, meta = load_frozen(freeze_user_dir / "simulator", params.dtype, device_map)
    base_name = meta.get("base_model")
    if not base_name:
        raise KeyError(f"{freeze_user_dir}/simulator/meta.json has no 'base_model'")
    model_ids = {"trained": f"frozen:{meta.get('registered_model', freeze_user_dir.name)}",
                 "baseline": f"base:{base_name}"}
    outputs = {}
    prefills = {"trained": turn_prefill(meta), "baseline": ""}  # the baseline was never taught it
    for name in ("trained", "baseline"):
        if name == "baseline":
            del model
            gc.collect()
            model, tokenizer = load_base(base_name, params.dtype, device_map)
        outputs[name] = simulate_local(model, tokenizer, VIEW_STYLES[name], items, params,
                                       desc=f"evaluate_user:{name}", prefill=prefills[name])
    return outputs, model_ids


def load_params(params_path: Path = Path("params.yaml")) -> EvaluateUserParams:
    """This stage's params from ``params_path`` (active profile applied).

    Raises:
        mimesis.params.ParamsError: a missing section, an unknown key or an invalid value.
    """
    return build(EvaluateUserParams, stage_params("evaluate_user", params_path), "evaluate_user")


def main(argv: list[str] | None = None) -> None:
    configure_environment()
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--freeze-user", type=Path, default=Path("data/freeze_user"))
    parser.add_argument("--label", type=Path, default=Path("data/label"))
    parser.add_argument("--out", type=Path, default=Path("data/evaluate_user"))
    parser.add_argument("--params", type=Path, default=Path("params.yaml"))
    args = parser.parse_args(argv)
    params = load_params(Path(args.params))
    run(args.freeze_user, args.label, args.out, params)


if __name__ == "__main__":
    main()
