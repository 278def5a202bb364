"""SearchGym: shipped data, BM25 retrieval, answer normalisation, episodes, loaders, registry."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

from mimesis.envs import registry
from mimesis.envs.search import gym as search_gym
from mimesis.envs.search.gym import (
    BM25Index,
    SearchDoc,
    SearchGym,
    SearchTask,
    answer_matches,
    load_docs,
    load_userrl_tasks,
    normalize_answer,
    search_reward,
    shipped_docs,
)

DOCS = {d.id: d for d in shipped_docs()}
TASKS = {t.id: t for t in SearchGym.default_tasks()}


def test_shipped_data_is_consistent() -> None:
    assert len(DOCS) == len(shipped_docs()) >= 100
    assert len(TASKS) >= 30 and SearchGym.scenario_count() == len(TASKS)
    assert sum(len(t.support) >= 2 for t in TASKS.values()) >= 30  # multi-hop
    for task in TASKS.values():
        assert task.answers and task.intent and set(task.support) <= set(DOCS), task.id
        # The first accepted answer is stated in the last supporting document.
        last = normalize_answer(DOCS[task.support[-1]].text)
        assert normalize_answer(task.answers[0]) in last, task.id
    assert all(d.text.strip() and d.title.strip() for d in DOCS.values())


@pytest.mark.parametrize(
    ("query", "doc_id"),
    [
        ("where was Imelda Voss born", "imelda-voss"),
        ("highest peak of the Tesk Mountains", "tesk-mountains"),
        ("stadium of Hollin Rovers", "marrow-park"),
        ("Grey Heron speed record", "grey-heron"),
        ("Harlow Bridge Wendmouth opened", "harlow-bridge-wendmouth"),
    ],
)
def test_bm25_retrieves_the_right_doc(query: str, doc_id: str) -> None:
    env = SearchGym()
    hits = env.index.search(query, k=3)
    assert hits[0][0].id == doc_id
    assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)


def test_bm25_unknown_words_and_custom_docs() -> None:
    index = BM25Index([SearchDoc("a", "Cats", "Cats purr."), SearchDoc("b", "Dogs", "Dogs bark.")])
    assert index.search("zebra xylophone") == []
    assert [d.id for d, _ in index.search("do dogs bark", k=5)] == ["b"]
    with pytest.raises(ValueError):
        BM25Index([])
    with pytest.raises(ValueError, match="unique"):
        BM25Index([SearchDoc("a", "", "x"), SearchDoc("a", "", "y")])


@pytest.mark.parametrize(
    ("prediction", "answers", "ok"),
    [
        ("Old Margit", ("Old Margit",), True),
        ("  old margit. ", ("Old Margit",), True),
        ("The Ibexes!", ("the Ibexes",), True),
        ("18,400", ("18400",), True),
        ("ibex", ("Veldorian ibex", "ibex"), True),  # aliases
        ("Renn–Ivory", ("Renn-Ivory",), True),  # Unicode dash is punctuation too
        ("Veldorian ibexes", ("Veldorian ibex",), False),
        ("1794 or 1795", ("1794",), False),
        ("", ("1794",), False),
        ("the", ("a",), False),  # both normalise to "": never a match
    ],
)
def test_answer_normalisation(prediction: str, answers: tuple, ok: bool) -> None:
    assert answer_matches(prediction, answers) is ok
    assert search_reward(prediction, answers) == float(ok)


def test_normalize_answer() -> None:
    assert normalize_answer("An  Apple, the Pear") == "apple pear"
    assert search_reward(None, ("x",)) == 0.0


def test_winning_multi_hop_episode() -> None:
    env = SearchGym(tasks=[TASKS["q05"]])
    obs, info = env.reset(seed=0)
    assert "founder of Tarrow Glassworks" in obs and "1794" not in obs
    assert "1794" not in info["scenario"].goal and "birth year" in info["scenario"].goal
    obs, reward, term, _, info = env.step("[search] Tarrow Glassworks founder")
    assert "Imelda Voss" in obs and info["obs_source"] == "tool" and not term
    obs = env.step("[search] Imelda Voss born")[0]
    assert "1794" in obs.splitlines()[0]
    obs, reward, term, trunc, info = env.step("[answer] 1794.")
    assert (reward, term, trunc, info["outcome"], obs) == (1.0, True, False, "answered", "Correct!")


def test_ambiguous_question_is_resolved_by_the_user() -> None:
    env = SearchGym(tasks=[TASKS["q32"]])
    _, info = env.reset()
    assert "Wendmouth" in info["scenario"].goal  # only the user knows which bridge
    obs = env.step("[search] Harlow Bridge opened")[0]
    assert "1903" in obs and "1958" in obs  # both bridges match
    _, _, _, _, info = env.step("[action] Which Harlow Bridge: Kelmarsh or Wendmouth?")
    assert info["to_user"] == "Which Harlow Bridge: Kelmarsh or Wendmouth?"
    env.observe_user("The one in Wendmouth.")
    assert env.step("[answer] 1958")[1] == 1.0


def test_losing_episodes() -> None:
    env = SearchGym(tasks=[TASKS["q32"]], max_turns=3)
    env.reset()
    obs, reward, term, _, _ = env.step("[answer] 1903")  # the other bridge
    assert (reward, term, obs) == (0.0, True, "Wrong answer.")
    env.reset()
    assert env.step("[finish]")[1:3] == (0.0, True)
    env.reset()
    for _ in range(2):
        env.step("[search] Harlow Bridge")
    _, reward, _, trunc, info = env.step("[search] Harlow Bridge 1958")
    assert (reward, trunc, info["outcome"]) == (0.0, True, "truncated")


def test_search_output_format() -> None:
    env = SearchGym(top_k=2, snippet_chars=30)
    env.reset(seed=1)
    lines = env.step("[search] Ostenburg capital")[0].splitlines()
    assert len(lines) == 2 and lines[0].startswith("[1] ")
    assert len(lines[0].split(": ", 1)[1]) <= 30
    assert env.step("[search] qwertyuiop")[0] == 'No documents match "qwertyuiop".'
    assert env.step("[search]")[0].startswith("Empty search")


def test_own_documents(tmp_path: Path) -> None:
    rows = [
        {
            "id": "d1",
            "title": "Blue Owl Cafe",
            "text": "The Blue Owl Cafe is run by Priya Nandakumar.",
        },
        {"id": "d2", "text": "Priya Nandakumar was born in Lisbon."},
        {"id": "d1", "title": "dup", "text": "duplicate id"},
        {"id": "d4", "title": "no text"},
    ]
    path = tmp_path / "docs.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n")
    docs, rejects = load_docs(path)
    assert [d.id for d in docs] == ["d1", "d2"] and docs[1].title == ""
    assert [(r.id, r.reason) for r in rejects] == [("d1", "duplicate_id"), ("d4", "missing_text")]
    (tmp_path / "docs.json").write_text(json.dumps({"docs": rows[:2]}))
    assert len(load_docs(tmp_path / "docs.json")[0]) == 2
    task = SearchTask("t1", "Where was the owner of the Blue Owl Cafe born?", ("Lisbon",))
    env = SearchGym(tasks=[task], docs_path=path)
    assert len(env.doc_rejects) == 2
    _, info = env.reset()
    assert "exactly what the question says" in info["scenario"].goal
    assert "Lisbon" in env.step("[search] Priya Nandakumar born")[0]
    assert env.step("[answer] Lisbon")[1] == 1.0
    with pytest.raises(FileNotFoundError):
        load_docs(tmp_path / "missing.json")
    (tmp_path / "empty.json").write_text("[]")
    with pytest.raises(ValueError):
        SearchGym(docs_path=tmp_path / "empty.json")


def test_userrl_loader(shared_dir: Path) -> None:
    path = shared_dir / "data" / "userrl_gyms" / "SearchGym" / "questions.json"
    tasks, rejects = load_userrl_tasks(path.parent.parent)
    assert len(tasks) == len(json.loads(path.read_text())) == 125 and not rejects
    assert (tasks[0].id, tasks[0].answers) == ("Bamboogle-1", ("james madison",))
    env = SearchGym(tasks=tasks)
    env.reset(options={"index": 0})
    assert env.step("[answer] James Madison")[1] == 1.0


def test_userrl_loader_rejects(tmp_path: Path) -> None:
    rows = [
        {"id": "b1", "question": "Q?", "answer": ["x", "y"]},
        {"id": "b2", "question": "Q?", "answer": ""},
        {"id": "b3", "answer": "x"},
        "junk",
    ]
    (tmp_path / "questions.json").write_text(json.dumps(rows))
    tasks, rejects = load_userrl_tasks(tmp_path)
    assert [(t.id, t.answers) for t in tasks] == [("b1", ("x", "y"))]
    assert [r.id for r in rejects] == ["b2", "b3", "3"]
    with pytest.raises(FileNotFoundError):
        load_userrl_tasks(tmp_path / "nowhere")


def test_registry_says_held_out() -> None:
    specs = {s.name: s for s in registry.list_envs()}
    assert (specs["SearchGym"].split, specs["SearchGym"].n_scenarios) == ("held_out", len(TASKS))
    assert registry.make("SearchGym", max_turns=4).max_turns == 4


def test_doctests() -> None:
    result = doctest.testmod(search_gym)
    assert result.attempted > 0 and result.failed == 0
