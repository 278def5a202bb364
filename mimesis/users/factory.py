"""One factory for every user simulator: :func:`make_user` builds a
:class:`~mimesis.users.spec.UserSpec` behind one runtime and termination contract.

Every kind runs behind :class:`~mimesis.simulator.runtime.UserSimulator`: the same view, the
same parser (private reasoning stripped before the agent sees a word), the same guards and the
same end-of-conversation signal. Callers:

* ``train_agent`` arms (params ``train_agent.arms``: ``frozen`` — the paper's Stage I/II user,
  sampled by the rollout engine's :class:`~mimesis.models.engine.sampling.TokenSampler`;
  ``prompted`` — the control of the paper's main agent claim: the *same base model* the
  simulator was fine-tuned from, told to act as a user by the baseline prompt
  (``mimesis/prompts/prompted_user.md``); ``openai`` — ``mimesis serve`` elsewhere, a vLLM
  server, an API model, given the simulator's view; ``served`` — ``mimesis serve`` played
  through its episode endpoints, each turn's private reasoning read back for the CSD coach
  (:mod:`mimesis.users.served`)). Here the training simulator is exactly what may be asked for.
* the agent evaluation's unseen users (:func:`mimesis.users.unseen.build_unseen`, which first
  refuses the training simulator) and ``fact_reveal``'s users;
* ``mimesis evaluate-simulator`` (``openai``; the local kinds' weights come from
  :func:`load_weights`, sampled by the realism protocol's own sampler).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from mimesis.schemas import Messages
from mimesis.simulator.guards import GuardParams
from mimesis.simulator.runtime import UserSimulator
from mimesis.users.chat import PROMPT_STYLES, OpenAIUser, PromptedUser
from mimesis.users.offline import AgendaUser, ReplayUser, goal_prompt, read_corpus
from mimesis.users.spec import UserSpec


def make_user(spec: UserSpec, *, frozen: Any = None, corpus: Path | None = None,
              max_turns: int = 16, guards: GuardParams | None = None,
              forbidden: set[str] | None = None, key_hint: str = "") -> UserSimulator:
    """The user simulator of ``spec``.

    Args:
        spec: The user.
        frozen: The loaded frozen simulator (:class:`~mimesis.users.frozen.FrozenUser`), if the
            caller holds one: its runtime is the ``frozen`` user, and its ``meta.json``
            ``base_model`` the model of a ``prompted`` spec that names none. Without it, a
            ``frozen`` spec loads its ``model`` folder.
        corpus: Default held-out corpus of a ``replay`` spec without its own.
        max_turns: Most user turns per episode.
        guards: Runtime guard settings (default :class:`GuardParams`).
        forbidden: Lower-cased model names an ``openai`` endpoint must not answer as (the
            training simulator's, for unseen users).
        key_hint: ``openai``: appended to the missing-key message (what names the variable).

    Raises:
        FileNotFoundError: ``replay`` without a corpus file.
        ValueError: ``prompted`` without a model and no frozen ``base_model``; ``frozen`` with
            neither ``frozen`` nor a ``model`` folder.
        UserEndpointError: ``openai`` without its API key.
        FrozenSimulatorError: a ``frozen`` folder whose files differ from its ``meta.json``.
    """
    c = spec
    if c.kind == "frozen":
        if frozen is not None:
            return frozen.simulator
        if not c.model:
            raise ValueError(f"user {c.name!r} (frozen): give the simulator folder as model")
        from mimesis.users.frozen import load_frozen_user

        return load_frozen_user(Path(c.model), dtype=c.dtype, sampling=c.sampling, seed=c.seed,
                                max_turns=max_turns).simulator
    if c.kind == "served":
        from mimesis.users.served import ServedUserSimulator

        return ServedUserSimulator(
            c.base_url, c.model or "mimesis-user-simulator", max_turns=max_turns,
            temperature=c.temperature, top_p=c.top_p, max_new_tokens=c.max_new_tokens,
            api_key_env=c.api_key_env, private_key_env=c.private_key_env,
            concurrency=c.concurrency, timeout_s=c.timeout_s)
    if c.kind in ("replay", "agenda"):
        if c.kind == "agenda":
            fn: Callable[[Sequence[Messages]], list[str]] = AgendaUser()
        else:
            path = Path(c.corpus) if c.corpus else corpus
            if path is None or not path.is_file():
                raise FileNotFoundError(f"user {c.name!r} (replay): corpus {path} not found "
                                        "(set its corpus, or pass build_unseen(corpus=))")
            fn = ReplayUser(read_corpus(path))
        return UserSimulator(fn, max_turns=max_turns, system_prompt_fn=goal_prompt, guards=guards)
    if c.kind == "openai":
        fn = OpenAIUser(c, forbidden, key_hint=key_hint)
    else:
        fn = PromptedUser(_with_model(c, frozen))
    return UserSimulator(fn, max_turns=max_turns, system_prompt_fn=PROMPT_STYLES[c.prompt_style],
                         guards=guards)


def _with_model(spec: UserSpec, frozen: Any) -> UserSpec:
    """A ``prompted`` spec with its model resolved (the frozen simulator's base model)."""
    from dataclasses import replace

    if spec.model:
        return spec
    model = frozen.meta.get("base_model", "") if frozen is not None else ""
    if not model:
        raise ValueError(f"user {spec.name!r}: no model given and the frozen simulator's "
                         "meta.json names no base_model")
    return replace(spec, model=model)


def load_weights(spec: UserSpec, device_map: str | None = None) -> tuple[Any, Any]:
    """Model and tokenizer of a local spec (``frozen``: the sha256-verified ``model`` folder;
    ``prompted``: ``load_base(model)``), in ``spec.dtype``, for callers that sample them
    themselves (``evaluate-simulator``'s realism protocol).

    Raises:
        ValueError: another kind, or no model.
        FrozenSimulatorError: a ``frozen`` folder whose files differ from its ``meta.json``.
    """
    if spec.kind not in ("frozen", "prompted") or not spec.model:
        raise ValueError(f"user {spec.name!r}: local weights need kind frozen or prompted and "
                         f"a model, got {spec.kind!r} {spec.model!r}")
    if spec.kind == "frozen":
        from mimesis.simulator.frozen import load_frozen

        model, tokenizer, _ = load_frozen(Path(spec.model), spec.dtype, device_map)
        return model, tokenizer
    from mimesis.models.base import load_base

    return load_base(spec.model, spec.dtype, device_map)


def describe(spec: UserSpec, frozen: Any) -> dict[str, str]:
    """What ``meta.json`` records of an arm's user (no secrets: the key's variable name only).

    ``frozen``: the loaded :class:`~mimesis.users.frozen.FrozenUser` (fingerprint, base model).
    """
    if spec.kind == "frozen":
        return {"kind": "frozen", "weights_fingerprint": frozen.fingerprint}
    model = spec.model or frozen.meta.get("base_model", "")
    out = {"kind": spec.kind, "model": model, "prompt_style": spec.prompt_style}
    if spec.kind in ("openai", "served"):
        out.update(base_url=spec.base_url, api_key_env=spec.api_key_env)
    return out
