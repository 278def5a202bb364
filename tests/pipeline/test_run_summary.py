"""The run summary (``data/report/summary.md``): what the pipeline writes after a run and what
``mimesis report`` rewrites from data/, on a fake data/ tree (no stage runs)."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from pathlib import Path

import pytest
from typer.testing import CliRunner

from mimesis.pipeline import StageResult
from mimesis.run_summary import (
    NOT_RUN,
    build_summary,
    load_run,
    record_run,
    run_command,
    write_summary,
)

RESULTS = [
    StageResult("curate", True, 63.2, "deps changed"),
    StageResult("label", False, 0.0, "up to date"),
    StageResult("evaluate_agents", True, 601.5, "forced"),
]
REALISM = """# Simulator realism (offline estimators, docs/metrics.md)

| row | Turing dist. [95% CI] ↓ |
|---|---|
| trained simulator | REALISM-TRAINED-ROW |

- trained vs prompted: REALISM-VERDICT

## Per behaviour (positions whose real turn carries it)

| behaviour | REALISM-SLICE-ROW |
"""
AGENTS = """**Smoke test of the agent machinery**: AGENTS-NOTE.

## Smoke run: the claim's comparisons

| comparison | CLAIM-ROW |

### Mechanism: does the agent ask, and what does the user reveal?

| agent | MECHANISM-ROW |

## Mean reward over environments (unweighted), by agent and user

| agent | MEAN-REWARD-ROW |

## Per environment

| agent | env | PER-ENV-ROW |

## Paired differences between agents (same scenarios, same user seeds)

| grpo − sft | PAIRED-ROW |

### Per environment

| grpo − sft | TravelGym | PER-ENV-DIFF-ROW |
"""
FACT_REVEAL = """# Fact reveal: does the user state its hidden fact when asked?

FACT-LEAD

## Held-out tasks (the tasks agents are evaluated on): revealed

| env | frozen |
|---|---|
| TravelGym | FACT-ROW |
| **mean over envs** | FACT-MEAN-ROW |

## Held-out tasks (the tasks agents are evaluated on): false end

| TravelGym | FALSE-END-ROW |

False ends by end reason (heldout): FALSE-END-REASONS.

## Training-part tasks (never in the grounding dialogues): revealed

| TravelGym | FACT-TRAIN-ROW |

## Examples

- FACT-EXAMPLE
"""
PLOTS = ("evaluate_user/plots/lengths.png", "evaluate_agents/plots/agents.png")


def _fake_data(root: Path) -> Path:
    """A project root whose data/ holds the files the summary reads."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "dvc.yaml").write_text("stages: {}\n")
    for rel, text in (
        ("evaluate_user/table.md", REALISM),
        ("evaluate_agents/agents.md", AGENTS),
        ("evaluate_agents/fact_reveal.md", FACT_REVEAL),
    ):
        (root / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "data" / rel).write_text(text)
    for rel in PLOTS:
        (root / "data" / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / "data" / rel).write_bytes(b"\x89PNG")
    return root


def test_the_header_names_date_commit_profile_command_and_every_stage(tmp_path: Path) -> None:
    """Bug: a summary that drops the run's identity or a stage's time (or calls an up-to-date
    stage 'ran')."""
    root = _fake_data(tmp_path)
    record_run(
        root, RESULTS, "smoke", run_command("smoke"), now=datetime(2026, 12, 3, 14, 5, tzinfo=UTC)
    )
    text = write_summary(root).read_text()  # no run given: the recorded one is read back
    assert "- date: 2026-12-03T14:05Z" in text
    assert "- commit: unknown" in text  # tmp_path is not a git checkout
    assert "- profile: smoke" in text and "- command: `mimesis run --profile smoke`" in text
    assert "| curate | ran | 63.2 |" in text
    assert "| label | up to date | 0.0 |" in text
    assert "| evaluate_agents | ran | 601.5 |" in text
    assert load_run(root).stages == tuple(RESULTS)


def test_realism_agents_and_fact_reveal_heads_are_embedded_with_links(tmp_path: Path) -> None:
    """Bug: a report part missing, its details (slices, examples) copied in, its headings
    clashing with the summary's own, or no link to the full file."""
    text = build_summary(_fake_data(tmp_path), None)
    for marker in (
        "REALISM-TRAINED-ROW",
        "REALISM-VERDICT",
        "AGENTS-NOTE",
        "CLAIM-ROW",
        "MECHANISM-ROW",
        "MEAN-REWARD-ROW",
        "PAIRED-ROW",
        "FACT-LEAD",
        "FACT-ROW",
        "FACT-MEAN-ROW",
        "FALSE-END-ROW",
        "FALSE-END-REASONS",
        "FACT-TRAIN-ROW",
    ):
        assert marker in text, marker
    for detail in ("REALISM-SLICE-ROW", "FACT-EXAMPLE", "# Simulator realism", "# Fact reveal:"):
        assert detail not in text, detail
    assert "### Smoke run: the claim's comparisons" in text  # one level below "## Agents"
    assert "#### Mechanism" in text
    assert "### Held-out tasks (the tasks agents are evaluated on): revealed" in text
    assert text.index("FACT-ROW") < text.index("FACT-TRAIN-ROW")  # held-out first
    assert "Full: [data/evaluate_user/table.md](../evaluate_user/table.md)" in text
    assert "Full: [data/evaluate_agents/agents.md](../evaluate_agents/agents.md)" in text
    assert "Full: [data/evaluate_agents/fact_reveal.md](../evaluate_agents/fact_reveal.md)" in text


def test_the_per_environment_sections_of_the_agents_report_are_left_out(tmp_path: Path) -> None:
    """Bug: the per-environment tables (both levels) swamping the summary, or the section
    after a skipped one (the paired differences) lost with it."""
    text = build_summary(_fake_data(tmp_path), None)
    assert "PER-ENV-ROW" not in text and "PER-ENV-DIFF-ROW" not in text
    assert "### Paired differences between agents" in text and "PAIRED-ROW" in text


def test_plot_links_resolve_from_the_summary(tmp_path: Path) -> None:
    """Bug: plot links relative to the project root, which break where summary.md is read."""
    root = _fake_data(tmp_path)
    path = write_summary(root)
    links = re.findall(r"\]\(([^)]+\.png)\)", path.read_text())
    assert sorted(links) == sorted(f"../{p}" for p in PLOTS)
    assert all((path.parent / link).resolve().is_file() for link in links)


def test_missing_parts_say_not_run(tmp_path: Path) -> None:
    """Bug: a summary that crashes (or stays silent) when a stage never ran, e.g. after
    `mimesis run --stages curate` or in a profile that scores no realism."""
    text = write_summary(tmp_path).read_text()
    assert f"Pipeline run: {NOT_RUN}" in text and f"Stage times: {NOT_RUN}." in text
    for rel in (
        "data/evaluate_user/table.md",
        "data/evaluate_agents/agents.md",
        "data/evaluate_agents/fact_reveal.md",
        "data/*/plots/*.png",
    ):
        assert f"{NOT_RUN} (no {rel})" in text, rel


def test_report_rewrites_the_summary_from_data_and_runs_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Bug: `mimesis report` running or checking a stage, or forgetting the recorded run."""
    import mimesis.cli
    import mimesis.pipeline
    from mimesis.cli import app

    def refuse(*args, **kwargs):
        raise AssertionError("mimesis report must not run or check a stage")

    for module in (mimesis.cli, mimesis.pipeline):
        monkeypatch.setattr(module, "run_stage", refuse)
        monkeypatch.setattr(module, "stale_reason", refuse)
    root = _fake_data(tmp_path)
    record_run(root, RESULTS, "default", run_command("default"))
    summary = root / "data" / "report" / "summary.md"
    assert not summary.exists()
    result = CliRunner().invoke(app, ["report", "--root", str(root)])
    assert result.exit_code == 0, result.output
    text = summary.read_text()
    assert "- profile: default" in text and "| curate | ran | 63.2 |" in text
    assert "PAIRED-ROW" in text


def test_a_corrupt_run_record_is_a_clear_error(tmp_path: Path) -> None:
    """Bug: a half-written run.json turning into a traceback instead of a way out."""
    from mimesis.cli import app

    root = _fake_data(tmp_path)
    (root / "data" / "report").mkdir(parents=True)
    (root / "data" / "report" / "run.json").write_text("{")
    with pytest.raises(ValueError, match="not a run record"):
        load_run(root)
    result = CliRunner().invoke(app, ["report", "--root", str(root)])
    assert result.exit_code == 2 and "not a run record" in result.output


def test_the_flow_writes_the_summary_and_logs_it_to_its_parent_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, empty_mlflow_store
) -> None:
    """Bug: `mimesis run` ending without a summary, or the summary missing from the MLflow
    parent run the stages are nested under."""
    import mlflow

    from flows import pipeline as flow_module

    root = _fake_data(tmp_path / "project")
    monkeypatch.chdir(tmp_path)  # MLflow's artifact store lands here, not in the checkout
    monkeypatch.setenv("MLFLOW_TRACKING_URI", empty_mlflow_store(tmp_path / "mlflow.db"))
    for r in RESULTS:
        monkeypatch.setitem(flow_module.TASKS, r.name, lambda root, force, r=r: r)
    stages = [r.name for r in RESULTS]
    flow_module.pipeline.fn(root=str(root), profile="smoke", stages=stages)

    text = (root / "data" / "report" / "summary.md").read_text()
    assert "- command: `mimesis run --profile smoke --stages curate,label,evaluate_agents`" in text
    assert "| evaluate_agents | ran | 601.5 |" in text
    mlflow.set_tracking_uri(f"sqlite:///{tmp_path / 'mlflow.db'}")
    parent = mlflow.search_runs(
        experiment_names=["mimesis"], filter_string="tags.`mimesis.kind` = 'pipeline'"
    ).iloc[0]
    artifacts = mlflow.MlflowClient().list_artifacts(parent["run_id"], "report")
    assert [a.path for a in artifacts] == ["report/summary.md"]
