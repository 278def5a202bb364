"""The label stage: preparation, label combination with sources, and run() end to end."""

from __future__ import annotations

import json
import zlib
from collections.abc import Sequence
from pathlib import Path

import mlflow
import numpy as np
import pytest

from mimesis.behaviors.annotator import Annotator, AnnotatorParams
from mimesis.behaviors.fallbacks import FALLBACK
from mimesis.behaviors.gold import load_gold
from mimesis.behaviors.labeling import LabelReject, combine, prepare, scenario_traits
from mimesis.behaviors.learned import PRODUCER as LEARNED
from mimesis.behaviors.learned import LearnedParams
from mimesis.behaviors.rules import RuleResult
from mimesis.io import read_jsonl, write_jsonl
from mimesis.schemas import Conversation, LabeledConversation, Turn, TurnLabel
from mimesis.stages import label as stage

PRODUCER = "annotator:hf:scripted"


def conv(cid: str, *texts: str, split: str | None = None) -> Conversation:
    turns = [Turn(role="user" if i % 2 == 0 else "assistant", text=t) for i, t in enumerate(texts)]
    return Conversation(id=cid, turns=turns, split=split, language="en")


CONVERSATIONS = [
    ("plan a trip to Rome for my parents", "Day 1: Colosseum by taxi...",
     "oh and it must be vegan friendly too", "Here are vegan options...", "thanks!",
     "You're welcome!"),
    ("fix my python script that crashes on start", "Could you share the error message?",
     "whatever, just fix it", "Add a try/except around main().", "still not working??",
     "Please share the traceback."),
    ("what is a monad", "A monad is a design pattern...", "explain it simpler",
     "Think of a box...", "and with an example in haskell", "Sure: Maybe...", "ok",
     "Anything else?", "no, bye", "Goodbye!", "wait one more thing", "Yes?"),
    ("write a haiku about rain", "Soft rain on the roof..."),
]


# --- unit pieces -----------------------------------------------------------------------------
def test_union_keeps_every_producer_of_every_label():
    rule = RuleResult(behaviors=["B2", "B9"], traits=["terse"])
    behaviors, traits, sources = combine(rule, ["B9", "B13"], PRODUCER, "union")
    assert behaviors == ["B2", "B9", "B13"] and traits == ["terse"]
    assert sources == {"B2": ["rules"], "B9": ["rules", PRODUCER], "B13": [PRODUCER],
                       "terse": ["rules"]}
    assert combine(rule, ["B13"], PRODUCER, "rules")[0] == ["B2", "B9"]
    assert combine(rule, ["B13"], PRODUCER, "annotator")[0] == ["B13"]
    assert combine(rule, None, PRODUCER, "union")[2]["B2"] == ["rules"]
    with pytest.raises(ValueError):
        combine(rule, None, PRODUCER, "vote")


def test_mixed_takes_behaviours_from_the_learned_labeller_and_annotator_traits_per_dev_choice():
    rule = RuleResult(behaviors=["B2"], traits=["terse", "thanks_and_leave"])
    learned = {"B7", "typo_rich"}
    behaviors, traits, sources = combine(rule, ["B9"], PRODUCER, "mixed", learned)
    assert behaviors == ["B7", "B9"]  # the learned B7 and the annotator's B9, not the rules' B2
    assert traits == ["typo_rich", "thanks_and_leave"]  # not the rules' terse
    assert sources == {"B7": ["learned:minilm-logreg"], "B9": [PRODUCER],
                       "typo_rich": ["learned:minilm-logreg"], "thanks_and_leave": ["rules"]}
    assert combine(rule, None, PRODUCER, "mixed", {"B2"})[2]["B2"] == ["learned:minilm-logreg"]
    with pytest.raises(ValueError, match="learned"):
        combine(rule, ["B9"], PRODUCER, "mixed", None)
    # A trait chosen for the rules (on the dev part) comes from the rules, with that source.
    rule = RuleResult(behaviors=[], traits=["pasted_content"])
    _, traits, sources = combine(rule, None, PRODUCER, "mixed", {"typo_rich"},
                                 rule_traits=("pasted_content",))
    assert traits == ["typo_rich", "pasted_content"]
    assert sources == {"typo_rich": [LEARNED], "pasted_content": ["rules"]}
    assert combine(rule, None, PRODUCER, "mixed", {"pasted_content"},
                   rule_traits=("pasted_content",))[1] == ["pasted_content"]
    assert combine(RuleResult(), None, PRODUCER, "mixed", {"pasted_content"},
                   rule_traits=("pasted_content",))[1] == []


def test_mixed_takes_a_chosen_behaviour_from_the_rules_and_only_from_them():
    rule = RuleResult(behaviors=["B12", "B2"], traits=[])
    behaviors, _, sources = combine(rule, None, PRODUCER, "mixed", {"B2"},
                                    rule_behaviors=("B12",))
    assert behaviors == ["B2", "B12"] and sources == {"B2": [LEARNED], "B12": ["rules"]}
    # the learned labeller's B12 is dropped when B12 comes from the rules and they say no
    assert combine(RuleResult(), None, PRODUCER, "mixed", {"B12", "B2"},
                   rule_behaviors=("B12",))[0] == ["B2"]
    assert combine(rule, None, PRODUCER, "mixed", {"B2"})[0] == ["B2"]  # nothing chosen


def test_prepare_cuts_to_max_user_turns_and_marks_not_ended():
    long = conv("a", *CONVERSATIONS[2])
    cut = prepare(long, max_user_turns=2)
    assert len(cut.conv.turns) == 4 and cut.conv.turns[-1].role == "assistant"
    assert not cut.ended and sorted(cut.rules) == [0, 2]
    assert prepare(long, max_user_turns=0).ended
    assert prepare(conv("b", *CONVERSATIONS[3]), max_user_turns=2).ended


@pytest.mark.parametrize(("turns", "reason"), [
    ([Turn(role="assistant", text="Hello"), Turn(role="user", text="hi")], "assistant_first"),
    ([Turn(role="user", text="a"), Turn(role="user", text="b")], "roles_not_alternating"),
])
def test_prepare_rejects_bad_turn_order(turns, reason):
    with pytest.raises(LabelReject) as info:
        prepare(Conversation(id="x", turns=turns), 4)
    assert info.value.reason == reason


def test_scenario_traits_need_a_share_for_habits_only():
    def lab(*traits: str) -> TurnLabel:
        return TurnLabel(turn_index=0, traits=list(traits), reasoning="", reasoning_annotator="none")

    labels = [lab("terse", "thanks_and_leave"), lab(), lab("typo_rich"), lab("typo_rich")]
    assert scenario_traits(labels, 0.5) == ["typo_rich", "thanks_and_leave"]


# --- run() end to end --------------------------------------------------------------------------
class CopyingBackend:
    """Answers like a weak local model: copies the first message as the goal, echoes behaviour
    ids, writes a usable reasoning for some turns and nothing for others."""

    supports_prefill = True
    name = "hf:scripted"

    def complete(self, batch: Sequence[list[dict]], prefills: Sequence[str], max_new_tokens: int,
                 desc: str) -> list[str]:
        kind = desc.split()[-1]
        outs = []
        for messages, prefill in zip(batch, prefills):
            prompt = messages[-1]["content"]
            if kind == "goal":  # copy the first quoted message verbatim
                outs.append(prefill + " " + prompt.split('"')[1])
            elif kind == "behaviors":
                outs.append("B13, B42")
            elif kind == "reasoning" and "trip" in prompt:
                outs.append(prefill + " a relaxed trip for my parents.")
            else:
                outs.append("")
        return outs


@pytest.fixture
def curate_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "curate"
    rows = {"train": [conv(f"tr{i}", *c, split="train") for i, c in enumerate(CONVERSATIONS)],
            "val": [conv("va0", *CONVERSATIONS[0], split="val"),
                    conv("va1", "Hello?", split="val").model_copy(update={"turns": [
                        Turn(role="assistant", text="Hi!"), Turn(role="user", text="hey")]})],
            "test": [conv(f"te{i}", *c, split="test") for i, c in enumerate(CONVERSATIONS[:3])]}
    for split, convs in rows.items():
        write_jsonl(folder / f"{split}.jsonl", convs)
    with (folder / "test.jsonl").open("a") as f:  # a broken record and a duplicate id
        f.write(json.dumps({"id": "broken", "turns": [{"role": "bot", "text": "x"}]}) + "\n")
        f.write(json.dumps(conv("tr0", "again", "yes", split="test").model_dump()) + "\n")
    return folder


def hash_embed(texts: Sequence[str]) -> np.ndarray:
    """Offline stand-in for MiniLM: a unit vector per text, seeded by its CRC32."""
    rows = [np.random.default_rng(zlib.crc32(t.encode())).normal(size=16) for t in texts]
    return np.array([r / np.linalg.norm(r) for r in rows]).reshape(len(texts), 16)


def run_stage(curate_dir: Path, out_dir: Path, monkeypatch, **overrides) -> Path:
    # test gets no reasoning here, so the test split shows what a non-reasoning split holds
    values = {"max_conversations": {"train": 3, "val": 0, "test": 0}, "max_user_turns": 3,
              "reasoning_splits": ["train", "val"],
              "annotator": AnnotatorParams(label_behaviors=True), "seed": 7, "combine": "union",
              "learned": LearnedParams(folds=2, inner_folds=2), "n_bootstrap": 50, **overrides}
    params = stage.LabelParams(**values)
    monkeypatch.setattr(stage, "make_annotator",
                        lambda p, seed: Annotator(CopyingBackend(), p))
    monkeypatch.setattr(stage, "make_embedder", lambda: hash_embed)
    gold = load_gold()
    monkeypatch.setattr(stage, "load_development", lambda: gold[:80])
    return stage.run(curate_dir, out_dir, params)


def test_run_end_to_end_counts_reconcile_and_every_label_has_sources(curate_dir, tmp_path,
                                                                     monkeypatch):
    out = run_stage(curate_dir, tmp_path / "label", monkeypatch)
    counts = json.loads((out / "counts.json").read_text())
    for split, c in counts["splits"].items():
        assert c["input"] == c["labelled"] + c["rejected"] + c["not_sampled"], split
    assert counts["splits"]["train"] == {**counts["splits"]["train"], "input": 4, "labelled": 3,
                                         "not_sampled": 1, "rejected": 0}
    assert counts["splits"]["test"]["rejected"] == 2
    assert counts["reject_reasons"] == {"assistant_first": 1, "invalid_record": 1,
                                        "duplicate_id": 1}
    rejects = list(read_jsonl(out / "rejects.jsonl"))
    assert {r["id"] for r in rejects} == {"va1", "broken", "tr0"}

    records = {s: list(read_jsonl(out / f"{s}.jsonl", LabeledConversation))
               for s in ("train", "val", "test")}
    for split, convs in records.items():
        for c in convs:
            first = c.turns[0].text
            assert c.scenario.goal.startswith("You ") and first.lower() not in c.scenario.goal.lower()
            assert c.scenario.annotator == FALLBACK  # the backend only ever copied
            assert len(c.labels) == len(c.user_turns()) <= 3
            for lab in c.labels:
                assert set(lab.sources) == set(lab.behaviors) | set(lab.traits)
                assert all(lab.sources.values())
                assert "B13" in lab.behaviors and PRODUCER in lab.sources["B13"]
                if split == "test":
                    assert (lab.reasoning, lab.reasoning_annotator) == ("", "none")
                else:
                    assert lab.reasoning.startswith("I ")
                    assert lab.reasoning_annotator in (PRODUCER, FALLBACK)
    trip = next(c for c in records["train"] if "trip" in c.turns[0].text)
    assert trip.labels[0].reasoning == "I want a relaxed trip for my parents."
    assert trip.labels[0].reasoning_annotator == PRODUCER
    assert "B2" in trip.labels[1].behaviors and "rules" in trip.labels[1].sources["B2"]
    assert trip.ended and trip.end_reasoning and trip.end_reasoning_annotator == FALLBACK
    cut = next(c for c in records["test"] if "monad" in c.turns[0].text)
    assert not cut.ended and len(cut.turns) == 6 and counts["splits"]["test"]["truncated"] == 1
    assert all(c.end_reasoning_annotator == "none" for c in records["test"])

    run = mlflow.search_runs(experiment_names=["mimesis"], output_format="list")[0]
    assert run.info.run_name == "label"
    assert run.data.metrics["train.labelled"] == 3
    assert "freq.train.B2" in run.data.metrics
    artifacts = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id)}
    assert {"behavior_frequency.png", "counts.json", "prompts", "quality.json"} <= artifacts
    for name in ("rules", "annotator", "union", "mixed", "learned"):  # held-out part
        assert 0 <= run.data.metrics[f"gold.test.{name}.micro_behaviors.precision"] <= 1
        assert f"gold.test.{name}.B2.recall_lo" in run.data.metrics
        assert f"gold.dev.{name}.B2.recall" not in run.data.metrics
    assert "gold.cv.learned.micro_traits.f1" in run.data.metrics
    assert "gold.cv.rules.micro_traits.f1" not in run.data.metrics
    assert run.data.metrics["gold.turns"] == 80
    assert 0 < run.data.metrics["gold.test.turns"] < 80
    assert (out / "quality.json").is_file()
    block = json.loads((out / "quality.json").read_text())["independent"]  # every run
    assert block["turns"] >= 200 and set(block["scores"]) == {"all", "random"}
    assert "micro" in block["scores"]["all"] and block["kappa"]["B2"]["n"] == block["overlap_turns"]
    assert 0 <= run.data.metrics["label_independent_micro_precision"] <= 1
    assert "label_independent_micro_recall_lo" in run.data.metrics
    assert "independent_kappa.json" in artifacts


def test_learned_mode_labels_come_from_the_learned_labeller(curate_dir, tmp_path, monkeypatch):
    out = run_stage(curate_dir, tmp_path / "label", monkeypatch, combine="learned")
    labels = [lab for c in read_jsonl(out / "train.jsonl", LabeledConversation)
              for lab in c.labels]
    assert labels and any(lab.traits for lab in labels)
    for lab in labels:
        assert set(lab.sources) == set(lab.behaviors) | set(lab.traits)
        assert all(src in ([LEARNED], ["rules"]) for src in lab.sources.values())
        assert "B13" not in lab.behaviors  # the annotator's ids are not used in this mode
        assert all(src == [LEARNED] for b, src in lab.sources.items() if b.startswith("B"))
    counts = json.loads((out / "counts.json").read_text())
    assert LEARNED in counts["producers"]["labels"]


@pytest.mark.slow  # the label stage twice (~11 s)
def test_sampling_is_deterministic_per_seed(curate_dir, tmp_path, monkeypatch):
    ids = []
    for name in ("a", "b"):
        out = run_stage(curate_dir, tmp_path / name, monkeypatch,
                        max_conversations={"train": 2, "val": 0, "test": 0})
        ids.append([c["id"] for c in read_jsonl(out / "train.jsonl")])
    assert ids[0] == ids[1] and len(ids[0]) == 2


def test_missing_split_file_is_a_clear_error(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match="curate stage"):
        run_stage(tmp_path / "nowhere", tmp_path / "out", monkeypatch)


def test_params_check_splits_and_modes():
    with pytest.raises(ValueError, match="unknown splits"):
        stage.LabelParams(reasoning_splits=["dev"])
    with pytest.raises(ValueError, match="combine"):
        stage.LabelParams(combine="vote")
    with pytest.raises(ValueError, match="target_precision"):
        LearnedParams(target_precision=0)


def test_params_yaml_builds_for_every_profile():
    from mimesis.params import PROFILES, build, stage_params

    root = Path(__file__).resolve().parents[2]
    for profile in PROFILES:
        params = build(stage.LabelParams, stage_params("label", root / "params.yaml", profile))
        assert params.max_conversations and params.annotator.backend in ("hf", "openai", "none")
