"""Units of ``mimesis.serve``: episode store, request reading, batching groups, vLLM's CPU side."""

from __future__ import annotations

import asyncio
import sys
import types
from pathlib import Path

import pytest

from mimesis.format import TURN_PREFILL
from mimesis.schemas import Scenario, Turn
from mimesis.serve.backends import (
    VLLM_MISSING,
    BackendUnavailableError,
    FunctionBackend,
    Sampling,
    VLLMBackend,
    build_vllm_prompts,
    load_backend,
    load_tokenizer,
    vllm_sampling_kwargs,
)
from mimesis.serve.batching import BatchingSimulator
from mimesis.serve.config import ServeConfig
from mimesis.serve.episodes import EpisodeStore
from mimesis.serve.messages import (
    NO_MESSAGE,
    check_continues,
    read_request,
    stateless_state,
)
from mimesis.serve.schemas import APIError, ChatMessage
from mimesis.simulator.runtime import NO_REPLY, UserSimulator, UserState

SCENARIO = Scenario(goal="book a table for two", annotator="test")


def state() -> UserState:
    return UserSimulator(lambda b: [], max_turns=4).init_state(SCENARIO)


def msgs(*pairs: tuple[str, object], **extra) -> list[ChatMessage]:
    return [ChatMessage(role=r, content=c, **extra) for r, c in pairs]


# episode store ---------------------------------------------------------------------------------
def test_store_expires_idle_episodes_and_evicts_least_recently_used() -> None:
    now = [0.0]
    store = EpisodeStore(ttl_s=10, max_episodes=2, clock=lambda: now[0])
    store.create("a", state())
    now[0] = 5
    store.create("b", state())
    assert store.get("a") is not None  # touching a makes b the least recently used
    store.create("c", state())
    assert store.get("b") is None and store.evicted == 1
    now[0] = 14.9
    assert store.get("c") is not None  # used at 5 -> alive until 15
    now[0] = 16
    store.get("c")
    assert store.get("a") is None and store.expired == 1  # a last used at 5
    assert len(store) == 1
    with pytest.raises(KeyError):
        store.create("c", state())
    with pytest.raises(ValueError):
        EpisodeStore(ttl_s=0, max_episodes=1)


# reading requests ------------------------------------------------------------------------------
def test_read_request_drops_what_a_user_cannot_see_and_joins_parts() -> None:
    view = read_request([
        ChatMessage(role="system", content="You are an agent. Secret policy: refund < $50."),
        ChatMessage(role="user", content="hi, table for 2?"),
        ChatMessage(role="assistant", content=None, tool_calls=[{"id": "1", "type": "function"}]),
        ChatMessage(role="tool", content='{"free": true}'),
        ChatMessage(role="assistant", content=[{"type": "text", "text": "Yes,"},
                                               {"type": "text", "text": "at 8pm."}]),
        ChatMessage(role="assistant", content="Shall I book?"),
    ])
    assert view.history == [Turn(role="user", text="hi, table for 2?")]
    assert view.agent_message == "Yes,\nat 8pm.\n\nShall I book?"
    assert "refund" not in view.agent_message
    assert read_request(msgs(("system", "x"))).agent_message is None  # opening turn
    assert read_request([]).agent_message is None


@pytest.mark.parametrize(("messages", "code"), [
    ([ChatMessage(role="user", content="hi")], "agent_message_missing"),
    ([ChatMessage(role="assistant", content=[{"type": "image_url", "image_url": {}}])],
     "unsupported_content"),
])
def test_read_request_rejects(messages, code) -> None:
    with pytest.raises(APIError) as info:
        read_request(messages)
    assert info.value.status == 400 and info.value.body.error.code == code


def test_read_request_keeps_a_blank_user_message_as_an_empty_turn() -> None:
    view = read_request(msgs(("user", "need a table"), ("assistant", "for when?"),
                             ("user", " "), ("assistant", "I cannot open images: which day?")))
    assert view.history == [Turn(role="user", text="need a table"),
                            Turn(role="assistant", text="for when?"),
                            Turn(role="user", text=NO_MESSAGE)]
    assert view.agent_message == "I cannot open images: which day?"
    joined = read_request(msgs(("user", ""), ("user", "table for 2"), ("assistant", "ok")))
    assert joined.history == [Turn(role="user", text="table for 2")]  # a blank part adds nothing
    s = stateless_state(state(), view)
    assert s.turns == 2 and s.user_utterances() == ["need a table", NO_MESSAGE]


def test_check_continues_requires_the_episode_history() -> None:
    s = state()
    s.history = [Turn(role="user", text="table for 2"), Turn(role="assistant", text=NO_REPLY)]
    ok = read_request(msgs(("user", "table for 2 "), ("assistant", ""), ("user", "table for 2"),
                           ("assistant", "when?")))
    with pytest.raises(APIError) as info:
        check_continues(s, ok, "e")  # one user turn too many
    assert info.value.status == 409
    s.history.append(Turn(role="user", text="table for 2"))
    check_continues(s, ok, "e")  # blank agent turn == the runtime's NO_REPLY
    with pytest.raises(APIError) as info:
        check_continues(s, read_request(msgs(("system", "s"))), "e")  # opening call, again
    assert info.value.status == 409


def test_stateless_state_rebuilds_counts_from_history() -> None:
    view = read_request(msgs(("user", "need a table"), ("assistant", "done"), ("user", "thanks!"),
                             ("assistant", "welcome")))
    s = stateless_state(state(), view)
    assert (s.turns, s.private, s.pleasantry_streak) == (2, ["", ""], 1)


# batching --------------------------------------------------------------------------------------
def test_batcher_groups_by_sampling_and_isolates_failing_groups() -> None:
    calls: list[tuple[int, int]] = []

    class Backend(FunctionBackend):
        def generate(self, batch, sampling, stop=None):
            calls.append((len(batch), sampling.max_tokens))
            if sampling.max_tokens == 13:
                raise RuntimeError("engine exploded")
            return [f"<think>r{sampling.max_tokens}</think>\nhello, a table?" for _ in batch]

    sim = BatchingSimulator(Backend(lambda b: []), max_turns=3, window_ms=50, max_batch=8)

    async def main():
        await sim.start()
        try:
            fast, slow, bad = Sampling(8, 0.0, 1.0), Sampling(16, 0.0, 1.0), Sampling(13, 0, 1)
            jobs = [sim.next_message(None, sim.init_state(SCENARIO), s)
                    for s in (fast, fast, slow, bad)]
            return await asyncio.gather(*jobs, return_exceptions=True)
        finally:
            await sim.stop()

    results = asyncio.run(main())
    assert sorted(calls) == [(1, 13), (1, 16), (2, 8)]
    assert [r.message for r in results[:3]] == ["hello, a table?"] * 3
    assert results[0].state.private == ["r8"] and results[2].state.private == ["r16"]
    assert isinstance(results[3], RuntimeError)
    assert sim.stats.batches == 1 and sim.stats.largest_batch == 4


def test_each_redraw_of_a_seeded_request_gets_its_own_seed_and_a_replay_the_same() -> None:
    seeds: list[int | None] = []

    class Backend(FunctionBackend):
        def generate(self, batch, sampling, stop=None):
            seeds.append(sampling.seed)
            return ["<think>r</think>\nhello there" for _ in batch]  # off topic: drawn again

    sim = BatchingSimulator(Backend(lambda b: []), max_turns=3, window_ms=0)

    async def main():
        await sim.start()
        try:
            for _ in range(2):
                await sim.next_message(None, sim.init_state(SCENARIO), Sampling(8, 1.0, 1.0, 5))
        finally:
            await sim.stop()

    asyncio.run(main())
    assert len(seeds) == 4 and seeds[0] == 5 and seeds[1] != 5  # the redraw: not a repeat
    assert seeds[:2] == seeds[2:] and 0 <= seeds[1] < 2**63  # the replay: the same draws


def test_serve_config_checks_limits() -> None:
    with pytest.raises(ValueError):
        ServeConfig(default_max_tokens=600, max_tokens_limit=512)
    with pytest.raises(ValueError):
        ServeConfig(max_body_bytes=10)


# vLLM, CPU side --------------------------------------------------------------------------------
def test_vllm_missing_gives_an_install_hint(monkeypatch, tmp_path) -> None:
    monkeypatch.setitem(sys.modules, "vllm", None)  # import vllm -> ImportError
    with pytest.raises(BackendUnavailableError, match=r"mimesis-usersim\[gpu\]") as info:
        load_backend("vllm", tmp_path / "not-even-there")
    assert str(info.value) == VLLM_MISSING
    with pytest.raises(BackendUnavailableError):
        VLLMBackend(tmp_path)


def test_vllm_sampling_params() -> None:
    assert vllm_sampling_kwargs(Sampling(64, 0.7, 0.9, seed=3)) == {
        "n": 1, "max_tokens": 64, "temperature": 0.7, "top_p": 0.9, "seed": 3,
        "skip_special_tokens": True}
    assert vllm_sampling_kwargs(Sampling(8, 0.0, 0.5))["top_p"] == 1.0  # greedy


@pytest.fixture(scope="module")
def tiny_dir() -> Path:
    from mimesis.models.base import base_dir

    return base_dir("tiny-llama")


def test_vllm_prompts_are_the_transformers_prompts(tiny_dir) -> None:
    from mimesis.models.generation import ChatGenerator

    tokenizer = load_tokenizer(tiny_dir)
    batch = [[{"role": "system", "content": "Your goal: a cheap flight"},
              {"role": "user", "content": "Hello, how can I help?"}]]
    ids = build_vllm_prompts(tokenizer, batch, max_prompt_tokens=10_000)[0]["prompt_token_ids"]
    rendered = ChatGenerator(None, tokenizer).render(batch[0])
    # the trained simulator's turn opens with its private channel: vLLM gets it in the prompt
    assert tokenizer.decode(ids) == rendered + TURN_PREFILL
    assert rendered.endswith("<|im_start|>assistant\n")
    cut = build_vllm_prompts(tokenizer, batch, max_prompt_tokens=5)[0]["prompt_token_ids"]
    assert cut == ids[-5:]  # like ChatGenerator: keep the most recent tokens


def test_vllm_backend_against_a_fake_engine(monkeypatch, tiny_dir) -> None:
    seen: dict = {}

    class LLM:
        def __init__(self, **kwargs):
            seen["llm"] = kwargs

        def generate(self, prompts, params, use_tqdm=True):
            seen["prompts"], seen["params"], seen["use_tqdm"] = prompts, params, use_tqdm
            return [types.SimpleNamespace(outputs=[types.SimpleNamespace(text=f"out {i}")])
                    for i, _ in enumerate(prompts)]

    class SamplingParams:
        def __init__(self, **kwargs):
            self.kwargs = kwargs

    monkeypatch.setitem(sys.modules, "vllm", types.SimpleNamespace(LLM=LLM,
                                                                   SamplingParams=SamplingParams))
    backend = VLLMBackend(tiny_dir, dtype="float16", tensor_parallel_size=2)
    out = backend.generate([[{"role": "user", "content": "a"}], [{"role": "user", "content": "b"}]],
                           Sampling(32, 0.5, 0.8, seed=1))
    # the prefilled <think> is given back in front of each continuation, as transformers does
    assert out == [TURN_PREFILL + "out 0", TURN_PREFILL + "out 1"]
    assert all(p["prompt_token_ids"] for p in seen["prompts"])
    assert seen["llm"]["model"] == str(tiny_dir) and seen["llm"]["dtype"] == "float16"
    assert seen["llm"]["tensor_parallel_size"] == 2 and seen["use_tqdm"] is False
    assert seen["params"].kwargs["max_tokens"] == 32 and len(seen["prompts"]) == 2
    assert backend.count_tokens("hello world") >= 2
