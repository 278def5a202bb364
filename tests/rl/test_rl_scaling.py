"""Agent RL past one machine, CPU side: the generator switch (and its clear refusal without
vLLM), the served simulator (``mimesis serve`` on loopback) as the user inside a GRPO step, and
rank-0-only outputs under a 2-process ``accelerate launch`` (gloo)."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from mimesis.rl.generators import (
    GeneratorUnavailableError,
    VLLMSampler,
    agent_sampler,
    require_generator,
)

_spec = importlib.util.spec_from_file_location(
    "train_agent_data", Path(__file__).with_name("test_train_agent_data.py"))
data = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(data)
_serve_spec = importlib.util.spec_from_file_location(
    "serve_api", (Path(__file__).parents[1] / "serve" / "test_serve_api.py"))
serve_api = importlib.util.module_from_spec(_serve_spec)
_serve_spec.loader.exec_module(serve_api)
REPO = Path(__file__).resolve().parents[2]
NO_VLLM = importlib.util.find_spec("vllm") is None


def test_generator_switch_sets_trls_vllm_mode(tmp_path):
    from mimesis.rl.agent_training import grpo_config

    cpu = grpo_config(data.small_params(), tmp_path, 64)
    assert not cpu.use_vllm
    server = grpo_config(data.small_params(generator="vllm-server", vllm_server_port=8123),
                         tmp_path, 64)
    assert server.use_vllm and server.vllm_mode == "server" and server.vllm_server_port == 8123
    colocate = grpo_config(data.small_params(generator="vllm-colocate"), tmp_path, 64)
    assert colocate.use_vllm and colocate.vllm_mode == "colocate"
    with pytest.raises(ValueError, match="generator"):
        data.small_params(generator="vllm")


def test_agent_sampler_picks_the_cpu_sampler_or_trls_engine():
    from mimesis.models.base import load_base
    from mimesis.models.engine.sampling import SamplingParams, TokenSampler

    model, tok = load_base("tiny-llama")
    trainer = SimpleNamespace(processing_class=tok)
    assert isinstance(agent_sampler(trainer, model, SamplingParams(), "cpu"), TokenSampler)
    with pytest.raises(GeneratorUnavailableError, match="no vLLM engine"):
        agent_sampler(trainer, model, SamplingParams(), "vllm-server")

    class Client:  # TRL's VLLMClient.generate, as `trl vllm-serve` answers
        def __init__(self) -> None:
            self.calls: list = []

        def generate(self, prompts, max_tokens, **kw):
            self.calls.append((len(prompts), max_tokens, kw["generation_kwargs"]))
            return {"completion_ids": [[7] * max_tokens for _ in prompts],
                    "logprobs": [[[-0.5]] * max_tokens for _ in prompts]}

    client = Client()
    trainer.vllm_generation = SimpleNamespace(mode="server", vllm_client=client)
    sampler = agent_sampler(trainer, model, SamplingParams(), "vllm-server")
    assert isinstance(sampler, VLLMSampler)
    samples = sampler([[1, 2], [3], [4, 5]], [2, 3, 2])
    assert [len(s.ids) for s in samples] == [2, 3, 2] and samples[0].logprobs == [-0.5, -0.5]
    assert sorted(c[:2] for c in client.calls) == [(1, 3), (2, 2)]  # one request per limit
    assert client.calls[0][2] == {"stop_token_ids": [tok.eos_token_id]}


@pytest.mark.skipif(not NO_VLLM, reason="checks the refusal where vLLM is missing")
def test_vllm_generator_without_vllm_fails_before_any_model_loads(tmp_path):
    from mimesis.stages.distill_agent import DistillAgentParams
    from mimesis.stages.distill_agent import run as distill
    from mimesis.stages.train_agent import TrainAgentParams, run

    for name in ("vllm-colocate", "vllm-server"):
        with pytest.raises(GeneratorUnavailableError, match="needs vLLM.*generator: cpu"):
            require_generator(name)
    params = data.small_params(TrainAgentParams, generator="vllm-server")
    with pytest.raises(GeneratorUnavailableError):  # no freeze_user folder: nothing was read
        run(tmp_path / "missing", tmp_path / "out", params)
    with pytest.raises(GeneratorUnavailableError):
        distill(tmp_path / "missing", None, tmp_path / "out",
                data.small_params(DistillAgentParams, generator="vllm-colocate"))
    assert not (tmp_path / "out").exists()


def _served_user_arm(url: str):
    from mimesis.users.spec import UserSpec

    return UserSpec(name="grpo-served", kind="served", base_url=url, api_key_env="")


def test_served_user_keeps_the_servers_private_reasoning():
    from mimesis.models.base import load_base
    from mimesis.models.engine.sampling import SamplingParams, TokenSampler
    from mimesis.rollout.engine import RolloutEngine
    from mimesis.rollout.records import RolloutParams, ScenarioSpec
    from mimesis.stages.train_agent import arm_user

    model, tok = load_base("tiny-llama")
    agent = TokenSampler(model, tok, SamplingParams(max_new_tokens=6), seed=0)
    with serve_api.live_server(serve_api.ScriptedUser(end_at=2)) as url:
        sim = arm_user(_served_user_arm(url), None, data.small_params(max_turns=3))
        engine = RolloutEngine(agent, tok, sim, RolloutParams(
            group_size=2, max_concurrent=4, max_turns=3, max_new_tokens=6), progress=False)
        episodes = engine.play([(ScenarioSpec(env="FunctionGym", seed=s), s) for s in (1, 1)])
    for ep in episodes:
        user_turns = [t for t in ep.turns if t.obs_source == "user"]
        assert user_turns and user_turns[0].obs == "turn 0"  # reasoning stripped server-side
        assert "secret about" in user_turns[0].user_reasoning  # and read back from /private
        assert all("secret about" not in m["content"] for m in ep.messages)


def test_grpo_step_against_mimesis_serve_transformers_backend(tmp_path):
    """One GRPO step whose user is ``mimesis serve`` (transformers backend, tiny model) on
    loopback, reached through the served training-user path."""
    from mimesis.models.base import load_base
    from mimesis.models.lora import LoraParams
    from mimesis.rl import agent_training as rl
    from mimesis.rl.grpo import TurnCreditGRPOTrainer
    from mimesis.serve.app import create_app
    from mimesis.serve.backends import TransformersBackend
    from mimesis.serve.batching import BatchingSimulator
    from mimesis.serve.config import ServeConfig
    from mimesis.serve.local import serve_in_thread
    from mimesis.stages.train_agent import arm_user

    sim_model, sim_tok = load_base("tiny-llama")
    agent, tok = load_base("tiny-llama")
    params = data.small_params(max_turns=2)
    backend = TransformersBackend(sim_model.eval(), sim_tok, batch_size=8)
    served = BatchingSimulator(backend, max_turns=params.max_turns)
    with serve_in_thread(create_app(served, ServeConfig())) as url:
        user = arm_user(_served_user_arm(url), None, params)
        trainer = rl.build_trainer(TurnCreditGRPOTrainer, agent, tok, params,
                                   data.scripted_user(sim_model, sim_tok), tmp_path / "ckpt", [],
                                   peft_config=LoraParams(dropout=0.0).peft_config(),
                                   simulator=user)
        rl.train(trainer, None)
    assert trainer.state.global_step == 1 and len(trainer.episodes) == 8
    assert any(t.obs_source == "user" for _, ep in trainer.episodes for t in ep.turns)


DRIVER = '''
import json, os, sys
from pathlib import Path
root = Path(sys.argv[1])
out = root / "train_agent"
writes = []
def audit(event, args):  # files this process opens for writing under the stage output
    if event == "open" and isinstance(args[0], str) and str(out) in args[0] \\
            and isinstance(args[1], str) and any(c in args[1] for c in "wax+"):
        writes.append(args[0])
sys.addaudithook(audit)
import importlib.util
spec = importlib.util.spec_from_file_location("d", sys.argv[2])
data = importlib.util.module_from_spec(spec); spec.loader.exec_module(data)
from mimesis.stages.train_agent import TrainAgentParams, run
params = data.small_params(TrainAgentParams, base_model="tiny-llama", steps=1,
                           arms=[{"name": "grpo", "user": "frozen"}])
run(root / "freeze_user", out, params)
rank = os.environ["RANK"]
(root / f"writes-{rank}.json").write_text(json.dumps(
    {"world": os.environ["WORLD_SIZE"], "writes": writes}))
'''


@pytest.mark.slow
def test_two_process_accelerate_launch_writes_outputs_on_rank_zero_only(tmp_path,
                                                                     empty_mlflow_store):
    data.build_frozen_tiny(tmp_path / "freeze_user" / "simulator")
    (tmp_path / "driver.py").write_text(DRIVER)
    env = {**os.environ, "MLFLOW_TRACKING_URI": empty_mlflow_store(tmp_path / "mlflow.db"),
           "MIMESIS_EXPERIMENT": "test-ranks", "PYTHONPATH": str(REPO),
           "OMP_NUM_THREADS": "1"}
    accelerate = Path(sys.executable).with_name("accelerate")
    done = subprocess.run([str(accelerate), "launch", "--config_file",
                           str(REPO / "configs/accelerate/cpu2.yaml"), "--main_process_port",
                           "29547", str(tmp_path / "driver.py"), str(tmp_path),
                           str(Path(__file__).with_name("test_train_agent_data.py"))],
                          check=False, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    ranks = {r: json.loads((tmp_path / f"writes-{r}.json").read_text()) for r in ("0", "1")}
    assert ranks["0"]["world"] == ranks["1"]["world"] == "2"
    # rank 1 wrote nothing but transformers' own per-process checkpoint files (rng state)
    assert [w for w in ranks["1"]["writes"] if "/checkpoints/" not in w] == []
    assert any(w.endswith("grpo/meta.json") for w in ranks["0"]["writes"])
    meta = json.loads((tmp_path / "train_agent" / "grpo" / "meta.json").read_text())
    assert meta["steps"] == 1 and (tmp_path / "train_agent" / "grpo" / "model").is_dir()
    import mlflow

    mlflow.set_tracking_uri(env["MLFLOW_TRACKING_URI"])
    runs = mlflow.search_runs(experiment_names=["test-ranks"], output_format="list")
    assert sorted(r.info.run_name for r in runs) == ["train_agent", "train_agent/grpo"]
