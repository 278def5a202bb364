"""The simulator's own commands: ``mimesis serve``, ``chat`` and ``evaluate-simulator``
(registered on the app in :mod:`mimesis.cli`).

Each imports its heavy modules (server, weights, scoring) inside the command, so ``mimesis
--help`` stays fast.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from mimesis.params import PROFILES, ParamsError

console = Console()

DEFAULT_MODEL_NAME = "mimesis-user-simulator"
ENDPOINT_RETRIES = 2  # evaluate-simulator's client retries per request (an interactive command)
SimulatorOpt = Annotated[Path, typer.Option(
    "--simulator", help="Frozen simulator folder (sha256-verified before loading).")]
TrustFolderOpt = Annotated[bool, typer.Option(
    "--trust-folder", help="Load a freeze_user folder that has no registry.json beside it, on "
    "its own meta.json alone (logs a warning).")]


def _o(help_text: str, **kwargs: object) -> typer.models.OptionInfo:
    """A typer option with its help text (keeps the serve/chat signatures short)."""
    return typer.Option(help=help_text, **kwargs)


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
    deadline_s: Annotated[float, _o("Seconds per request; then its work stops (504).")] = 300.0,
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
    for line in (f"serving {simulator} ({backend}) on http://{host}:{port}",
                 f"episode API: http://{host}:{port}/ep/<episode_id>/v1"):
        console.print(line, markup=False, highlight=False, soft_wrap=True)  # whole lines
    run_server(batcher, config, host=host, port=port, scenarios=table)


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
    timeout_s: Annotated[float, _o("--endpoint: seconds per request before the client gives "
                                   "up (a CPU server with many requests in flight needs "
                                   "minutes).")] = 60.0,
) -> None:
    """Score any user simulator's realism on real conversations: a frozen folder, an
    OpenAI-compatible endpoint or a local HF model (the evaluate_user protocol and table)."""
    import dataclasses

    from mimesis.eval.realism.evaluate_simulator import evaluate_simulator as score_simulator
    from mimesis.openai_chat import ChatAPIError
    from mimesis.simulator.frozen import FrozenSimulatorError
    from mimesis.users.spec import UserSpec

    chosen = [k for k, v in (("--simulator", simulator), ("--endpoint", endpoint), ("--hf", hf))
              if v is not None]
    if len(chosen) != 1:
        console.print("[red]give exactly one of --simulator, --endpoint (with --model) or "
                      f"--hf; got {chosen or 'none'}[/red]")
        raise typer.Exit(2)
    if endpoint is not None and not model:
        console.print("[red]--endpoint needs --model: the model id to send (a `mimesis serve` "
                      "answers to any, e.g. mimesis-user-simulator)[/red]")
        raise typer.Exit(2)
    if endpoint is not None and not os.environ.get(api_key_env):
        console.print(f"[red]the API key variable {api_key_env} (--api-key-env) is unset or "
                      f"empty: export {api_key_env}=<the server's key> (any non-empty value "
                      "for a `mimesis serve` started without --api-key)[/red]", highlight=False)
        raise typer.Exit(2)
    try:
        settings = _evaluate_params(params, profile)
        if max_conversations is not None:
            settings = dataclasses.replace(settings, max_conversations=max_conversations)
        kind, target = (("frozen", str(simulator)) if simulator is not None else
                        ("openai", model) if endpoint is not None else ("prompted", hf))
        spec = UserSpec(name, kind, model=target or "", prompt_style=prompt_style,
                        base_url=endpoint or "", api_key_env=api_key_env,
                        concurrency=concurrency, timeout_s=timeout_s,
                        max_retries=ENDPOINT_RETRIES)
        score_simulator(spec, conversations, out, settings)
    except ChatAPIError as err:
        console.print(f"[red]cannot reach the simulator: {err}[/red]\nIs the server running "
                      f"at --endpoint, and does it take the key in {api_key_env}?",
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
