"""What a user is: one :class:`UserSpec` for every place a user simulator is built.

A spec names the user's kind and what that kind needs; :func:`mimesis.users.factory.make_user`
builds it behind :class:`~mimesis.simulator.runtime.UserSimulator`. The same spec describes a
``train_agent`` arm's user (params ``train_agent.arms``, the kind under the key ``user``), an
unseen user of the agent evaluation (params ``evaluate_agents.agents.unseen_users`` and
``fact_reveal.users``, the kind under ``kind``) and the simulator ``mimesis
evaluate-simulator`` scores.

Kinds:

* ``frozen`` — the frozen MIMESIS simulator (sha256-verified folder; ``model`` = that
  ``simulator`` folder, or ``""`` for the pipeline's ``<freeze_user>/simulator``);
* ``prompted`` — a local model (``load_base`` name or HF folder) told to act as a user by
  ``prompt_style`` (``""``: the frozen simulator's base model, where the caller knows it). The
  old spelling ``hf`` is read as ``prompted``;
* ``openai`` — any OpenAI-compatible chat-completions endpoint (``model`` = the model id);
* ``served`` — the frozen simulator behind ``mimesis serve`` (``base_url`` = its root), played
  through its episode endpoints with the private reasoning read back;
* ``replay`` — offline: the nearest real user turn of a held-out ``corpus``;
* ``agenda`` — offline, rule-based over the scenario's facts.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import Any

KINDS = ("frozen", "prompted", "openai", "served", "replay", "agenda")
OLD_KIND_NAMES = {"hf": "prompted"}  # params written before the kinds were unified
PROMPT_STYLE_NAMES = ("prompted_user", "user_simulator")
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # used in folder names and MLflow keys


@dataclass(frozen=True)
class UserSamplingParams:
    """How a model-backed user samples its turns (reasoning + utterance): the params.yaml
    ``user`` keys of the agent stages.

    Kept apart from :class:`~mimesis.models.engine.sampling.SamplingParams`: these are the
    user's choices only (the sampler's cache settings are not).

    Raises:
        ValueError: ``temperature`` < 0, ``top_p`` outside (0, 1], ``max_new_tokens`` or
            ``batch_size`` < 1.
    """

    temperature: float = 0.8
    top_p: float = 0.95
    max_new_tokens: int = 48  # per user turn, <think> reasoning included
    batch_size: int = 16  # rows per forward

    def __post_init__(self) -> None:
        if (self.temperature < 0 or not 0 < self.top_p <= 1 or self.max_new_tokens < 1
                or self.batch_size < 1):
            raise ValueError("user sampling: temperature >= 0, 0 < top_p <= 1, "
                             "max_new_tokens >= 1, batch_size >= 1")


@dataclass(frozen=True)
class UserSpec:
    """One user simulator (module docstring for the kinds).

    Attributes:
        name: Its label: an arm's folder under ``data/train_agent/``, a results row, an MLflow
            key (letters, digits, ``_ . -``).
        kind: One of :data:`KINDS` (``hf`` is read as ``prompted``).
        model: ``frozen``: the simulator folder (``""``: the pipeline's); ``prompted``: a
            ``load_base`` name or HF folder (``""``: the frozen simulator's base model);
            ``openai``: the model id at the endpoint; ``served``: the id sent to the server
            (``""``: ``mimesis-user-simulator``).
        prompt_style: ``prompted``/``openai`` system prompt: ``prompted_user`` (the baseline)
            or ``user_simulator`` (the trained simulator's; what ``mimesis serve`` expects).
        base_url: ``openai`` endpoint (``""`` = api.openai.com); ``served``: the ``mimesis
            serve`` root, e.g. ``http://127.0.0.1:8100``.
        api_key_env: ``openai``/``served``: environment variable holding the key.
        private_key_env: ``served``: variable holding the server's ``private_key`` (``""``:
            none, as a loopback server without keys).
        corpus: ``replay``: JSONL of ``LabeledConversation``/``Conversation`` (``""``: the
            corpus the caller gives).
        temperature / top_p / max_new_tokens / batch_size: sampling of the model-backed kinds
            (tokens per user turn, reasoning included; rows per forward).
        dtype: ``frozen``/``prompted`` weights (``float32`` on CPU).
        concurrency / timeout_s / max_retries: ``openai``/``served`` requests in flight,
            seconds per request, client retries (429, 5xx, connection).
        seed: Sampler seed of the local kinds (and sent with ``openai`` requests once
            reseeded) until :func:`mimesis.users.reseed.reseed_user` restarts it.

    Raises:
        ValueError: a bad name, an unknown kind or prompt style, ``openai`` without a model,
            ``served`` without a base_url, or a sampling or client value out of range.
    """

    name: str
    kind: str = "frozen"
    model: str = ""
    prompt_style: str = "prompted_user"
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
    private_key_env: str = ""
    corpus: str = ""
    temperature: float = 0.7
    top_p: float = 0.95
    max_new_tokens: int = 96
    batch_size: int = 16
    dtype: str = "float32"
    concurrency: int = 4
    timeout_s: float = 60.0
    max_retries: int = 3
    seed: int = 13

    def __post_init__(self) -> None:
        object.__setattr__(self, "kind", OLD_KIND_NAMES.get(self.kind, self.kind))
        if not _NAME.match(self.name or ""):
            raise ValueError(f"user name {self.name!r}: use letters, digits, _ . -")
        if self.kind not in KINDS:
            raise ValueError(f"user {self.name!r}: kind {self.kind!r} not in {KINDS}")
        if self.kind == "openai" and not self.model:
            raise ValueError(f"user {self.name!r}: kind openai needs a model id")
        if self.kind == "served" and not self.base_url:
            raise ValueError(f"user {self.name!r}: kind served needs the server's base_url")
        if self.prompt_style not in PROMPT_STYLE_NAMES:
            raise ValueError(f"user {self.name!r}: prompt_style {self.prompt_style!r} not in "
                             f"{list(PROMPT_STYLE_NAMES)}")
        if self.concurrency < 1 or self.timeout_s <= 0 or self.max_retries < 0:
            raise ValueError(f"user {self.name!r}: concurrency >= 1, timeout_s > 0, "
                             "max_retries >= 0")
        try:
            self.sampling  # noqa: B018 -- builds UserSamplingParams, which checks the ranges
        except ValueError as err:
            raise ValueError(f"user {self.name!r}: {err}") from None

    @property
    def sampling(self) -> UserSamplingParams:
        """The spec's sampling as :class:`UserSamplingParams`."""
        return UserSamplingParams(temperature=self.temperature, top_p=self.top_p,
                                  max_new_tokens=self.max_new_tokens, batch_size=self.batch_size)

    def with_sampling(self, sampling: UserSamplingParams, *, dtype: str, seed: int) -> UserSpec:
        """This spec sampled as a stage samples its users (the agent stages' params ``user``,
        ``dtype`` and ``seed``; ``evaluate_user``'s sampling for ``evaluate-simulator``)."""
        return replace(self, temperature=sampling.temperature, top_p=sampling.top_p,
                       max_new_tokens=sampling.max_new_tokens, batch_size=sampling.batch_size,
                       dtype=dtype, seed=seed)


SPEC_KEYS = frozenset(f.name for f in fields(UserSpec))
# a train_agent arm's keys, in the order its params entry is recorded (arm_entry)
ARM_KEYS = ("name", "user", "model", "prompt_style", "base_url", "api_key_env", "private_key_env",
            "concurrency", "timeout_s", "max_retries")


def parse_specs(entries: Sequence[Mapping[str, Any] | UserSpec], *, what: str,
                kinds: Collection[str], keys: Collection[str] = SPEC_KEYS,
                kind_key: str = "kind", model_required: Collection[str] = ()
                ) -> list[UserSpec]:
    """Specs from params entries (dicts or :class:`UserSpec`), in order.

    Args:
        entries: The params list.
        what: What an entry is, for messages (``arm``, ``unseen user``).
        kinds: The kinds this list may hold.
        keys: The keys an entry may have (``kind_key`` stands for ``kind``).
        kind_key: The key holding the kind (``user`` in ``train_agent.arms``).
        model_required: Kinds whose entries must name a model here (no default to fall back on).

    Raises:
        ValueError: unknown keys, a bad value (:class:`UserSpec`), a kind not in ``kinds``, a
            missing model, or two entries with one name.
    """
    specs = []
    for entry in entries:
        if not isinstance(entry, UserSpec):
            unknown = sorted(set(entry) - set(keys))
            if unknown:
                raise ValueError(f"{what} {entry.get('name')!r}: unknown keys {unknown} "
                                 f"(known: {sorted(keys)})")
            values = dict(entry)
            kind = values.get(kind_key, "frozen")
            kind = OLD_KIND_NAMES.get(kind, kind)
            if kind not in kinds:
                raise ValueError(f"{what} {entry.get('name')!r}: {kind_key} {kind!r} not in "
                                 f"{sorted(kinds)}")
            values.pop(kind_key, None)
            entry = UserSpec(**values, kind=kind)
        elif entry.kind not in kinds:
            raise ValueError(f"{what} {entry.name!r}: kind {entry.kind!r} not in {sorted(kinds)}")
        if entry.kind in model_required and not entry.model:
            raise ValueError(f"{what} {entry.name!r}: kind {entry.kind} needs a model")
        specs.append(entry)
    names = [s.name for s in specs]
    for name in names:
        if names.count(name) > 1:
            raise ValueError(f"duplicate {what} name {name!r}: names must be unique")
    return specs


def parse_arms(entries: Sequence[Mapping[str, Any] | UserSpec]) -> list[UserSpec]:
    """The users of params.yaml ``train_agent.arms``: one arm = its name + its user
    (``{name: grpo, user: frozen}``), in order.

    Raises:
        ValueError: no arm, or see :func:`parse_specs`.
    """
    if not entries:
        raise ValueError("need at least one arm (unique names)")
    return parse_specs(entries, what="arm", kinds=("frozen", "prompted", "openai", "served"),
                       keys=ARM_KEYS, kind_key="user")


def arm_entry(spec: UserSpec) -> dict[str, Any]:
    """An arm's user as params.yaml spells it (:data:`ARM_KEYS`, the kind under ``user``): what
    a ``train_agent`` checkpoint's resume key hashes, so a key written before the arms became
    :class:`UserSpec` still matches.

    >>> arm_entry(UserSpec(name="grpo"))["user"]
    'frozen'
    """
    return {k: spec.kind if k == "user" else getattr(spec, k) for k in ARM_KEYS}


UNSEEN_KINDS = ("openai", "prompted", "replay", "agenda")


def parse_unseen(entries: Sequence[Mapping[str, Any] | UserSpec]) -> list[UserSpec]:
    """The users of params.yaml ``unseen_users`` (keys = :class:`UserSpec` fields), in order.

    Raises:
        ValueError: see :func:`parse_specs` (a ``prompted`` entry must name its model).
    """
    return parse_specs(entries, what="unseen user", kinds=UNSEEN_KINDS,
                       model_required=("prompted", "openai"))
