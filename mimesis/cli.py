"""Command line: ``mimesis run``, ``stage``, ``status``, ``report``, ``deps``, ``envs list``,
``serve``, ``chat``, ``evaluate-simulator``.

The library never imports Prefect; ``mimesis run`` loads the flow lazily.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from mimesis.params import PROFILES, ParamsError, set_profile
from mimesis.pipeline import (
    STAGES,
    StageResult,
    check_params,
    closing_line,
    run_stage,
    stale_reason,
)

app = typer.Typer(help="MIMESIS: learn user simulators from real conversations.",
                  no_args_is_help=True, add_completion=False)
console = Console()

ProfileOpt = Annotated[str | None, typer.Option(
    "--profile", "-p", help=f"One of {', '.join(PROFILES)}; written to params.yaml "
                            "(like `dvc exp run -S profile=...`). Default: keep params.yaml's.")]
RootOpt = Annotated[Path, typer.Option("--root", help="Project root (holds dvc.yaml).")]


@app.callback()
def _entry() -> None:
    """Before any command: the offline, no-telemetry environment defaults (and OpenMP's passive
    wait policy, read once when torch loads), never at ``import mimesis``."""
    from mimesis.runtime_env import configure_environment

    configure_environment()


def _check_root(root: Path) -> Path:
    if not (root / "dvc.yaml").exists():
        console.print(f"[red]{root.resolve()} has no dvc.yaml: run from the project root "
                      "or pass --root[/red]")
        raise typer.Exit(2)
    return root


def _apply_profile(root: Path, profile: str | None) -> None:
    if profile and set_profile(root / "params.yaml", profile):
        console.print(f"params.yaml: profile set to [bold]{profile}[/bold]")


def _table(results: list[StageResult], total: float) -> Table:
    table = Table(title=f"mimesis pipeline — {total:.0f} s")
    for col in ("stage", "ran", "seconds", "why"):
        table.add_column(col)
    for r in results:
        table.add_row(r.name, "yes" if r.ran else "skipped", f"{r.seconds:.1f}", r.reason[:60])
    return table


@app.command()
def run(
    profile: ProfileOpt = None,
    stages: Annotated[str | None, typer.Option(
        help="Comma-separated subset, e.g. 'label,train_user'. Default: all.")] = None,
    force: Annotated[bool, typer.Option(help="Run even if DVC says up to date.")] = False,
    root: RootOpt = Path("."),
) -> None:
    """Run the pipeline as a Prefect flow; each stage runs only if its code, inputs or params
    changed (per dvc.yaml), and every run is tracked in MLflow."""
    root = _check_root(root)
    selected = _parse_stages(stages)
    _apply_profile(root, profile)
    _check_params(root, selected)
    pipeline = _local_flow(root)

    start = time.perf_counter()
    active = profile or _active_profile(root)
    results = pipeline(root=str(root), profile=active, stages=selected, force=force)
    total = time.perf_counter() - start
    console.print(_table(results, total))
    console.print(closing_line(root, results, total, active), soft_wrap=True)
    from mimesis.run_summary import REPORT_DIR, SUMMARY_NAME

    console.print(f"run summary: {root / REPORT_DIR / SUMMARY_NAME}")


def _local_flow(root: Path):
    """The checkout's Prefect flow (``<root>/flows/pipeline.py``), imported here only: the
    library never imports ``flows``, and the wheel does not install it (orchestration lives in
    the project checkout, next to dvc.yaml)."""
    import importlib
    import sys

    checkout = str(root.resolve())
    if not (root / "flows" / "pipeline.py").is_file():
        console.print(f"[red]{root.resolve()} has no flows/pipeline.py: `mimesis run` needs the "
                      "project checkout (use `mimesis stage` or `dvc repro` otherwise)[/red]")
        raise typer.Exit(2)
    if checkout not in sys.path:
        sys.path.insert(0, checkout)
    return importlib.import_module("flows.pipeline").pipeline


@app.command()
def stage(
    name: Annotated[str, typer.Argument(help=f"One of {', '.join(STAGES)}.")],
    force: Annotated[bool, typer.Option(help="Run even if DVC says up to date.")] = False,
    root: RootOpt = Path("."),
) -> None:
    """Run one stage without Prefect (same code path, same dvc.lock bookkeeping)."""
    root = _check_root(root)
    _parse_stages(name)
    _check_params(root, [name])
    start = time.perf_counter()
    result = run_stage(root, name, force=force)
    console.print(_table([result], time.perf_counter() - start))


@app.command()
def status(root: RootOpt = Path(".")) -> None:
    """Which stages are stale and why (``dvc status`` per stage)."""
    root = _check_root(root)
    width = max(map(len, STAGES))
    for name in STAGES:
        reason = stale_reason(root, name)
        state = f"[yellow]stale[/yellow]: {reason}" if reason else "[green]up to date[/green]"
        console.print(f"{name:<{width}} {state}")


@app.command()
def report(root: RootOpt = Path(".")) -> None:
    """(Re)write data/report/summary.md from what data/ holds (the last run's stage times,
    realism, agents, fact reveal, plots); runs nothing."""
    from mimesis.run_summary import write_summary

    root = _check_root(root)
    try:
        path = write_summary(root)
    except ValueError as err:
        console.print(f"[red]{err}[/red]", highlight=False)
        raise typer.Exit(2) from err
    console.print(f"run summary: {path}")


@app.command()
def deps(
    write: Annotated[bool, typer.Option(
        "--write", help="Rewrite the code deps in dvc.yaml (default: only check).")] = False,
    root: RootOpt = Path("."),
) -> None:
    """Check (or, with --write, rewrite) each stage's code deps in dvc.yaml against the modules
    its entry module imports; exits 1 when a check finds a difference."""
    from mimesis.deps import check
    from mimesis.deps import write as write_deps

    root = _check_root(root)
    if write:
        changed = write_deps(root)
        console.print(f"dvc.yaml: code deps rewritten for {', '.join(changed)}" if changed
                      else "dvc.yaml: code deps already derived from the imports")
        return
    bad = [r for r in check(root) if not r.ok]
    for r in bad:
        extra = sorted(set(r.listed) - set(r.derived))
        missing = sorted(set(r.derived) - set(r.listed))
        console.print(f"[yellow]{r.stage}[/yellow]: {len(r.uncovered)} needed files not "
                      f"covered {list(r.uncovered)[:8]}; to add {missing}; to drop {extra}",
                      highlight=False)
    if bad:
        console.print("run [bold]mimesis deps --write[/bold] to fix dvc.yaml")
        raise typer.Exit(1)
    console.print("dvc.yaml: every stage's code deps match its imports")


envs_app = typer.Typer(help="Agent environments (gymnasium API).", no_args_is_help=True)
app.add_typer(envs_app, name="envs")


@envs_app.command("list")
def envs_list() -> None:
    """Every registered environment with its split, scenario count and data source."""
    from mimesis.envs import list_envs

    table = Table(title="mimesis agent environments")
    for col in ("env", "split", "scenarios", "source"):
        table.add_column(col)
    for spec in list_envs():
        count = "procedural (one per seed)" if spec.n_scenarios is None else str(spec.n_scenarios)
        table.add_row(spec.name, spec.split, count, spec.source)
    console.print(table)


def _parse_stages(spec: str | None) -> list[str]:
    if not spec:
        return list(STAGES)
    chosen = [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [s for s in chosen if s not in STAGES]
    if unknown:
        console.print(f"[red]unknown stage(s) {unknown}; choose from {list(STAGES)}[/red]")
        raise typer.Exit(2)
    return chosen


def _check_params(root: Path, names: list[str]) -> None:
    """Every named stage's params, built before anything runs: a typo in the last stage's
    section fails in a second, not after the earlier stages ran."""
    for name in names:
        try:
            check_params(root, name)
        except ParamsError as e:
            console.print(f"[red]{e}[/red]", highlight=False)
            raise typer.Exit(2) from None


def _active_profile(root: Path) -> str:
    from mimesis.params import read_params

    return read_params(root / "params.yaml").get("profile", "default")


DEFAULT_MODEL_NAME = "mimesis-user-simulator"
SimulatorOpt = Annotated[Path, typer.Option(
    "--simulator", help="Frozen simulator folder (sha256-verified before loading).")]
TrustFolderOpt = Annotated[bool, typer.Option(
    "--trust-folder", help="Load a freeze_user folder that has no registry.json beside it, on "
    "its own meta.json alone (logs a warning).")]


def _o(help_text: str, **kwargs: object) -> typer.models.OptionInfo:
    """A typer option with its help text (keeps the serve/chat signatures short)."""
    return typer.Option(help=help_text, **kwargs)


@app.command()
def serve(
    simulator: SimulatorOpt = Path("data/freeze_user/simulator"),
    backend: Annotated[str, _o("transformers (CPU/GPU) or vllm (GPU; pip install "
                               "'mimesis-usersim\\[gpu]').")] = "transformers",
    host: Annotated[str, _o("Bind address; loopback by default.")] = "127.0.0.1",
    port: Annotated[int, _o("TCP port.")] = 8000,
    model_name: Annotated[str, _o("Model id in responses.")] = DEFAULT_MODEL_NAME,
    max_turns: Annotated[int, _o("User turns per episode.")] = 16,
    max_tokens: Annotated[int, _o("Default new tokens per turn.")] = 96,
    max_tokens_limit: Annotated[int, _o("Largest max_tokens a request may ask.")] = 512,
    temperature: Annotated[float, _o("Default sampling temperature.")] = 0.8,
    top_p: Annotated[float, _o("Default nucleus mass.")] = 0.95,
    max_body_bytes: Annotated[int, _o("Largest request body, bytes (else 413).")] = 10**6,
    episode_ttl: Annotated[float, _o("Idle seconds before an episode expires.")] = 3600,
    max_episodes: Annotated[int, _o("Episodes kept (LRU beyond).")] = 10_000,
    batch_window_ms: Annotated[float, _o("Wait for concurrent requests.")] = 10.0,
    max_batch: Annotated[int, _o("Requests per generation call.")] = 16,
    scenarios: Annotated[Path | None, typer.Option(
        help="Label split file whose conversation ids clients may send as scenario_id.")] = None,
    goal: Annotated[str | None, _o("Goal of episodes that name no scenario.")] = None,
    api_key: Annotated[str | None, _o("Agents' key: 'Authorization: Bearer KEY' (required "
                                      "off loopback).", envvar="MIMESIS_API_KEY")] = None,
    private_key: Annotated[str | None, _o("The only key that reads /ep/ID/private.",
                                          envvar="MIMESIS_PRIVATE_KEY")] = None,
    max_episode_bytes: Annotated[int, _o("Text bytes one episode may hold.")] = 256 * 1024,
    max_total_bytes: Annotated[int, _o("Text bytes all episodes may hold (LRU beyond).")]
    = 256 * 1024 * 1024,
    max_messages: Annotated[int, _o("Messages per request (else 400).")] = 256,
    max_message_chars: Annotated[int, _o("Characters per message (else 400).")] = 32_000,
    max_total_chars: Annotated[int, _o("Characters of all messages (else 400).")] = 200_000,
    max_scenario_chars: Annotated[int, _o("Characters of a scenario goal (else 400).")] = 4000,
    deadline_s: Annotated[float, _o("Seconds per request; then its work stops (504).")] = 60.0,
    dtype: Annotated[str | None, _o("float32 (CPU default) / bfloat16.")] = None,
    tensor_parallel_size: Annotated[int, _o("vllm: GPUs per replica.")] = 1,
    gpu_memory_utilization: Annotated[float, _o("vllm: GPU memory share.")] = 0.85,
    trust_folder: TrustFolderOpt = False,
) -> None:
    """Serve the frozen user simulator as an OpenAI-compatible chat-completions API
    (docs/serving_and_scaling.md)."""
    from mimesis.serve.app import run_server
    from mimesis.serve.backends import BackendUnavailableError, load_backend
    from mimesis.serve.batching import BatchingSimulator
    from mimesis.serve.config import ServeConfig, check_bind, load_scenarios
    from mimesis.simulator.frozen import FrozenSimulatorError

    try:
        config = ServeConfig(
            model_name=model_name, max_turns=max_turns, default_max_tokens=max_tokens,
            max_tokens_limit=max_tokens_limit, temperature=temperature, top_p=top_p,
            max_body_bytes=max_body_bytes, episode_ttl_s=episode_ttl, max_episodes=max_episodes,
            batch_window_ms=batch_window_ms, max_batch=max_batch, api_key=api_key,
            private_key=private_key, default_goal=goal, max_episode_bytes=max_episode_bytes,
            max_total_bytes=max_total_bytes, max_messages=max_messages,
            max_message_chars=max_message_chars, max_total_chars=max_total_chars,
            max_scenario_chars=max_scenario_chars, deadline_s=deadline_s)
        check_bind(host, config)  # before loading gigabytes of weights
    except ValueError as err:
        console.print(f"[red]{err}[/red]")
        raise typer.Exit(2) from err
    vllm_opts = ({"tensor_parallel_size": tensor_parallel_size,
                  "gpu_memory_utilization": gpu_memory_utilization} if backend == "vllm" else {})
    try:
        engine = load_backend(backend, simulator, dtype=dtype, batch_size=max_batch,
                              name=model_name, trust_folder=trust_folder, **vllm_opts)
    except (BackendUnavailableError, FrozenSimulatorError, ValueError, OSError) as err:
        console.print(f"[red]{err}[/red]")
        raise typer.Exit(2) from err
    batcher = BatchingSimulator(engine, max_turns=max_turns, window_ms=batch_window_ms,
                                max_batch=max_batch)
    table = load_scenarios(scenarios) if scenarios else None
    console.print(f"serving {simulator} ({backend}) on http://{host}:{port} — episode API: "
                  f"http://{host}:{port}/ep/<episode_id>/v1")
    run_server(batcher, config, host=host, port=port, scenarios=table)


@app.command()
def chat(
    simulator: SimulatorOpt = Path("data/freeze_user/simulator"),
    scenarios: Annotated[Path, _o("Label split file to take the scenario from.")]
    = Path("data/label/test.jsonl"),
    conversation: Annotated[str | None, _o("Conversation id in --scenarios.")] = None,
    index: Annotated[int, _o("Position in --scenarios (when no id).")] = 0,
    goal: Annotated[str | None, _o("Type a goal instead of a test scenario.")] = None,
    behaviors: Annotated[str, _o("With --goal: behaviour ids, e.g. 'B3,B5'.")] = "",
    show_thoughts: Annotated[bool, typer.Option(
        help="Reveal the hidden goal and the user's private reasoning.")] = False,
    max_turns: Annotated[int, _o("User turns at most.")] = 16,
    max_tokens: Annotated[int, _o("New tokens per user turn.")] = 96,
    temperature: Annotated[float, _o("Sampling temperature (0 = greedy).")] = 0.8,
    top_p: Annotated[float, _o("Nucleus mass.")] = 0.95,
    seed: Annotated[int | None, _o("Sampling seed.")] = None,
    save: Annotated[Path | None, _o("Write the episode state (JSON) here.")] = None,
    trust_folder: TrustFolderOpt = False,
) -> None:
    """Play the agent against the frozen user simulator in the terminal (type /quit to stop)."""
    from mimesis.serve import chat as chat_mod
    from mimesis.simulator.frozen import FrozenSimulatorError
    from mimesis.simulator.runtime import UserSimulator

    try:
        scenario = chat_mod.pick_scenario(scenarios, conversation, index, goal,
                                          [b.strip() for b in behaviors.split(",") if b.strip()])
    except (FileNotFoundError, KeyError, IndexError, ValueError) as err:
        hint = " (or pass --goal)" if isinstance(err, FileNotFoundError) else ""
        console.print(f"[red]{err}[/red]{hint}")
        raise typer.Exit(2) from err
    try:
        generate = chat_mod.load_generate_fn(simulator, max_tokens, temperature, top_p, seed,
                                             trust_folder)
    except (FrozenSimulatorError, OSError) as err:
        console.print(f"[red]{err}[/red]")
        raise typer.Exit(2) from err
    state = chat_mod.run_chat(UserSimulator(generate, max_turns=max_turns), scenario,
                              lambda: chat_mod.read_line(console), console, show_thoughts)
    if save:
        save.parent.mkdir(parents=True, exist_ok=True)
        save.write_text(state.model_dump_json(indent=1))


@app.command("evaluate-simulator")
def evaluate_simulator(
    simulator: Annotated[Path | None, _o("A frozen simulator folder to score.")] = None,
    endpoint: Annotated[str | None, _o("An OpenAI-compatible endpoint to score, e.g. "
                                       "http://127.0.0.1:8000/v1 (with --model).")] = None,
    model: Annotated[str | None, _o("Model id at --endpoint.")] = None,
    api_key_env: Annotated[str, _o("Environment variable holding --endpoint's API key.")]
    = "OPENAI_API_KEY",
    hf: Annotated[str | None, _o("A local HF model (folder or load_base name) to score.")]
    = None,
    prompt_style: Annotated[str, _o("--endpoint/--hf system prompt: prompted_user or "
                                    "user_simulator.")] = "prompted_user",
    conversations: Annotated[Path, _o("JSONL of real conversations (label split or the "
                                      "README's plain format).")] = Path("data/label/test.jsonl"),
    out: Annotated[Path, _o("Output folder (table.md, metrics.json, plots/).")]
    = Path("data/evaluate_simulator"),
    name: Annotated[str, _o("Row name in the table.")] = "simulator",
    params: Annotated[Path, _o("params.yaml whose evaluate_user section sets the protocol "
                               "(defaults when absent).")] = Path("params.yaml"),
    profile: Annotated[str | None, _o(f"Profile of --params ({', '.join(PROFILES)}); "
                                      "not written.")] = None,
    max_conversations: Annotated[int | None, _o("Override: conversations (0 = all).")] = None,
    concurrency: Annotated[int, _o("--endpoint: requests in flight.")] = 4,
) -> None:
    """Score any user simulator's realism on real conversations: a frozen folder, an
    OpenAI-compatible endpoint or a local HF model (the evaluate_user protocol and table)."""
    import dataclasses

    from mimesis.eval.evaluate_simulator import SimulatorSource
    from mimesis.eval.evaluate_simulator import evaluate_simulator as score_simulator
    from mimesis.openai_chat import ChatAPIError
    from mimesis.simulator.frozen import FrozenSimulatorError

    chosen = [k for k, v in (("--simulator", simulator), ("--endpoint", endpoint), ("--hf", hf))
              if v is not None]
    if len(chosen) != 1 or (endpoint is not None and not model):
        console.print("[red]give exactly one of --simulator, --endpoint (with --model) or "
                      f"--hf; got {chosen or 'none'}[/red]")
        raise typer.Exit(2)
    try:
        settings = _evaluate_params(params, profile)
        if max_conversations is not None:
            settings = dataclasses.replace(settings, max_conversations=max_conversations)
        kind, target = (("frozen", str(simulator)) if simulator is not None else
                        ("openai", model) if endpoint is not None else ("hf", hf))
        source = SimulatorSource(kind, target or "", name=name, prompt_style=prompt_style,
                                 base_url=endpoint or "", api_key_env=api_key_env,
                                 concurrency=concurrency)
        score_simulator(source, conversations, out, settings)
    except ChatAPIError as err:
        console.print(f"[red]cannot reach the simulator: {err}[/red]\nIs the server running "
                      "at --endpoint, and does --api-key-env name a set variable?",
                      highlight=False)
        raise typer.Exit(2) from err
    except (FileNotFoundError, FrozenSimulatorError, ParamsError, ValueError, OSError) as err:
        console.print(f"[red]{err}[/red]", highlight=False)
        raise typer.Exit(2) from err
    console.print(f"realism table: {out / 'table.md'}")


def _evaluate_params(path: Path, profile: str | None):
    """``EvaluateUserParams`` from ``path``'s evaluate_user section (defaults if no file)."""
    from mimesis.params import build, stage_params
    from mimesis.stages.evaluate_user import EvaluateUserParams

    if not path.is_file():
        return EvaluateUserParams()
    return build(EvaluateUserParams, stage_params("evaluate_user", path, profile), "evaluate_user")


if __name__ == "__main__":
    app()
