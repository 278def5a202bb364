"""The user an agent trains against: pluggable behind one runtime and termination contract.

Kinds (params: an arm's ``user``):

* ``frozen`` — the frozen MIMESIS simulator (``<freeze_user>/simulator``, hash-verified by
  :func:`~mimesis.rl.frozen_user.load_user`), sampled by the rollout engine's
  :class:`~mimesis.models.engine.sampling.TokenSampler`. The default, and the paper's Stage I/II user.
* ``prompted`` — the control of the paper's main agent claim: the *same base model* the
  simulator was fine-tuned from (``model``, default the simulator's ``meta.json``
  ``base_model``), told to act as a user by the baseline prompt
  (``mimesis/prompts/prompted_user.md``; :mod:`mimesis.simulator.baseline`).
* ``openai`` — any OpenAI-compatible chat-completions endpoint: ``mimesis serve`` of the
  frozen simulator on another machine, a vLLM server, an API model. It gets the simulator's view
  (system prompt with the scenario, its own turns as ``assistant``), as prompted user
  simulators are usually called.
* ``served`` — the frozen simulator as a service: ``mimesis serve`` (``--backend vllm`` on its
  own GPU in the ``gpu`` profile) at ``base_url``, played through its episode endpoints, with
  each turn's private reasoning read back from ``/ep/<id>/private`` for the CSD coach
  (:mod:`mimesis.rl.served_user`).

Every kind runs behind :class:`~mimesis.simulator.runtime.UserSimulator`: the same view, the
same parser (private reasoning stripped before the agent sees a word), the same guards and the
same end-of-conversation signal. The model-backed users come from
:func:`mimesis.eval.unseen_users.build_user`, without the evaluation's refusal of the training
simulator: here the training simulator is exactly what may be asked for.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from mimesis.simulator.runtime import UserSimulator

USER_KINDS = ("frozen", "prompted", "openai", "served")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # a folder name and an MLflow key


@dataclass(frozen=True)
class ArmParams:
    """One trained agent arm (an entry of params.yaml ``train_agent.arms``).

    Attributes:
        name: Folder under ``data/train_agent/`` and the agent's row label in ``evaluate``.
        user: ``frozen``, ``prompted``, ``openai`` or ``served`` (module docstring).
        model: ``prompted``: a ``load_base`` name or HF folder (``""`` = the frozen simulator's
            base model); ``openai``: the model id the endpoint serves.
        prompt_style: ``prompted``/``openai`` system prompt: ``prompted_user`` (the baseline)
            or ``user_simulator`` (our simulator's prompt; what ``mimesis serve`` expects).
        base_url: ``openai`` endpoint (``""`` = api.openai.com); ``served``: the ``mimesis
            serve`` root, e.g. ``http://127.0.0.1:8100``.
        api_key_env: ``openai``/``served``: environment variable holding the key.
        private_key_env: ``served``: variable holding the server's ``private_key`` (``""``:
            none, as a loopback server without keys).
        concurrency / timeout_s / max_retries: ``openai`` requests in flight, seconds per
            request, client retries.
    """

    name: str
    user: str = "frozen"
    model: str = ""
    prompt_style: str = "prompted_user"
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    private_key_env: str = ""
    concurrency: int = 4
    timeout_s: float = 60.0
    max_retries: int = 3

    def __post_init__(self) -> None:
        if not _NAME.match(self.name or ""):
            raise ValueError(f"arm name {self.name!r}: use letters, digits, _ . -")
        if self.user not in USER_KINDS:
            raise ValueError(f"arm {self.name!r}: user {self.user!r} not in {USER_KINDS}")
        if self.user == "openai" and not self.model:
            raise ValueError(f"arm {self.name!r}: user openai needs a model id")
        if self.user == "served" and not self.base_url:
            raise ValueError(f"arm {self.name!r}: user served needs the server's base_url")
        if self.concurrency < 1 or self.timeout_s <= 0 or self.max_retries < 0:
            raise ValueError(f"arm {self.name!r}: concurrency >= 1, timeout_s > 0, "
                             "max_retries >= 0")


def parse_arms(entries: list[dict[str, Any] | ArmParams]) -> list[ArmParams]:
    """Arms from params entries (dicts or :class:`ArmParams`), in order.

    Raises:
        ValueError: unknown keys, a bad value, no arm, or two arms with one name.
    """
    known = set(ArmParams.__dataclass_fields__)
    arms = []
    for entry in entries:
        if isinstance(entry, dict):
            unknown = sorted(set(entry) - known)
            if unknown:
                raise ValueError(f"arm {entry.get('name')!r}: unknown keys {unknown} "
                                 f"(known: {sorted(known)})")
            entry = ArmParams(**entry)
        arms.append(entry)
    names = [a.name for a in arms]
    if not arms or len(set(names)) != len(names):
        raise ValueError(f"need at least one arm and unique names, got {names}")
    return arms


def training_simulator(arm: ArmParams, frozen, p) -> UserSimulator:
    """The user simulator of ``arm``.

    Args:
        arm: The arm.
        frozen: The loaded frozen simulator (:class:`~mimesis.rl.frozen_user.FrozenUser`);
            its runtime is the ``frozen`` user, its ``meta.json`` names the prompted user's model.
        p: The stage's :class:`~mimesis.rl.agent_training.AgentRLParams` (``user`` sampling,
            ``max_turns``, ``dtype``, ``seed``).

    Raises:
        mimesis.eval.unseen_users.UnseenUserError: ``openai`` without its API key.
    """
    if arm.user == "frozen":
        return frozen.simulator
    u = p.user
    if arm.user == "served":
        from mimesis.rl.served_user import ServedUserSimulator

        return ServedUserSimulator(
            arm.base_url, arm.model or "mimesis-user-simulator", max_turns=p.max_turns,
            temperature=u.temperature, top_p=u.top_p, max_new_tokens=u.max_new_tokens,
            api_key_env=arm.api_key_env, private_key_env=arm.private_key_env,
            concurrency=arm.concurrency, timeout_s=arm.timeout_s)
    from mimesis.eval.unseen_users import UnseenUserConfig, build_user

    model = arm.model or (frozen.meta.get("base_model") if arm.user == "prompted" else "")
    if not model:
        raise ValueError(f"arm {arm.name!r}: no model given and the frozen simulator's "
                         "meta.json names no base_model")
    config = UnseenUserConfig(
        name=arm.name, kind="hf" if arm.user == "prompted" else "openai", model=model,
        prompt_style=arm.prompt_style, base_url=arm.base_url, api_key_env=arm.api_key_env,
        temperature=u.temperature, top_p=u.top_p, max_new_tokens=u.max_new_tokens,
        batch_size=u.batch_size, dtype=p.dtype, concurrency=arm.concurrency,
        timeout_s=arm.timeout_s, max_retries=arm.max_retries, seed=p.seed)
    return build_user(config, max_turns=p.max_turns)


def describe(arm: ArmParams, frozen) -> dict[str, str]:
    """What ``meta.json`` records of an arm's user (no secrets: the key's variable name only)."""
    if arm.user == "frozen":
        return {"kind": "frozen", "weights_fingerprint": frozen.fingerprint}
    model = arm.model or frozen.meta.get("base_model", "")
    out = {"kind": arm.user, "model": model, "prompt_style": arm.prompt_style}
    if arm.user in ("openai", "served"):
        out.update(base_url=arm.base_url, api_key_env=arm.api_key_env)
    return out
