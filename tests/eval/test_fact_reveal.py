"""Fact-reveal check: the env parsers decide, probes never carry their fact, the stage reports it.

Scripted users (``generate_fn`` over the simulator's view) answer from the scenario text they
are given, by rules written here, not by the probes' own judges: one states the fact, one
dodges, one echoes the question, one always says "Yes".
"""

from __future__ import annotations

import doctest
import json
import re

import pytest

from mimesis.envs import facts
from mimesis.envs.facts import Fact, check_fact, task_fact
from mimesis.envs.registry import env_names
from mimesis.envs.travel import probes as travel_probes
from mimesis.envs.turtle import probes as turtle_probes_module
from mimesis.envs.turtle.probes import turtle_probes
from mimesis.eval.agents import fact_report, fact_reveal
from mimesis.eval.agents.fact_report import summarize
from mimesis.eval.agents.fact_reveal import FactRevealParams, env_probes, play
from mimesis.simulator.runtime import UserSimulator

TRAIN_ENVS = env_names("train")

PARAMS = FactRevealParams(envs=TRAIN_ENVS, n_tasks=6, phrasings=3,
                          users=[{"name": "agenda", "kind": "agenda"}])


def _think(text: str) -> str:
    return f"<think>scripted</think>\n{text}"


def _function_answer(goal: str, question: str) -> str:
    from mimesis.envs.function.rules import evaluate_rule, format_number

    rule = re.search(r"f\(a, b, c, d\) = (.+?) \(Python", goal).group(1)
    numbers = [int(n) for n in re.findall(r"\d+", question)][:4]  # the env's working follows
    return f"It's {format_number(evaluate_rule(rule, numbers))}."


def _travel_answer(goal: str, question: str) -> str:
    prefs = re.findall(r"^- ([\w ]+): the ([\w ]+) must be (.+?) \(say this", goal, re.MULTILINE)
    budget = any(w in question.lower() for w in ("budget", "pay", "price"))
    for _, attr, value in prefs:
        if budget and attr == "price":
            return f"My budget: {value}."
        if not budget and attr in question:
            return f"I'd like {value}."
    return "no idea"


def _tau_answer(goal: str, question: str) -> str:
    q = question.lower()
    booking = r"\b(?=\w*\d)[A-Z0-9]{6}\b"
    patterns = [("user id", r"\b[a-z]+_[a-z]+_\d+\b"),
                ("name", r"(?:are|is) ([A-Z][a-z]+ [A-Z][a-z]+)"), ("zip", r"\b\d{5}\b"),
                ("order", r"#W\d{7}"), ("email", r"\S+@\S+\.com"), ("reservation", booking),
                ("confirmation", booking)]
    for cue, rx in patterns:
        if cue in q:
            match = re.search(rx, goal)
            return f"Sure, it's {match.group(match.lastindex or 0)}." if match else "no idea"
    return "no idea"


def _turtle_answer(goal: str, question: str) -> str:
    answers = {p["question"]: p["answer"] for ps in turtle_probes().values() for p in ps}
    asked = next(q for q in answers if q in question)
    return "Yes." if answers[asked] == "yes" else "No."


def _persuade_answer(goal: str, question: str) -> str:
    stance = re.search(r"you start at (\d)", goal).group(1)
    return f"My stance: {stance}/7"


STATE_FACT = {"FunctionGym": _function_answer, "TravelGym": _travel_answer,
              "TurtleGym": _turtle_answer, "TauGym": _tau_answer, "PersuadeGym": _persuade_answer}


def _scripted(answer):
    """A ``generate_fn``: ``answer(system prompt, agent's last message)`` per view."""
    return lambda batch: [_think(answer(v[0]["content"], v[-1]["content"])) for v in batch]


@pytest.fixture(scope="module")
def probes():
    return {env: env_probes(env, PARAMS) for env in TRAIN_ENVS}


@pytest.mark.parametrize("env", TRAIN_ENVS)
def test_stating_user_scores_all_and_dodging_or_echoing_user_none(env, probes) -> None:
    cases = probes[env]
    assert len(cases) == PARAMS.n_tasks * PARAMS.phrasings
    assert len({c.fact.task_id for c in cases}) == PARAMS.n_tasks
    stating = play(UserSimulator(_scripted(STATE_FACT[env])), cases)
    assert [r["reply"] for r in stating if not r["revealed"]] == []
    dodging = play(UserSimulator(_scripted(lambda g, q: "Hmm, I'd rather not say right now.")),
                   cases)
    assert sum(r["revealed"] for r in dodging) == 0
    # echoes the agent's question (FunctionGym's and TurtleGym's views add the user's private
    # working / check, which holds the answer on purpose: stating it is the user's job)
    echoing = play(UserSimulator(_scripted(
        lambda g, q: re.split(r"\n\n\[Your private| \[Your private check", q)[0])), cases)
    assert all(r["reply"] for r in echoing)  # the echo was sent, and judged
    assert sum(r["revealed"] for r in echoing) == 0


def test_always_yes_user_scores_about_half_on_turtle(probes) -> None:
    rows = play(UserSimulator(_scripted(lambda g, q: "Yes.")), probes["TurtleGym"])
    assert summarize(rows)["rate"] == pytest.approx(0.5)


@pytest.mark.slow
def test_every_training_task_has_a_fact_whose_probes_do_not_state_it() -> None:
    from mimesis.envs import make
    from mimesis.envs.registry import task_indices

    for name in TRAIN_ENVS:
        env = make(name)
        resets = ([{"seed": s} for s in range(30)] if env.tasks is None else
                  [{"options": {"index": i}} for i in task_indices(len(env.tasks), "train")])
        for position, kwargs in enumerate(resets):
            env.reset(**kwargs)
            fact = task_fact(env, position)  # raises when a question passes its own judge
            assert len(fact.questions) >= 3


def test_check_fact_refuses_a_probe_that_contains_its_fact() -> None:
    leaky = Fact("FunctionGym", "t", "value", "f = 42", ("Is f(1, 2, 3, 5) = 42?",),
                 lambda reply: "42" in reply)
    with pytest.raises(ValueError, match="states its own fact"):
        check_fact(leaky)


def test_parsers_are_narrow() -> None:
    for module in (facts, travel_probes, turtle_probes_module):
        assert doctest.testmod(module).failed == 0
    assert doctest.testmod(fact_reveal).failed == 0
    assert doctest.testmod(fact_report).failed == 0
    assert turtle_probes_module.yes_no("No idea, sorry") is None
    assert travel_probes.stated_values("anything but 2 stops", ("nonstop", "1 stop", "2 stops")) \
        == {"2 stops"}


def test_params_refuse_unknown_users_and_held_out_envs() -> None:
    with pytest.raises(ValueError, match="fact_reveal.users"):
        FactRevealParams(users=["gpt"])
    with pytest.raises(ValueError, match="not train"):
        FactRevealParams(envs=["TelepathyGym"])


@pytest.mark.slow
def test_evaluate_agents_stage_writes_fact_reveal_outputs(tmp_path) -> None:
    """The stage on the smoke setup (tiny random Llama): fact_reveal.json/md and metrics."""
    import random

    import mlflow
    import torch

    from mimesis.eval.agents.run import AgentComparisonParams
    from mimesis.io import write_json, write_jsonl
    from mimesis.models.base import load_base
    from mimesis.schemas import LabeledConversation, Scenario, Turn, TurnLabel
    from mimesis.simulator.frozen import hash_files
    from mimesis.stages.evaluate_agents import EvaluateAgentsParams, run
    from mimesis.users.spec import UserSamplingParams

    sim_dir = tmp_path / "freeze_user" / "simulator"
    model, tokenizer = load_base("tiny-llama")
    with torch.no_grad():  # not the tiny base itself: the prompted tiny user must be allowed
        next(model.parameters()).add_(0.01)
    model.save_pretrained(sim_dir)
    tokenizer.save_pretrained(sim_dir)
    write_json(sim_dir / "meta.json", {"base_model": "tiny-llama", "files": hash_files(sim_dir)})
    rng = random.Random(0)
    convs = [LabeledConversation(
        id=f"c{i}", turns=[Turn(role="user", text=f"help me fix bug {rng.randint(0, 99)}"),
                           Turn(role="assistant", text="Sure, show me the code.")],
        labels=[TurnLabel(turn_index=0, reasoning="", reasoning_annotator="none")],
        scenario=Scenario(goal=f"fix python bug {i}", annotator="test"), end_reasoning="",
        end_reasoning_annotator="none") for i in range(6)]
    write_jsonl(tmp_path / "label" / "test.jsonl", convs)
    users = ["frozen", {"name": "prompted-tiny", "kind": "hf", "model": "tiny-llama",
                        "max_new_tokens": 8}, {"name": "agenda", "kind": "agenda"}]
    params = EvaluateAgentsParams(
        profile="smoke", agents=AgentComparisonParams(enabled=False),
        fact_reveal=FactRevealParams(envs=TRAIN_ENVS, n_tasks=2, phrasings=3, users=users,
                                     user=UserSamplingParams(max_new_tokens=8)))
    out_dir = tmp_path / "evaluate_agents"
    run(tmp_path / "freeze_user", tmp_path / "label", out_dir, params)
    assert "disabled" in (out_dir / "agents.md").read_text()  # dvc.yaml declares the file

    report = json.loads((out_dir / "fact_reveal.json").read_text())
    assert set(report["results"]) == {"frozen", "prompted-tiny", "agenda"}
    assert len(report["rows"]) == 3 * len(TRAIN_ENVS) * 2 * 3 * 2  # users, envs, tasks, wordings, splits
    md = (out_dir / "fact_reveal.md").read_text()
    assert "| TauGym |" in md and md.index("Held-out tasks") < md.index("Training-part tasks")
    metrics = json.loads((out_dir / "metrics.json").read_text())["fact_reveal"]
    assert metrics["agenda"]["heldout"]["TravelGym"]["n"] == 6
    assert metrics["agenda"]["heldout"]["mean"]["n"] == len(TRAIN_ENVS) * 6
    runs = mlflow.search_runs(experiment_names=["mimesis"], filter_string="run_name = 'evaluate_agents'")
    assert "metrics.fact_reveal/frozen/heldout/TauGym" in runs.columns
    assert "metrics.fact_reveal/frozen/heldout/mean_false_end" in runs.columns


@pytest.mark.parametrize("env", TRAIN_ENVS)
def test_heldout_probes_are_the_evaluation_tasks_and_at_least_16(env) -> None:
    """Held-out probes ask about the tasks agents are evaluated on (never a training, probe or
    grounding task), and every env keeps >= 16 of them at the defaults."""
    from mimesis.envs import make
    from mimesis.envs.registry import task_indices
    from mimesis.eval.agents.evaluate import heldout_specs

    p = FactRevealParams(envs=TRAIN_ENVS)
    held = env_probes(env, p, "heldout")
    train = env_probes(env, p, "train")
    assert len(held) >= 16 and len(train) >= 16
    assert {c.split for c in held} == {"heldout"}
    assert not {c.fact.task_id for c in held} & {c.fact.task_id for c in train}
    e = make(env)
    if e.tasks is not None:
        evaluation = {e.tasks[i].id for i in task_indices(len(e.tasks), "eval")}
        assert {c.fact.task_id for c in held} <= evaluation
    else:  # procedural: the seeds of the agents' held-out scenarios
        specs = heldout_specs([env], p.n_tasks)
        ids = set()
        for spec in specs:
            e.reset(seed=spec.seed, options=spec.options)
            ids.add(e.task.id)
        assert {c.fact.task_id for c in held} == ids


def test_false_end_counts_users_that_leave_when_asked(probes) -> None:
    """A user that answers never ends falsely; one that leaves at every question always does;
    the mean over envs carries both, with its CI."""
    from mimesis.eval.agents.fact_report import mean_over_envs

    def leaves(batch):
        return ["<think>I'm done here.</think>\n<|end_conversation|>" for _ in batch]

    rows = play(UserSimulator(_scripted(lambda g, q: "Yes.")), probes["TurtleGym"])
    assert summarize(rows)["false_end"] == 0.0
    leaving = play(UserSimulator(leaves), probes["TurtleGym"])
    s = summarize(leaving)
    assert s["false_end"] == 1.0 and s["end_reasons"] == {"end_signal": len(leaving)}
    assert s["rate"] == 0.0
    mixed = [dict(r, env="TurtleGym") for r in rows] + [dict(r, env="TauGym") for r in leaving]
    m = mean_over_envs(mixed, "ended", n_bootstrap=200)
    assert m["mean"] == pytest.approx(0.5) and m["n_envs"] == 2
    assert m["ci_low"] <= 0.5 <= m["ci_high"]


def test_params_refuse_held_out_seeds_among_the_training_streams() -> None:
    from mimesis.envs.registry import GROUNDING_SEED
    from mimesis.eval.agents.run import AgentComparisonParams
    from mimesis.stages.evaluate_agents import EvaluateAgentsParams

    with pytest.raises(ValueError, match="heldout_seed_offset must be >="):
        FactRevealParams(heldout_seed_offset=GROUNDING_SEED - 1)
    with pytest.raises(ValueError, match="splits"):
        FactRevealParams(splits=["test"])
    with pytest.raises(ValueError, match="must equal agents.seed_offset"):
        EvaluateAgentsParams(agents=AgentComparisonParams(enabled=False),
                             fact_reveal=FactRevealParams(heldout_seed_offset=GROUNDING_SEED * 50))


@pytest.mark.parametrize("profile", ["default", "smoke", "full", "claim", "gpu"])
def test_held_out_probe_seeds_collide_with_no_training_or_grounding_seed(profile) -> None:
    """Procedural envs: the held-out probes' seeds are the agents' held-out seeds and none of
    the seeds that train_agent, distill_agent, sft_agent, the difficulty ladder, the simulator's
    grounding dialogues or the training-part probes reset (each profile's params.yaml)."""
    from mimesis.envs.registry import GROUNDING_SEED
    from mimesis.params import stage_params
    from mimesis.train.grounding import GroundingParams

    fr = stage_params("evaluate_agents", profile=profile).get("fact_reveal", {})
    agents = stage_params("evaluate_agents", profile=profile).get("agents", {})
    defaults = FactRevealParams()
    n = fr.get("n_tasks", defaults.n_tasks)
    offset = fr.get("heldout_seed_offset", defaults.heldout_seed_offset)
    held = set(range(offset, offset + n))
    assert offset == agents.get("seed_offset", defaults.heldout_seed_offset)
    first = fr.get("scenario_seed", defaults.scenario_seed)
    used = {"fact_reveal train": range(first, first + n)}
    grounding = stage_params("train_user", profile=profile).get("grounding", {})
    used["grounding"] = range(GROUNDING_SEED, GROUNDING_SEED + grounding.get(
        "tasks_per_env", GroundingParams().tasks_per_env))
    for stage in ("train_agent", "distill_agent"):
        s = stage_params(stage, profile=profile)
        rounds = 1 + s.get("dynamic_sampling", {}).get("max_rounds", 0)
        used[stage] = range(s["scenario_seed"],
                            s["scenario_seed"] + s["steps"] * s["scenarios_per_step"] * rounds)
        ladder = s.get("difficulty", {})
        if ladder.get("scenario_seed") is not None:
            used[f"{stage} difficulty"] = range(ladder["scenario_seed"],
                                                ladder["scenario_seed"] + ladder["scenarios"])
    sft = stage_params("sft_agent", profile=profile)
    used["sft_agent"] = range(sft["scenario_seed"], sft["scenario_seed"]
                              + sft["scenarios_per_env"] * len(sft.get("envs", TRAIN_ENVS)))
    collisions = {name: sorted(held & set(r))[:3] for name, r in used.items() if held & set(r)}
    assert collisions == {}


def _user_results(rows, **kw):
    from mimesis.eval.agents.fact_report import user_results

    return user_results(rows, FactRevealParams(envs=["TurtleGym", "TauGym"], n_bootstrap=200,
                                               users=[{"name": "agenda", "kind": "agenda"}],
                                               **kw))


def test_report_and_metrics_carry_both_splits_false_ends_and_means(probes) -> None:
    """A user that answers TurtleGym and leaves TauGym on the training split and answers both on
    held-out tasks: the report puts held-out first, the false-end table and its reasons carry
    the leaving, the mean over envs averages the env rates, and metrics.json's shape holds
    every key a consumer reads."""
    from mimesis.eval.agents.fact_report import markdown, metrics_of

    p = FactRevealParams(envs=["TurtleGym", "TauGym"], users=[{"name": "agenda", "kind": "agenda"}],
                         splits=["train", "heldout"])  # report order is held-out first anyway
    yes = UserSimulator(_scripted(lambda g, q: "Yes."))
    leave = UserSimulator(lambda batch: ["<think>bye</think>\n<|end_conversation|>"] * len(batch))
    rows = []
    for split in ("heldout", "train"):
        rows += play(yes, env_probes("TurtleGym", p, split))
        rows += play(yes if split == "heldout" else leave, env_probes("TauGym", p, split))
    results = {"scripted": _user_results(rows, splits=["train", "heldout"])}
    assert list(results["scripted"]) == ["heldout", "train"]
    train = results["scripted"]["train"]
    assert train["TauGym"]["false_end"] == 1.0 and train["TurtleGym"]["false_end"] == 0.0
    assert train["TauGym"]["end_reasons"] == {"end_signal": train["TauGym"]["n"]}
    assert train["mean"]["false_end"]["mean"] == pytest.approx(0.5)
    assert train["mean"]["mean"] == pytest.approx(
        (train["TurtleGym"]["rate"] + train["TauGym"]["rate"]) / 2)
    assert results["scripted"]["heldout"]["mean"]["false_end"]["mean"] == 0.0
    assert results["scripted"]["heldout"]["mean"]["n"] == sum(r["split"] == "heldout"
                                                             for r in rows)

    md = markdown(results, p)
    assert md.index("## Held-out tasks") < md.index("## Training-part tasks")
    false_end = md.split("Training-part tasks (never in the grounding dialogues): false end")[1]
    n_tau = train["TauGym"]["n"]
    assert f"| TauGym | 100% [100%, 100%] ({n_tau}) |" in false_end
    assert f"False ends by end reason (train): scripted / TauGym: end_signal {n_tau}." in md
    assert "False ends by end reason (heldout): none." in md

    metrics = metrics_of(results)["scripted"]
    for split in ("heldout", "train"):
        for env in ("TurtleGym", "TauGym"):
            assert set(metrics[split][env]) == {
                "rate", "n", "n_tasks", "ci_low", "ci_high", "false_end", "false_end_ci_low",
                "false_end_ci_high", "end_reasons"}
        assert {"mean", "ci_low", "ci_high", "n", "n_envs", "false_end"} <= set(
            metrics[split]["mean"])


def test_mean_over_envs_ci_resamples_tasks_within_each_env() -> None:
    """Env a: every task revealed; env b: half its tasks. The mean is 0.75 whatever is drawn
    from a, so the CI is b's CI halved and shifted by 0.5, never reaching 1 or 0.5."""
    from mimesis.eval.agents.fact_report import mean_over_envs
    from mimesis.eval.agents.stats import bootstrap_ci

    rows = [{"env": "a", "task_id": f"a{k}", "revealed": True} for k in range(10)]
    rows += [{"env": "b", "task_id": f"b{k}", "revealed": k % 2 == 0} for k in range(10)]
    m = mean_over_envs(rows, n_bootstrap=2000, seed=1)
    assert m["mean"] == pytest.approx(0.75) and m["n"] == 20 and m["n_envs"] == 2
    lo_b, hi_b = bootstrap_ci([float(k % 2 == 0) for k in range(10)], 2000, seed=1)
    assert m["ci_low"] == pytest.approx(0.5 + lo_b / 2, abs=0.03)
    assert m["ci_high"] == pytest.approx(0.5 + hi_b / 2, abs=0.03)
    assert 0.5 < m["ci_low"] < 0.75 < m["ci_high"] < 1.0


def test_run_fact_reveal_writes_both_splits_for_a_rule_user(tmp_path) -> None:
    """The whole check with the agenda user (no model): files, rows with their split, and the
    metrics shape the stage writes to metrics.json."""
    from mimesis.eval.agents.fact_reveal import run_fact_reveal

    sim_dir = tmp_path / "freeze_user" / "simulator"
    sim_dir.mkdir(parents=True)
    (sim_dir / "meta.json").write_text('{"files": {}}')
    p = FactRevealParams(envs=["TurtleGym", "FunctionGym"], n_tasks=2, n_bootstrap=50,
                         users=[{"name": "agenda", "kind": "agenda"}])
    metrics = run_fact_reveal(tmp_path / "freeze_user", tmp_path / "out", p)
    report = json.loads((tmp_path / "out" / "fact_reveal.json").read_text())
    assert {(r["split"], r["env"]) for r in report["rows"]} == {
        (s, e) for s in ("heldout", "train") for e in p.envs}
    assert len(report["rows"]) == 2 * 2 * 2 * 2  # splits x envs x tasks x phrasings
    assert metrics["agenda"]["heldout"]["FunctionGym"]["n"] == 4
    assert metrics["agenda"]["train"]["mean"]["n"] == 8
    assert isinstance(metrics["seconds"], float)
    md = (tmp_path / "out" / "fact_reveal.md").read_text()
    assert md.count("| **mean over envs** |") == 4  # revealed and false end, both splits
