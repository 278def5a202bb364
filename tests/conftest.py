"""Shared test settings: MLflow never writes into the checkout; offline env from the package."""

from __future__ import annotations

from pathlib import Path

import pytest

import mimesis  # noqa: F401  (sets the offline environment)

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DIR = REPO_ROOT.parent / "shared"


@pytest.fixture(autouse=True)
def _isolated_mlflow(tmp_path_factory, monkeypatch):
    db = tmp_path_factory.getbasetemp() / "mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", f"sqlite:///{db}")
    monkeypatch.delenv("MIMESIS_PARENT_RUN_ID", raising=False)
    yield


@pytest.fixture
def shared_dir() -> Path:
    """``../shared`` (design notes and test data); skips when this checkout has none."""
    if not SHARED_DIR.is_dir():
        pytest.skip("../shared is absent")
    return SHARED_DIR
