"""TurtleGym: shipped stories, key-fact matching, judges (offline and OpenAI stub), episodes,
UserRL loader, registry."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

import mimesis.envs.turtle.gym as turtle_module
import mimesis.envs.turtle_judge as turtle_judge_module
from mimesis.envs import list_envs
from mimesis.envs.turtle.gym import TurtleGym, derive_key_facts, load_userrl_tasks, turtle_reward
from mimesis.envs.turtle_judge import (
    KeyFact,
    OpenAIJudge,
    TurtleJudge,
    TurtleJudgeError,
    TurtleStory,
    fact_covered,
    key_fact_judge,
    key_fact_score,
    parse_judge_score,
)

KEY_ENV = "MIMESIS_TEST_TURTLE_JUDGE_KEY"
SNOW = TurtleStory(
    "t-snow",
    "Gifts on the Lawn",
    "A boy found a carrot, a scarf and coal on the lawn in spring.",
    "They were what was left of a snowman that melted.",
    (KeyFact("It was a snowman.", ("snowman",)), KeyFact("It melted.", ("melt", "thaw"))),
)
WIN = "[answer] They were the remains of the snowman he built; it melted in the warm weather."


class FixedJudge:
    """A judge that records its calls and returns a fixed score."""

    def __init__(self, value: float, name: str = "fixed") -> None:
        self.value, self.name, self.calls = value, name, []

    def __call__(self, story: TurtleStory, explanation: str) -> float:
        self.calls.append((story.id, explanation))
        return self.value


def play(env: TurtleGym, answer: str | None, replies: tuple[str, ...] = ("Yes", "No")) -> tuple:
    """Reset, ask one question per scripted user reply, then send ``answer`` (if any)."""
    env.reset(options={"task": SNOW})
    for reply in replies:
        _, _, _, _, info = env.step("[action] Is it about winter?")
        assert info["to_user"] == "Is it about winter?"
        env.observe_user(reply)
    if answer is None:
        return env.step("[finish]")
    return env.step(answer)


def test_shipped_stories() -> None:
    stories = TurtleGym.default_tasks()
    assert len(stories) >= 30 and TurtleGym.scenario_count() == len(stories)
    assert len({s.id for s in stories}) == len(stories)
    assert len({s.title for s in stories}) == len(stories)
    for s in stories:
        assert s.surface.strip() and s.bottom.strip() and 2 <= len(s.key_facts) <= 4
        assert all(f.text and f.keywords and f.weight > 0 for f in s.key_facts)
        # The hidden explanation solves the story; restating the puzzle earns nothing.
        assert key_fact_score(s.key_facts, s.bottom) == 1.0, s.id
        assert key_fact_score(s.key_facts, s.surface) == 0.0, s.id


@pytest.mark.parametrize(
    ("text", "covered"),
    [
        ("He had built a snowman", True),
        ("the SNOWMANS were gone", True),
        ("It snowed, man", False),  # a keyword is one word, not its parts
        ("There was a dead body", False),
        ("", False),
    ],
)
def test_fact_matching(text: str, covered: bool) -> None:
    assert fact_covered(KeyFact("f", ("snowman",)), text) is covered


def test_phrase_alternatives_need_all_words_and_min_matches() -> None:
    fact = KeyFact("two-way mirror", ("two way mirror", "spy"))
    assert fact_covered(fact, "It was a two-way mirror")
    assert not fact_covered(fact, "The mirror was in the way")
    strict = KeyFact("f", ("landslide", "dammed", "flood"), min_matches=2)
    assert not fact_covered(strict, "a landslide")
    assert fact_covered(strict, "a landslide dammed the river")


def test_weighted_key_fact_score() -> None:
    facts = (KeyFact("a", ("corpse",), 0.6), KeyFact("b", ("light",), 0.4))
    assert key_fact_score(facts, "The shadow was a corpse") == pytest.approx(0.6)
    assert key_fact_score(facts, "No light, and a corpse") == pytest.approx(1.0)
    assert key_fact_score((), "anything") == 0.0


def test_winning_episode() -> None:
    env = TurtleGym(tasks=[SNOW], max_turns=10)
    obs, info = env.reset(options={"task": SNOW})
    assert SNOW.surface in obs and SNOW.bottom not in obs and "[answer]" in obs
    goal = info["scenario"].goal
    assert SNOW.bottom in goal and "Yes, No, or Irrelevant" in goal
    assert info["scorer"] == "key_facts"
    obs, reward, term, trunc, info = play(env, WIN, replies=("Yes", "No", "Irrelevant"))
    assert (reward, term, trunc, info["outcome"], info["turn"]) == (1.0, True, False, "answered", 4)
    assert info["scorer"] == env.scorer == "key_facts"
    assert env.result is not None and env.result.scorer == "key_facts"
    assert [m.role for m in env.history].count("user") == 3


@pytest.mark.parametrize(
    ("answer", "reward"),
    [
        ("[answer] A snowman stood there all winter.", 0.5),  # one of two facts
        ("[answer] A neighbour dropped them.", 0.0),
        ("[answer]", 0.0),
        (None, 0.0),  # [finish]
    ],
)
def test_losing_and_partial_episodes(answer: str | None, reward: float) -> None:
    env = TurtleGym(tasks=[SNOW])
    _, got, term, _, info = play(env, answer)
    assert term and got == reward
    assert info["outcome"] == ("finished" if answer is None else "answered")


def test_truncation_scores_zero_without_calling_the_judge() -> None:
    judge = FixedJudge(0.9)
    env = TurtleGym(tasks=[SNOW], max_turns=2, judge=judge)
    env.reset()
    env.step("[action] Is it a snowman?")
    env.observe_user("Yes")
    _, reward, term, trunc, info = env.step("[action] Did it melt?")
    assert (reward, term, trunc, info["outcome"], info["to_user"]) == (0.0, False, True,
                                                                        "truncated", None)
    assert judge.calls == [] and env.result is not None and env.result.scorer == "none"


def test_custom_judge_is_recorded_and_called_once() -> None:
    judge = FixedJudge(0.3, name="my-judge")
    assert isinstance(judge, TurtleJudge) and isinstance(key_fact_judge, TurtleJudge)
    env = TurtleGym(tasks=[SNOW], judge=judge)
    _, reward, _, _, info = play(env, "[answer] a snowman melted")
    assert reward == 0.3 and info["scorer"] == env.scorer == "my-judge"
    assert env.result.scorer == "my-judge"
    assert env.score() == 0.3 and judge.calls == [("t-snow", "a snowman melted")]


def test_turtle_reward_clips_and_skips_blank() -> None:
    assert turtle_reward(SNOW, "x", FixedJudge(1.7)).value == 1.0
    assert turtle_reward(SNOW, "x", FixedJudge(-0.2)).value == 0.0
    judge = FixedJudge(0.5)
    assert turtle_reward(SNOW, "   ", judge).scorer == "none" and judge.calls == []


def test_search_has_no_tool() -> None:
    env = TurtleGym(tasks=[SNOW])
    env.reset()
    obs, reward, term, _, info = env.step("[search] snowman")
    assert "no search tool" in obs and info["obs_source"] == "tool" and not term
    assert reward == 0.0


@pytest.mark.parametrize(
    ("reply", "score"),
    [("0.7", 0.7), ("Score: 0.25", 0.25), ("3/4", 0.75), ("90%", 0.9), ("1", 1.0),
     ("<think>maybe 5</think> 0.4", 0.4)],
)
def test_parse_judge_score(reply: str, score: float) -> None:
    assert parse_judge_score(reply) == pytest.approx(score)


@pytest.mark.parametrize("reply", ["no idea", "7", ""])
def test_parse_judge_score_rejects(reply: str) -> None:
    with pytest.raises(TurtleJudgeError):
        parse_judge_score(reply)


# ---------------------------------------------------------------- OpenAI judge against a stub
@pytest.fixture
def stub(openai_stub, monkeypatch: pytest.MonkeyPatch):
    server, url = openai_stub
    server.reply = "0.8"
    monkeypatch.setenv(KEY_ENV, "sk-test")
    return server, url


def make_judge(url: str) -> OpenAIJudge:
    return OpenAIJudge("stub-judge", base_url=url, api_key_env=KEY_ENV, timeout_s=5, max_retries=0)


def test_openai_judge_scores_an_episode(stub) -> None:
    server, url = stub
    env = TurtleGym(tasks=[SNOW], judge=make_judge(url))
    _, reward, _, _, info = play(env, "[answer] a carrot fell from the sky")
    assert reward == pytest.approx(0.8) and info["scorer"] == "openai:stub-judge"
    assert env.result.scorer == "openai:stub-judge"
    [body] = server.requests
    prompt = body["messages"][-1]["content"]
    assert body["model"] == "stub-judge" and body["temperature"] == 0.0
    assert SNOW.surface in prompt and SNOW.bottom in prompt and "a carrot fell" in prompt
    assert "It was a snowman." in prompt


def test_openai_judge_errors(stub, monkeypatch: pytest.MonkeyPatch) -> None:
    server, url = stub
    judge = make_judge(url)
    server.reply = "I cannot grade this."
    with pytest.raises(TurtleJudgeError, match="no score"):
        judge(SNOW, "a snowman")
    server.status = 401
    with pytest.raises(TurtleJudgeError, match="AuthenticationError"):
        judge(SNOW, "a snowman")
    monkeypatch.delenv(KEY_ENV)
    with pytest.raises(TurtleJudgeError, match=KEY_ENV):
        make_judge(url)


# ---------------------------------------------------------------- UserRL loader
def test_userrl_loader(shared_dir: Path) -> None:
    path = shared_dir / "data" / "userrl_gyms" / "TurtleGym" / "all_stories_refined.json"
    raw = json.loads(path.read_text())
    tasks, rejects = load_userrl_tasks(path.parent.parent)
    assert len(tasks) + len(rejects) == len(raw) == 471 and not rejects
    for story in tasks:
        assert story.key_facts and sum(f.weight for f in story.key_facts) == pytest.approx(1.0)
        assert all(1 <= f.min_matches <= len(f.keywords) for f in story.key_facts)
    shadow = next(t for t in tasks if t.id == "17")
    assert shadow.title == "The Shadow" and len(shadow.key_facts) == len(raw["17"]["evaluation"])
    assert any("corpse" in f.keywords for f in shadow.key_facts)
    env = TurtleGym(tasks=tasks)
    env.reset(options={"task": shadow})
    reward = env.step("[answer] It was night with no light, so there could be no shadow: the "
                      "'shadow' behind the man was really a corpse.")[1]
    assert reward == pytest.approx(1.0)


def test_userrl_loader_derives_facts_and_rejects(tmp_path: Path) -> None:
    rows = [
        {"title": "Lift", "surface": "A man takes the stairs up.",
         "bottom": "He is short. He cannot reach the button for his floor."},
        {"new_title": "Empty", "new_surface": "Something odd.", "new_bottom": ""},
        "junk",
    ]
    (tmp_path / "all_stories_refined.json").write_text(json.dumps(rows))
    tasks, rejects = load_userrl_tasks(tmp_path)
    assert [t.title for t in tasks] == ["Lift"]
    assert [r.id for r in rejects] == ["1", "2"]
    assert {r.reason for r in rejects} == {"missing_surface_or_bottom"}
    facts = tasks[0].key_facts
    assert facts == derive_key_facts(rows[0]["bottom"], rows[0]["surface"]) and len(facts) == 2
    assert key_fact_score(facts, "He is too short to reach the button") == 1.0
    with pytest.raises(FileNotFoundError):
        load_userrl_tasks(tmp_path / "missing")


def test_registry_and_doctests() -> None:
    spec = next(s for s in list_envs() if s.name == "TurtleGym")
    assert (spec.split, spec.n_scenarios) == ("train", len(TurtleGym.default_tasks()))
    result = doctest.testmod(turtle_module)
    assert result.attempted > 0 and result.failed == 0
    result = doctest.testmod(turtle_judge_module)
    assert result.attempted > 0 and result.failed == 0
