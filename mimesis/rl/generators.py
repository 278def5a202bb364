"""Where the agent's rollout tokens come from: the CPU sampler, or vLLM through TRL.

The params switch ``generator`` (``train_agent`` / ``distill_agent``):

* ``cpu`` — :class:`~mimesis.models.engine.sampling.TokenSampler` on the trainer's own model (transformers
  forwards with KV-cache reuse; any device). The default, and the only choice without vLLM.
* ``vllm-colocate`` — TRL's colocated vLLM engine (``GRPOConfig(use_vllm=True,
  vllm_mode="colocate")``): one engine in every training process, on its GPU, taking
  ``vllm_gpu_memory_utilization`` of it.
* ``vllm-server`` — ``trl vllm-serve`` on other GPUs (``vllm_mode="server"``, reached at
  ``vllm_server_host:vllm_server_port``; docs/serving_and_scaling.md "Multi-GPU agent RL").

Either vLLM mode: TRL builds the engine and, before every ``rollout_func`` call at a new optimizer
step, pushes the policy's current weights into it (``GRPOTrainer._generate`` →
``VLLMGeneration.sync_weights``: LoRA merged, ZeRO-3 gathered). Our multi-turn ``rollout_func``
then samples each agent turn from that engine through :class:`VLLMSampler` — one request per
live episode, each with its own token limit — instead of TRL's single-turn ``generate``. vLLM's
log-probs (``processed_logprobs``: after temperature) feed TRL's importance-sampling correction.

vLLM is imported only inside :class:`VLLMSampler` calls; :func:`require_generator` refuses a
vLLM generator where vLLM (or, colocated, a GPU) is missing, before anything loads.
"""

from __future__ import annotations

import importlib.util
import math
from collections.abc import Sequence
from typing import Any

from mimesis.models.engine.sampling import Sample

GENERATORS = ("cpu", "vllm-colocate", "vllm-server")


class GeneratorUnavailableError(RuntimeError):
    """A vLLM generator was asked for where it cannot run (no vLLM, or colocated without CUDA)."""


def require_generator(name: str) -> None:
    """Refuse ``name`` when this machine cannot run it (call before any model loads).

    Raises:
        ValueError: ``name`` not in :data:`GENERATORS`.
        GeneratorUnavailableError: a vLLM generator without vLLM installed, or
            ``vllm-colocate`` without CUDA.
    """
    if name not in GENERATORS:
        raise ValueError(f"generator {name!r} not in {GENERATORS}")
    if name == "cpu":
        return
    if importlib.util.find_spec("vllm") is None:
        raise GeneratorUnavailableError(
            f"generator {name!r} needs vLLM, which is not installed here. Install it on the GPU "
            "machine (pip install 'trl[vllm]'), or set generator: cpu (the CPU sampler).")
    import torch

    if name == "vllm-colocate" and not torch.cuda.is_available():
        raise GeneratorUnavailableError("generator 'vllm-colocate' needs a CUDA GPU; none is "
                                        "visible here (set generator: cpu)")


def vllm_config(p) -> dict[str, Any]:
    """``GRPOConfig`` keyword arguments for ``p.generator`` (``{}`` for ``cpu``).

    Args:
        p: :class:`~mimesis.rl.agent_training.AgentRLParams` (``generator``,
            ``vllm_server_host``/``port``, ``vllm_gpu_memory_utilization``).
    """
    if p.generator == "cpu":
        return {}
    return {"use_vllm": True, "vllm_mode": p.generator.removeprefix("vllm-"),
            "vllm_server_host": p.vllm_server_host, "vllm_server_port": p.vllm_server_port,
            "vllm_gpu_memory_utilization": p.vllm_gpu_memory_utilization}


def agent_sampler(trainer, model, sampling, generator: str):
    """The agent's :class:`~mimesis.models.engine.sampling.TokenGenerateFn` for one ``rollout_func`` call.

    Args:
        trainer: The GRPO trainer (``vllm_generation`` when TRL built a vLLM engine).
        model: The unwrapped policy (``cpu`` samples from it).
        sampling: :class:`~mimesis.models.engine.sampling.SamplingParams` of the call.
        generator: ``cpu``, ``vllm-colocate`` or ``vllm-server``.
    """
    if generator == "cpu":
        from mimesis.models.engine.sampling import TokenSampler

        return TokenSampler(model, trainer.processing_class, sampling)
    engine = getattr(trainer, "vllm_generation", None)
    if engine is None:
        raise GeneratorUnavailableError(f"generator {generator!r} but the trainer has no vLLM "
                                        "engine (GRPOConfig.use_vllm is off)")
    return VLLMSampler(engine, trainer.processing_class.eos_token_id, sampling.temperature,
                       sampling.top_p)


class VLLMSampler:
    """:class:`~mimesis.models.engine.sampling.TokenGenerateFn` over TRL's vLLM engine (either mode).

    Colocated: one ``LLM.generate`` call with a ``SamplingParams`` per prompt (each its own
    ``max_tokens``). Server: one ``/generate`` request per distinct limit; every process asks
    the server itself (no collective: the processes' multi-turn rollouts make different numbers
    of calls), the main process through TRL's client, the others through their own.

    Args:
        engine: ``trainer.vllm_generation`` (TRL ``VLLMGeneration``).
        eos_token_id: Stops a turn (the agent's end-of-turn, as the CPU sampler).
        temperature / top_p: The agent's sampling settings.
    """

    def __init__(self, engine, eos_token_id: int, temperature: float, top_p: float) -> None:
        self.engine, self.eos = engine, eos_token_id
        self.temperature, self.top_p = temperature, top_p
        self.calls = self.sampled_tokens = 0

    def __call__(self, prompts: Sequence[Sequence[int]],
                 max_new_tokens: Sequence[int]) -> list[Sample]:
        if len(prompts) != len(max_new_tokens):
            raise ValueError(f"{len(prompts)} prompts but {len(max_new_tokens)} limits")
        self.calls += 1
        if self.engine.mode == "colocate":
            ids, logprobs = self._colocate(prompts, max_new_tokens)
        else:
            ids, logprobs = self._server(prompts, max_new_tokens)
        samples = [to_sample(i, lp, n, self.eos) for i, lp, n in zip(ids, logprobs,
                                                                      max_new_tokens, strict=True)]
        self.sampled_tokens += sum(len(s.ids) for s in samples)
        return samples

    def _colocate(self, prompts, limits) -> tuple[list[list[int]], list[list]]:
        from trl.generation.vllm_generation import extract_logprobs
        from vllm import SamplingParams

        params = [SamplingParams(n=1, temperature=self.temperature, top_p=self.top_p,
                                 max_tokens=int(n), logprobs=0, stop_token_ids=[self.eos])
                  for n in limits]
        outputs = self.engine.llm.generate([{"prompt_token_ids": list(p)} for p in prompts],
                                           sampling_params=params, use_tqdm=False)
        logprobs, _ = extract_logprobs(outputs)
        ids = [list(o.outputs[0].token_ids) for o in outputs]
        return ids, logprobs or [[] for _ in ids]

    def _server(self, prompts, limits) -> tuple[list[list[int]], list[list]]:
        client = self._client()
        ids: list[list[int]] = [[] for _ in prompts]
        logprobs: list[list] = [[] for _ in prompts]
        for limit in sorted(set(limits)):
            rows = [i for i, n in enumerate(limits) if n == limit]
            out = client.generate(prompts=[list(prompts[i]) for i in rows], n=1,
                                  temperature=self.temperature, top_p=self.top_p,
                                  max_tokens=int(limit), logprobs=0,
                                  generation_kwargs={"stop_token_ids": [self.eos]})
            for k, i in enumerate(rows):
                ids[i] = list(out["completion_ids"][k])
                logprobs[i] = (out.get("logprobs") or [[]] * len(rows))[k]
        return ids, logprobs

    def _client(self):
        client = getattr(self.engine, "vllm_client", None)
        if client is None:  # not the main process: a client of its own, no weight communicator
            from trl.generation.vllm_client import VLLMClient

            e = self.engine
            base_url = e.server_base_url or f"http://{e.server_host}:{e.server_port}"
            client = VLLMClient(base_url=base_url, group_port=e.group_port,
                                connection_timeout=e.server_timeout)
            e.vllm_client = client
        return client


def to_sample(ids: Sequence[int], logprobs: Sequence, limit: int, eos: int) -> Sample:
    """One vLLM completion as a :class:`Sample`: ``logprobs`` rows are ``[logprob, …]`` per
    token (TRL's layout; ``None`` → NaN, which TRL's correction treats as ratio 1). A turn that
    stopped early without its end-of-turn id gets it (log-prob NaN), as the CPU sampler's do.

    >>> to_sample([5, 6], [[-0.5], [None]], limit=4, eos=2).ids
    [5, 6, 2]
    >>> to_sample([5, 2], [[-0.5], [-0.1]], limit=4, eos=2).logprobs
    [-0.5, -0.1]
    """
    ids = [int(i) for i in ids]
    values = [float("nan") if not row or row[0] is None else float(row[0]) for row in logprobs]
    values = (values + [float("nan")] * len(ids))[:len(ids)]
    if len(ids) < limit and (not ids or ids[-1] != eos):
        ids, values = [*ids, eos], [*values, math.nan]
    return Sample(ids, values)
