"""Unseen user simulators for agent evaluation: a registry configured from params.

Why: an agent trained against one simulator can overfit to it, so agents are also scored
against users they never trained with (docs/metrics.md, agent side; the MIMESIS paper, arXiv
2610.09484, uses 9: five frontier APIs and four released simulators). Every entry runs behind
the same :class:`~mimesis.simulator.runtime.UserSimulator` as the training simulator — same
view (:func:`~mimesis.simulator.runtime.build_view`), parser, guards and termination contract —
only ``generate_fn`` and the system prompt differ.

Config: a list of dicts (params.yaml ``unseen_users``), one :class:`UnseenUserConfig` each::

    - {name: replay, kind: replay}                       # corpus: defaults to build_unseen(corpus=)
    - {name: agenda, kind: agenda}
    - {name: prompted-smollm2, kind: hf, model: smollm2-135m, prompt_style: prompted_user}
    - {name: gpt, kind: openai, model: gpt-4o-mini, base_url: "", api_key_env: OPENAI_API_KEY}

Kinds:

* ``openai`` — any OpenAI-compatible chat-completions endpoint (official ``openai`` client; a
  batch is sent as concurrent requests, ``concurrency`` at a time). Chat APIs answer a user
  message, so an opening turn (no agent message yet) gets :data:`OPENING_CUE` as one.
* ``hf`` — a local model (``load_base`` name or HF folder) prompted as a user:
  ``prompt_style`` ``prompted_user`` (the baseline prompt, ``mimesis/prompts/prompted_user.md``)
  or ``user_simulator`` (our trained simulator's prompt); sampled with
  :class:`~mimesis.models.engine.sampling.TokenSampler` (``ChatGenerator`` for sliding-window models),
  loaded on first use.
* ``replay`` — offline, deterministic (:class:`~mimesis.eval.offline_users.ReplayUser`):
  replays the nearest *real* user turn of a held-out corpus (label's or curate's ``test.jsonl``).
* ``agenda`` — offline, rule-based (:class:`~mimesis.eval.offline_users.AgendaUser`), after
  Schatzmann et al. (2007), "Agenda-based user simulation for bootstrapping a POMDP dialogue
  system", NAACL-HLT.

Where things live: this module holds the config (:class:`UnseenUserConfig`), the refusal, the
model users (:class:`OpenAIUser`, :class:`HFUser`) and the registry (:func:`build_unseen`); what
identifies the training simulator (names, weight hashes) is in
:mod:`mimesis.eval.simulator_identity`; the offline users (``replay``, ``agenda``; their goal prompt, corpus reader and text rules) are in
:mod:`mimesis.eval.offline_users`.

Refusal (:func:`check_not_training`): evaluating with the simulator the agent trained against is
not an *unseen* user. Refused: duplicate names; names of the training simulator (registered name
or alias, e.g. ``frozen``: that row label belongs to it); an ``hf`` entry whose folder is the
frozen simulator folder, carries a ``meta.json`` listing the same files, or holds a weight file
with the sha256 of one of the frozen simulator's (``meta.json`` ``files``); an ``openai`` entry
whose model is the registered name, its alias or ``name@alias``, and, at run time, an endpoint
whose responses report such a model (our serving app reports the registered name).

The offline users read the goal text only: see the limits in :mod:`mimesis.eval.offline_users`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, fields
from pathlib import Path
from typing import Any

from mimesis.eval.offline_users import AgendaUser, ReplayUser, goal_prompt, read_corpus
from mimesis.eval.simulator_identity import forbidden_model_names, hf_refusal, training_meta
from mimesis.openai_chat import ChatAPIError, ChatClient
from mimesis.schemas import Messages, Scenario
from mimesis.simulator.baseline import render_prompted_system_prompt
from mimesis.simulator.guards import GuardParams
from mimesis.simulator.prompts import render_system_prompt
from mimesis.simulator.runtime import UserSimulator

KINDS = ("openai", "hf", "replay", "agenda")
PROMPT_STYLES: dict[str, Callable[[Scenario], str]] = {
    "prompted_user": render_prompted_system_prompt, "user_simulator": render_system_prompt}
OPENING_CUE = "(The conversation starts now: write your first message to the assistant.)"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")  # used in file names and MLflow keys


class UnseenUserError(ChatAPIError):
    """An unseen user cannot be set up or reached (missing API key, endpoint failure)."""


@dataclass(frozen=True)
class UnseenUserConfig:
    """One entry of params.yaml ``unseen_users`` (keys = fields; unknown keys are refused).

    Attributes:
        name: Row label in the results (letters, digits, ``_ . -``); unique.
        kind: ``openai``, ``hf``, ``replay`` or ``agenda``.
        model: ``hf``: a ``load_base`` name or HF folder; ``openai``: the model id.
        prompt_style: ``hf``/``openai`` system prompt: ``prompted_user`` or ``user_simulator``.
        base_url: ``openai`` endpoint (``""`` = api.openai.com).
        api_key_env: ``openai``: environment variable holding the key.
        corpus: ``replay``: JSONL of ``LabeledConversation``/``Conversation`` (``""`` = the
            ``corpus`` given to :func:`build_unseen`).
        temperature / top_p / max_new_tokens: sampling of ``hf``/``openai`` turns (tokens per
            user turn, reasoning included).
        batch_size: ``hf``: rows per forward.
        dtype: ``hf`` weights (``float32`` on CPU).
        concurrency / timeout_s / max_retries: ``openai`` requests in flight, seconds per
            request, client retries (429, 5xx, connection).
        seed: ``hf`` sampler seed until reseeded (the agent evaluation restarts every user
            from ``evaluate_agents.agents.seed`` at each run: :mod:`mimesis.eval.reseed`).
    """

    name: str
    kind: str
    model: str = ""
    prompt_style: str = "prompted_user"
    base_url: str = ""
    api_key_env: str = "OPENAI_API_KEY"
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
        if not _NAME.match(self.name or ""):
            raise ValueError(f"unseen user name {self.name!r}: use letters, digits, _ . -")
        if self.kind not in KINDS:
            raise ValueError(f"unseen user {self.name!r}: kind {self.kind!r} not in {KINDS}")
        if self.kind in ("hf", "openai") and not self.model:
            raise ValueError(f"unseen user {self.name!r}: kind {self.kind} needs a model")
        if self.prompt_style not in PROMPT_STYLES:
            raise ValueError(f"unseen user {self.name!r}: prompt_style {self.prompt_style!r} "
                             f"not in {sorted(PROMPT_STYLES)}")
        if self.max_new_tokens < 1 or self.batch_size < 1 or self.concurrency < 1:
            raise ValueError(f"unseen user {self.name!r}: max_new_tokens, batch_size and "
                             "concurrency must be >= 1")

    @classmethod
    def from_dict(cls, entry: Mapping[str, Any]) -> UnseenUserConfig:
        """Build from one params dict.

        Raises:
            ValueError: unknown keys, or a value :meth:`__post_init__` refuses.
        """
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(entry) - known)
        if unknown:
            raise ValueError(f"unseen user {entry.get('name')!r}: unknown keys {unknown} "
                             f"(known: {sorted(known)})")
        return cls(**dict(entry))


def parse_unseen(entries: Sequence[Mapping[str, Any] | UnseenUserConfig]
                 ) -> list[UnseenUserConfig]:
    """Configs from params entries, in order.

    Raises:
        ValueError: a bad entry, or two entries with the same name.
    """
    configs = [e if isinstance(e, UnseenUserConfig) else UnseenUserConfig.from_dict(e)
               for e in entries]
    seen: set[str] = set()
    for c in configs:
        if c.name in seen:
            raise ValueError(f"duplicate unseen user name {c.name!r}")
        seen.add(c.name)
    return configs


# ----------------------------------------------------------------------------- refusal
def check_not_training(configs: Sequence[UnseenUserConfig], training_simulator_dir: Path) -> None:
    """Refuse any entry that is the training simulator (see the module docstring).

    Raises:
        ValueError: duplicate names, a refused entry (the message names it and why), or no
            ``meta.json`` in ``training_simulator_dir``.
    """
    from mimesis.models.base import base_dir

    parse_unseen(configs)  # duplicate names
    meta = training_meta(training_simulator_dir)
    forbidden = forbidden_model_names(meta)
    for c in configs:
        if c.name.lower() in forbidden:  # a row labelled "frozen" would read as the training sim
            raise ValueError(f"unseen user name {c.name!r} names the training simulator")
        if c.kind == "openai" and c.model.strip().lower() in forbidden:
            raise ValueError(f"unseen user {c.name!r}: model {c.model!r} is the training "
                             "simulator (registered name or alias); it cannot be an unseen user")
        if c.kind == "hf":
            why = hf_refusal(base_dir(c.model), training_simulator_dir, meta)
            if why:
                raise ValueError(f"unseen user {c.name!r} is the training simulator: {why}")


# ----------------------------------------------------------------------------- openai
def api_messages(view: Messages) -> Messages:
    """The simulator's view as a chat API request: a view that does not end with a message to
    answer (the opening turn) gets :data:`OPENING_CUE` as the user message."""
    return list(view) if view[-1]["role"] == "user" else [
        *view, {"role": "user", "content": OPENING_CUE}]


class OpenAIUser:
    """``generate_fn`` over an OpenAI-compatible endpoint: one request per chat, concurrently.

    A request the server rejects as invalid (400/422, e.g. a content filter) yields ``""`` (the
    runtime resamples once, then ends the episode ``empty_turn``); other API errors raise.

    Args:
        config: The entry (``model``, ``base_url``, ``api_key_env``, sampling, concurrency).
        forbidden: Lower-cased model names of the training simulator; a response reporting one
            raises (the endpoint serves the training simulator under another name).
        client: An ``openai.OpenAI``-like client (tests); default built from ``config``.

    Raises:
        UnseenUserError: the key variable is unset or empty (no client given).
    """

    def __init__(self, config: UnseenUserConfig, forbidden: set[str] | None = None,
                 client=None) -> None:
        self.config, self.forbidden = config, forbidden or set()
        self.client = ChatClient(config.model, config.base_url, config.api_key_env,
                                 timeout_s=config.timeout_s, max_retries=config.max_retries,
                                 error=UnseenUserError,
                                 label=f"unseen user {config.name!r} (openai)", client=client)
        self.seed: int | None = None

    def reseed(self, seed: int) -> None:
        """Send ``seed`` with every request from now on (the endpoint's best-effort
        reproducibility; the OpenAI API and vLLM honour it, sampling stays the server's)."""
        self.seed = seed

    def __call__(self, batch: Sequence[Messages]) -> list[str]:
        if not batch:
            return []
        with ThreadPoolExecutor(min(self.config.concurrency, len(batch))) as pool:
            return list(pool.map(self._one, batch))

    def _one(self, view: Messages) -> str:
        c = self.config
        reply = self.client.complete(api_messages(view), max_tokens=c.max_new_tokens,
                                     temperature=c.temperature, top_p=c.top_p, seed=self.seed)
        if reply.model.lower() in self.forbidden:
            raise ValueError(f"unseen user {c.name!r}: the endpoint answered as "
                             f"{reply.model.lower()!r}, the training simulator; it cannot be an "
                             "unseen user")
        return reply.text


# ----------------------------------------------------------------------------- hf
class HFUser:
    """``generate_fn`` of a local model, loaded on first call (a registry costs nothing until
    used); :meth:`reseed` restarts its sampling, :meth:`release` drops the weights."""

    def __init__(self, config: UnseenUserConfig) -> None:
        self.config = config
        self.model = None
        self.seed = config.seed
        self.sampler = None  # TokenSampler once loaded (None for the ChatGenerator fallback)
        self._generate: Callable[[Sequence[Messages]], list[str]] | None = None

    def reseed(self, seed: int) -> None:
        """Restart sampling from ``seed``: a fresh ``TokenSampler`` (new generator, empty KV
        cache) on the loaded weights, or this seed for the next load / ``ChatGenerator`` call."""
        from mimesis.eval.reseed import fresh_sampler

        self.seed = seed
        if self.sampler is not None:
            self.sampler = fresh_sampler(self.sampler, seed)
            self._generate = self.sampler.chat

    def __call__(self, batch: Sequence[Messages]) -> list[str]:
        if self._generate is None:
            self._load()
        return self._generate(batch)

    def _load(self) -> None:
        import torch

        from mimesis.models.base import load_base
        from mimesis.models.engine.sampling import SamplingParams, TokenSampler

        c = self.config
        model, tokenizer = load_base(c.model, dtype=c.dtype)
        if torch.cuda.is_available():
            model.to("cuda")
        model.requires_grad_(False)
        try:
            self.sampler = TokenSampler(model, tokenizer, SamplingParams(
                temperature=c.temperature, top_p=c.top_p, max_new_tokens=c.max_new_tokens,
                batch_size=c.batch_size), seed=self.seed)
            self._generate = self.sampler.chat
        except ValueError:  # sliding-window attention: plain transformers generate
            from mimesis.models.generation import ChatGenerator, GenerationConfig

            generator = ChatGenerator(model, tokenizer, GenerationConfig(
                max_new_tokens=c.max_new_tokens, temperature=c.temperature, top_p=c.top_p,
                batch_size=c.batch_size), name=f"hf:{c.model}")
            self._generate = lambda batch: generator.generate(batch, desc=c.name, seed=self.seed)
        self.model = model

    def release(self) -> None:
        """Drop the model (reloaded on the next call)."""
        self.model, self.sampler, self._generate = None, None, None


# ----------------------------------------------------------------------------- registry
def build_user(config: UnseenUserConfig, *, corpus: Path | None = None, max_turns: int = 16,
               guards: GuardParams | None = None, forbidden: set[str] | None = None
               ) -> UserSimulator:
    """One unseen user behind :class:`UserSimulator` (no refusal check: see
    :func:`build_unseen`).

    Raises:
        FileNotFoundError: ``replay`` without a corpus file.
        UnseenUserError: ``openai`` without its API key.
    """
    c = config
    if c.kind in ("replay", "agenda"):
        if c.kind == "agenda":
            fn: Callable[[Sequence[Messages]], list[str]] = AgendaUser()
        else:
            path = Path(c.corpus) if c.corpus else corpus
            if path is None or not path.is_file():
                raise FileNotFoundError(f"unseen user {c.name!r} (replay): corpus {path} not "
                                        "found (set its corpus, or pass build_unseen(corpus=))")
            fn = ReplayUser(read_corpus(path))
        return UserSimulator(fn, max_turns=max_turns, system_prompt_fn=goal_prompt, guards=guards)
    fn = OpenAIUser(c, forbidden) if c.kind == "openai" else HFUser(c)
    return UserSimulator(fn, max_turns=max_turns, system_prompt_fn=PROMPT_STYLES[c.prompt_style],
                         guards=guards)


def build_unseen(config: Sequence[Mapping[str, Any] | UnseenUserConfig],
                 training_simulator_dir: Path, *, corpus: Path | None = None,
                 max_turns: int = 16, guards: GuardParams | None = None
                 ) -> dict[str, UserSimulator]:
    """The unseen users of ``config`` (params.yaml ``unseen_users``), by name, in order.

    Args:
        config: Entries (dicts or :class:`UnseenUserConfig`).
        training_simulator_dir: The frozen training simulator (``<freeze_user>/simulator``,
            with ``meta.json``): every entry is checked not to be it.
        corpus: Default held-out corpus of ``replay`` entries (e.g. ``data/label/test.jsonl``).
        max_turns: User turns per episode of every simulator.
        guards: Runtime guard settings (default :class:`GuardParams`).

    Raises:
        ValueError: a bad or duplicate entry, or one that is the training simulator.
        FileNotFoundError / UnseenUserError: see :func:`build_user`.
    """
    configs = parse_unseen(config)
    check_not_training(configs, training_simulator_dir)
    forbidden = forbidden_model_names(training_meta(training_simulator_dir))
    return {c.name: build_user(c, corpus=corpus, max_turns=max_turns, guards=guards,
                               forbidden=forbidden) for c in configs}


def release(simulators: Mapping[str, UserSimulator]) -> None:
    """Drop the weights of every loaded ``hf`` user (they reload on next use)."""
    for sim in simulators.values():
        if isinstance(sim.generate_fn, HFUser):
            sim.generate_fn.release()
