"""Generation backends of ``mimesis serve``: turn a batch of simulator views into raw texts.

* :class:`TransformersBackend` — the frozen simulator in transformers, one batched
  :class:`~mimesis.models.generation.ChatGenerator` call per batch (CPU, or one GPU).
* :class:`VLLMBackend` — the same folder in vLLM (``pip install 'mimesis-usersim[gpu]'``, a CUDA
  GPU); vLLM is imported in the constructor only, so the CPU install never needs it.
* :class:`FunctionBackend` — any ``generate_fn(batch) -> texts`` (scripted fakes in tests, an
  OpenAI-compatible client wrapper).

Every backend renders prompts with the tokenizer's own chat template (docs/pitfalls.md #10). Views
reach them already fitted into ``max_prompt_tokens`` by :mod:`mimesis.serve.fitting` (oldest
turns dropped, system prompt kept, the last agent turn kept whole unless it alone is over), so
the engines' own left cut never removes the hidden goal. Backends are called from the batching
worker thread only, token counts included (see :mod:`mimesis.serve.batching`): a fast
tokenizer's padding state is shared by all callers.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from mimesis.format import TURN_PREFILL
from mimesis.schemas import Messages
from mimesis.simulator.runtime import GenerateFn

VLLM_MISSING = ("the vllm backend needs vLLM and a CUDA GPU: pip install 'mimesis-usersim[gpu]' "
                "(vllm==0.31.0), or serve with --backend transformers")
_GENERATION_MARKER = re.compile(r"\{%-?\s*generation\s*-?%\}")


StopFn = Callable[[], bool]
"""Asked by a backend during generation: true once nobody waits for the outputs any more."""


class BackendUnavailableError(RuntimeError):
    """The requested backend cannot run here (e.g. vLLM not installed)."""


class GenerationCancelled(RuntimeError):
    """A generation was stopped because ``stop()`` said so; its outputs are abandoned."""


def check_stop(stop: StopFn | None) -> None:
    """Raise :class:`GenerationCancelled` when ``stop`` says the outputs are no longer wanted."""
    if stop is not None and stop():
        raise GenerationCancelled("nobody waits for this generation any more")


@dataclass(frozen=True)
class Sampling:
    """Sampling settings of one request (hashable: requests are batched per setting).

    Not a params class: the OpenAI request's own fields (``max_tokens``, ``seed``), per request.

    Attributes:
        max_tokens: Most new tokens of the raw generation (reasoning + utterance), ≥ 1.
        temperature: 0 = greedy.
        top_p: Nucleus mass in (0, 1].
        seed: Sampling seed of each request: the same seed and view give the same text whether
            the request is generated alone or in a batch (transformers: seeded sampling runs
            request by request; vLLM: a generator per request).
    """

    max_tokens: int
    temperature: float
    top_p: float
    seed: int | None = None

    def for_draw(self, draw: int) -> Sampling:
        """The settings of a request's ``draw``-th generation of one turn (0: the first; later
        ones are a guard's redraws): the seed itself for draw 0, then one derived from it per
        draw, so a redraw of the same view does not repeat the text it replaces."""
        if self.seed is None or draw == 0:
            return self
        digest = hashlib.sha256(f"{self.seed}:{draw}".encode()).digest()
        return replace(self, seed=int.from_bytes(digest[:8], "big") >> 1)  # < 2**63


class Backend(Protocol):
    """What the server needs from an engine."""

    name: str
    max_prompt_tokens: int | None  # prompt budget of a view (None: no limit)

    def generate(self, batch: Sequence[Messages], sampling: Sampling,
                 stop: StopFn | None = None) -> list[str]:
        """One raw continuation (assistant role) per message list, in order.

        ``stop`` is asked as often as the engine allows (transformers: every decode step);
        once true the backend raises :class:`GenerationCancelled` instead of returning.
        """
        ...

    def count_tokens(self, text: str) -> int:
        """Tokens of ``text`` (for ``usage``)."""
        ...

    def prompt_tokens(self, messages: Messages) -> int:
        """Tokens of the rendered prompt of ``messages`` (for ``usage``)."""
        ...


class FunctionBackend:
    """Wrap a plain ``generate_fn``; sampling settings are ignored, tokens are whitespace words.

    Args:
        generate_fn: ``generate_fn(batch) -> texts``.
        name: Reported as the backend name.
        max_prompt_tokens: Prompt budget in whitespace words (``None``: no limit).
    """

    def __init__(self, generate_fn: GenerateFn, name: str = "function",
                 max_prompt_tokens: int | None = None) -> None:
        self.generate_fn = generate_fn
        self.name = name
        self.max_prompt_tokens = max_prompt_tokens

    def generate(self, batch: Sequence[Messages], sampling: Sampling,
                 stop: StopFn | None = None) -> list[str]:
        check_stop(stop)  # a plain function cannot be interrupted: asked before it only
        return self.generate_fn(list(batch))

    def count_tokens(self, text: str) -> int:
        return len(text.split())

    def prompt_tokens(self, messages: Messages) -> int:
        return sum(len(m["content"].split()) for m in messages)


class _TokenizerCounts:
    tokenizer: Any

    def count_tokens(self, text: str) -> int:
        return len(self.tokenizer(text, add_special_tokens=False)["input_ids"])

    def prompt_tokens(self, messages: Messages) -> int:
        return self.count_tokens(self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=True))


class TransformersBackend(_TokenizerCounts):
    """The simulator in transformers: one :class:`ChatGenerator` pass per batch.

    Args:
        model: Causal LM in eval mode on its device.
        tokenizer: Its tokenizer (chat template with the training format).
        name: Reported as the backend name.
        batch_size: Most sequences per forward pass.
        max_prompt_tokens: Keep the last this many prompt tokens.
        prefill: Written in front of each turn, in the prompt and in the returned text (the
            frozen folder's :func:`~mimesis.simulator.frozen.turn_prefill`; ``""``: none).

    Seeded sampling (``seed`` set, ``temperature`` > 0) generates one view at a time, each from
    ``seed``: torch has one random stream per call and left padding changes a row's numbers,
    so a seeded request's text would otherwise depend on the batch it lands in. Greedy and
    unseeded requests are batched.
    """

    def __init__(self, model: Any, tokenizer: Any, name: str = "transformers",
                 batch_size: int = 16, max_prompt_tokens: int = 768,
                 prefill: str = TURN_PREFILL) -> None:
        self.model, self.tokenizer, self.name = model, tokenizer, name
        self.batch_size, self.max_prompt_tokens = batch_size, max_prompt_tokens
        self.prefill = prefill

    def generate(self, batch: Sequence[Messages], sampling: Sampling,
                 stop: StopFn | None = None) -> list[str]:
        from mimesis.models.generation import ChatGenerator, GenerationConfig

        check_stop(stop)
        config = GenerationConfig(max_new_tokens=sampling.max_tokens,
                                  temperature=sampling.temperature, top_p=sampling.top_p,
                                  batch_size=self.batch_size,
                                  max_prompt_tokens=self.max_prompt_tokens)
        generator = ChatGenerator(self.model, self.tokenizer, config, name=self.name)
        if sampling.seed is None or sampling.temperature <= 0:
            texts = generator.generate(batch, prefills=[self.prefill] * len(batch),
                                       desc="serve", seed=sampling.seed, stop=stop)
        else:
            texts = []
            for view in batch:
                check_stop(stop)
                texts += generator.generate([view], prefills=[self.prefill], desc="serve",
                                            seed=sampling.seed, stop=stop)
        check_stop(stop)  # stopped mid-way: the texts are cut short, never to be sent
        return [self.prefill + t for t in texts]


def vllm_sampling_kwargs(sampling: Sampling) -> dict[str, Any]:
    """Keyword arguments of ``vllm.SamplingParams`` for ``sampling`` (one sample, no special
    tokens in the text; ``top_p`` is 1 under greedy decoding, as transformers ignores it then)."""
    greedy = sampling.temperature <= 0
    return {"n": 1, "max_tokens": sampling.max_tokens,
            "temperature": max(sampling.temperature, 0.0),
            "top_p": 1.0 if greedy else sampling.top_p, "seed": sampling.seed,
            "skip_special_tokens": True}


def build_vllm_prompts(tokenizer: Any, batch: Sequence[Messages], max_prompt_tokens: int,
                       prefill: str = TURN_PREFILL) -> list[dict[str, list[int]]]:
    """vLLM token prompts (``{"prompt_token_ids": [...]}``) for ``batch``.

    Rendered with the tokenizer's chat template and ``add_generation_prompt``, exactly as
    :meth:`ChatGenerator.render`, plus the simulator's turn ``prefill`` (default
    :data:`~mimesis.format.TURN_PREFILL`), then cut to the last ``max_prompt_tokens`` tokens.
    """
    prompts = []
    for messages in batch:
        text = tokenizer.apply_chat_template(messages, tokenize=False,
                                             add_generation_prompt=True) + prefill
        ids = tokenizer(text, add_special_tokens=False)["input_ids"]
        prompts.append({"prompt_token_ids": list(ids[-max_prompt_tokens:])})
    return prompts


def import_vllm() -> Any:
    """The ``vllm`` module.

    Raises:
        BackendUnavailableError: vLLM is not installed (message says how to install it).
    """
    try:
        import vllm
    except ImportError as err:
        raise BackendUnavailableError(VLLM_MISSING) from err
    return vllm


def load_tokenizer(model_dir: Path) -> Any:
    """Tokenizer of a model folder with the same template rule as ``load_pretrained``: the saved
    template when it has ``{% generation %}`` markers (a MIMESIS-trained one), else ChatML."""
    from transformers import AutoTokenizer

    from mimesis.models.chat_template import apply_chatml

    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    if not _GENERATION_MARKER.search(tokenizer.chat_template or ""):
        apply_chatml(tokenizer)
    return tokenizer


class VLLMBackend(_TokenizerCounts):
    """The simulator in vLLM (``LLM.generate`` over token prompts, one call per batch).

    Args:
        model_dir: Plain HF folder (a frozen simulator, verified first by :func:`load_backend`).
        dtype: vLLM ``dtype`` (``bfloat16`` on GPUs).
        max_prompt_tokens: Keep the last this many prompt tokens.
        tensor_parallel_size: GPUs per model replica.
        gpu_memory_utilization: Share of GPU memory vLLM may take.
        max_model_len: Context length (``None``: the model's).
        seed: Engine seed.
        name: Reported as the backend name.
        prefill: Written in front of each turn: appended to the prompt, put back in front of
            the returned text (the folder's :func:`~mimesis.simulator.frozen.turn_prefill`).
        llm_kwargs: Further ``vllm.LLM`` arguments.

    Raises:
        BackendUnavailableError: vLLM not installed.
    """

    def __init__(self, model_dir: Path, dtype: str = "bfloat16", max_prompt_tokens: int = 2048,
                 tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.85,
                 max_model_len: int | None = None, seed: int = 0, name: str = "vllm",
                 prefill: str = TURN_PREFILL, **llm_kwargs: Any) -> None:
        vllm = import_vllm()
        self.name, self.max_prompt_tokens, self.prefill = name, max_prompt_tokens, prefill
        self.tokenizer = load_tokenizer(Path(model_dir))
        self._sampling_params = vllm.SamplingParams
        self.llm = vllm.LLM(model=str(model_dir), tokenizer=str(model_dir), dtype=dtype,
                            tensor_parallel_size=tensor_parallel_size,
                            gpu_memory_utilization=gpu_memory_utilization,
                            max_model_len=max_model_len, seed=seed, **llm_kwargs)

    def generate(self, batch: Sequence[Messages], sampling: Sampling,
                 stop: StopFn | None = None) -> list[str]:
        # LLM.generate is one blocking call: ``stop`` is asked before it only; a started call
        # runs to its end (at most max_tokens_limit new tokens per sequence).
        check_stop(stop)
        prompts = build_vllm_prompts(self.tokenizer, batch, self.max_prompt_tokens, self.prefill)
        params = self._sampling_params(**vllm_sampling_kwargs(sampling))
        outputs = self.llm.generate(prompts, params, use_tqdm=False)
        return [self.prefill + out.outputs[0].text for out in outputs]


def load_backend(kind: str, sim_dir: Path, dtype: str | None = None, batch_size: int = 16,
                 max_prompt_tokens: int = 768, name: str | None = None,
                 trust_folder: bool = False, **vllm_kwargs: Any) -> Backend:
    """The frozen simulator at ``sim_dir`` behind backend ``kind``, after its sha256 check.

    Args:
        kind: ``transformers`` or ``vllm``.
        sim_dir: A frozen simulator folder (``data/freeze_user/simulator``).
        dtype: Weights dtype (default ``float32`` for transformers, ``bfloat16`` for vLLM).
        batch_size / max_prompt_tokens: Engine limits (``batch_size``: transformers only).
        name: Backend name (default: ``kind``).
        trust_folder: Accept a ``freeze_user`` folder without ``registry.json`` beside it
            (warns; see :mod:`mimesis.simulator.frozen`).
        vllm_kwargs: Extra :class:`VLLMBackend` arguments.

    Raises:
        ValueError: unknown ``kind``.
        mimesis.simulator.frozen.FrozenSimulatorError: the folder fails verification.
        BackendUnavailableError: ``vllm`` requested but not installed.
    """
    from mimesis.simulator.frozen import check_frozen, load_frozen, turn_prefill

    if kind == "transformers":
        model, tokenizer, meta = load_frozen(Path(sim_dir), dtype=dtype or "float32",
                                             trust_folder=trust_folder)
        return TransformersBackend(model, tokenizer, name=name or kind, batch_size=batch_size,
                                   max_prompt_tokens=max_prompt_tokens,
                                   prefill=turn_prefill(meta))
    if kind == "vllm":
        import_vllm()  # fail with the install hint before hashing gigabytes of weights
        meta = check_frozen(Path(sim_dir), trust_folder=trust_folder)
        return VLLMBackend(Path(sim_dir), dtype=dtype or "bfloat16",
                           max_prompt_tokens=max_prompt_tokens, name=name or kind,
                           prefill=turn_prefill(meta), **vllm_kwargs)
    raise ValueError(f"unknown backend {kind!r}: use 'transformers' or 'vllm'")

