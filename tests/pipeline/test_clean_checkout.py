"""A run leaves every tracked file as it was: the summary's commit of a fresh clone has no ``+dirty``.

dvc writes two things into a checkout when a stage runs: ``dvc.lock`` (the hashes of *this*
checkout's outputs) and, for each out, a ``/<name>`` line in the ``.gitignore`` beside it. The
project tracks neither a lock nor a ``.gitignore`` that dvc would still have to extend.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import yaml

from mimesis.tracking import git_commit

ROOT = Path(__file__).resolve().parents[2]


def _tracked(*paths: str) -> set[str]:
    out = subprocess.run(["git", "ls-files", "--", *paths], cwd=ROOT, capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        pytest.skip("not a git checkout")
    return set(out.stdout.split())


def _outs() -> list[str]:
    stages = yaml.safe_load((ROOT / "dvc.yaml").read_text())["stages"]
    paths = []
    for stage in stages.values():
        for out in (stage.get("outs") or []) + (stage.get("metrics") or []):
            path, opts = (out, {}) if isinstance(out, str) else next(iter(out.items()))
            if opts.get("cache", True):  # cache: false outs are not git-ignored by dvc
                paths.append(path)
    return paths


def test_the_project_tracks_no_dvc_lock_a_run_would_rewrite():
    assert "dvc.lock" not in _tracked("dvc.lock")


def test_every_gitignore_dvc_would_extend_already_lists_its_out():
    outs = _outs()
    assert "data/sft_agent" in outs and "data/evaluate_agents/agents.md" in outs
    for out in outs:
        path = Path(out)
        ignore = (path.parent / ".gitignore").as_posix()
        if ignore in _tracked(ignore):
            lines = (ROOT / ignore).read_text().split()
            assert f"/{path.name}" in lines, f"{ignore} lacks /{path.name}: dvc adds it on a run"


def test_untracked_outputs_do_not_mark_the_commit_dirty(tmp_path):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(git + ["init", "-q"], cwd=tmp_path, check=True)
    (tmp_path / "dvc.yaml").write_text("stages: {}\n")
    subprocess.run(git + ["add", "dvc.yaml"], cwd=tmp_path, check=True)
    subprocess.run(git + ["commit", "-qm", "init"], cwd=tmp_path, check=True)
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\n")  # what a run writes
    assert not git_commit(tmp_path).endswith("+dirty")
    (tmp_path / "dvc.yaml").write_text("stages: {a: {}}\n")
    assert git_commit(tmp_path).endswith("+dirty")
