"""The private channel's contract: nothing private ever reaches what the agent sees.

A generated corpus (tests/leak_corpus.py: every leaking format × secrets × utterances) through
the parser, the runtime and the HTTP server; and the other side of the trade: ordinary user
messages (no reasoning) come through unchanged.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx
import pytest

from mimesis.schemas import Scenario
from mimesis.simulator.hidden_facts import hidden_facts_said
from mimesis.simulator.parsing import parse_turn
from mimesis.simulator.runtime import UserSimulator
from tests.leak_corpus import (
    FORMATS,
    NEEDS_SCENARIO,
    NEW_FORMS,
    NO_UTTERANCE,
    SECRETS,
    form_of,
    leaks,
    leaky_corpus,
    recall_by_form,
    received,
)
from tests.serve.test_serve_api import live_server

REPO_ROOT = Path(__file__).resolve().parents[2]
CORPUS = leaky_corpus()

ORDINARY = [
    "The user wants to upload files larger than 2GB. How do I configure nginx for that?",
    "My budget is 450 euros, can you find something cheaper?",
    "```python\ndef plan(x):\n    return x\n```\nwhy does this return None?",
    '<div class="hidden">hi</div> how do I show this div?',
    "Here's my XML: <note><to>Tove</to></note> how do I parse it in Java?",
    "## Approach\nI tried pandas groupby but it's slow. Any ideas?",
    "what is the final answer: 42 or 43?",
    "Plan for tomorrow: gym, then work. Can you make it a schedule?",
    "Analysis of the data shows a drop in March. What could cause it?",
    "Translate to French: my reply is no.",
    "ok so the agent said my refund is processed but I don't see it",
    "Okay, the user interface is confusing, where is the settings button?",
    "Thoughts on React vs Vue?",
    '{"message": "hi", "count": 3} is this valid JSON?',
    "Strategy for chess openings as a beginner?",
    "Let me see if I understand: the loop runs twice?",
    "Notes: I'm on windows 11. pip install fails with error 5",
    "I don't want to reveal my password to the support agent, is that ok?",
    "can you fix this error\n\nOutput: 404 not found",
    "1. cheap\n2. direct\nthose are my requirements",
]


def test_corpus_has_every_format_and_at_least_200_generations() -> None:
    assert len(CORPUS) >= 200 and len(FORMATS) >= 40
    assert {"heading_reasoning_message", "bold_reasoning_block", "plan_header",
            "analysis_header", "tag_thought", "tag_scratchpad", "tag_analysis",
            "okay_user_wants", "final_message_after_prose", "after_end_signal",
            "tag_unclosed_after", "tag_nested"} <= set(FORMATS)


def test_corpus_has_every_form_of_issue_36_with_at_least_300_cases() -> None:
    forms = {form_of(name) for name, *_ in CORPUS}
    assert set(NEW_FORMS) <= forms and len(CORPUS) >= 300
    assert all(sum(form_of(n) == form for n, *_ in CORPUS) >= 48 for form in NEW_FORMS)


def test_no_case_of_the_corpus_reaches_the_agent_through_the_runtime() -> None:
    recall = recall_by_form()
    assert {form: caught for form, (_, caught) in recall.items()} == {
        form: n for form, (n, _) in recall.items()}


def test_no_generation_of_the_corpus_leaks_and_the_message_survives() -> None:
    leaked = [(name, raw) for name, secret, _, raw in CORPUS
              if name not in NEEDS_SCENARIO and leaks(secret, parse_turn(raw).utterance)]
    assert leaked == []
    wrong = [(name, parse_turn(raw).utterance) for name, _, utterance, raw in CORPUS
             if name not in NO_UTTERANCE and parse_turn(raw).utterance != utterance]
    assert wrong == []


def test_the_final_message_marker_itself_is_not_sent() -> None:
    turn = parse_turn("The agent asked; my budget is 450.\nFinal message: any flights?")
    assert turn.utterance == "any flights?" and "450" in turn.reasoning


def test_an_unsafe_turn_is_resampled_then_ended_never_sent() -> None:
    calls: list[int] = []

    def generate(batch: list) -> list[str]:
        calls.append(len(batch))
        return ["Okay, the user wants dates. My budget is 450 euros. I'll say hi"] * len(batch)

    sim = UserSimulator(generate)
    message, state = sim.next_message(None, sim.init_state(Scenario(goal="a flight", annotator="test")))
    assert calls == [1, 1]  # generated, resampled once
    assert message == "" and state.ended and state.end_reason == "empty_turn"
    assert state.history == [] and "resampled:empty_utterance" in state.flags


@pytest.mark.slow
def test_over_http_no_turn_of_the_corpus_leaks() -> None:
    corpus = CORPUS[::4]  # every format with every secret: 444 turns
    # the secret is in the goal: the hidden-fact guard needs the scenario to know it
    by_goal = {f"case {i}: {secret}": raw for i, (_, secret, _, raw) in enumerate(corpus)}

    def script(batch: list) -> list[str]:
        return [by_goal[view[0]["content"].split("Your goal: ")[1].splitlines()[0].strip()]
                for view in batch]

    leaked, sent = [], 0
    with live_server(script, max_turns=4, window_ms=0) as base, httpx.Client(base_url=base) as http:
        for i, (name, secret, _, _) in enumerate(corpus):
            response = http.post(f"/ep/leak-{i}/v1/chat/completions", json={
                "messages": [], "scenario": {"goal": f"case {i}: {secret}"}})
            assert response.status_code == 200, response.text
            body = response.json()
            content = body["choices"][0]["message"]["content"]
            sent += body["choices"][0]["finish_reason"] == "stop"
            # flags are fixed names ("hidden_fact" would match the secret "hidden goal zebra")
            body["mimesis"].pop("flags")
            if leaks(secret, json.dumps(body)):
                leaked.append((name, content))
    assert len(corpus) >= 400 and leaked == []
    assert sent == len(corpus) - len(NO_UTTERANCE) * len(SECRETS)


def test_a_hidden_fact_with_meta_talk_is_never_sent_but_either_alone_is() -> None:
    scenario = Scenario(goal="a flight to Denver, budget 450 euros", annotator="test")
    assert hidden_facts_said("any flights?\nMy goal is to stay under 450 euros", scenario, "")
    assert hidden_facts_said("Hmm, it's 450 but I shouldn't say it", scenario, "")
    assert not hidden_facts_said("my budget is 450 euros", scenario, "")  # a fact, asked for
    assert not hidden_facts_said("my goal is to relax", scenario, "")  # meta, nothing hidden
    told = "What is your budget? Is it 450 euros?"
    assert not hidden_facts_said("My goal is 450 euros", scenario, told)  # no longer hidden
    assert received("any flights to denver?\nMy goal is: budget is 450 euros.",
                    "budget is 450 euros") == ""


def test_clean_answers_with_their_scenario_are_not_dropped() -> None:
    """False positives of the hidden-fact guard: every answer of every intention task, said
    with its own task as the scenario and nothing told yet (the worst case)."""
    envs = REPO_ROOT / "mimesis" / "envs"
    tasks = json.loads((envs / "intention" / "data" / "intention_tasks.json").read_text())["tasks"]
    pairs = [(Scenario(goal=" ".join([t["task"], *(d["answer"] for d in t["missing_details"])]),
                       annotator="test"), text)
             for t in tasks for text in [t["task"], *(d["answer"] for d in t["missing_details"])]]
    assert len(pairs) >= 100
    assert [text for scenario, text in pairs if hidden_facts_said(text, scenario, "")] == []


@pytest.mark.parametrize("text", [
    "Wait… is it 5 km² or 5 km?", "Tom &amp; Jerry is escaped as &amp;amp; in my HTML",
    "ＡＢＣ corp invoice is wrong", "Привет, can you answer in Russian?", "x\u200by test",
    "&lt;div&gt; shows up literally on my page, why?",
])
def test_folding_never_changes_an_ordinary_message(text: str) -> None:
    assert parse_turn(text).utterance == text.strip() and parse_turn(text).reasoning == ""


def _repo_user_messages() -> list[str]:
    envs = REPO_ROOT / "mimesis" / "envs"
    tasks = json.loads((envs / "intention" / "data" / "intention_tasks.json").read_text())["tasks"]
    texts = [t["task"] for t in tasks] + [d["answer"] for t in tasks for d in t["missing_details"]]
    search = envs / "search" / "data" / "search_questions.json"
    texts += [q["question"] for q in json.loads(search.read_text())["questions"]]
    return texts + ORDINARY


def test_ordinary_user_messages_are_not_over_stripped() -> None:
    texts = _repo_user_messages()
    assert len(texts) >= 150
    changed = [t for t in texts if (parse_turn(t).utterance, parse_turn(t).reasoning)
               != (t.strip(), "")]
    assert changed == []


def test_userrl_user_prompts_are_not_over_stripped(shared_dir) -> None:
    import pandas as pd

    texts = sorted({m["content"] for f in (shared_dir / "data" / "userrl_gyms").rglob("*.parquet")
                    for prompt in pd.read_parquet(f).prompt for m in prompt
                    if m["role"] == "user"})
    assert len(texts) >= 300
    assert [t for t in texts if parse_turn(t).utterance != t.strip()] == []
