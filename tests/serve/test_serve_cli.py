"""The command-line side of ``mimesis serve``'s clients: a missing API key is named as such."""

from __future__ import annotations

from typer.testing import CliRunner

from mimesis.cli import app


def test_an_unset_api_key_variable_is_named_not_reported_as_unreachable(tmp_path) -> None:
    result = CliRunner().invoke(app, [
        "evaluate-simulator", "--endpoint", "http://127.0.0.1:8000/sim/v1", "--model", "sim",
        "--api-key-env", "MIMESIS_TEST_UNSET_KEY", "--out", str(tmp_path / "out")],
        env={"COLUMNS": "200", "MIMESIS_TEST_UNSET_KEY": None})
    assert result.exit_code == 2
    assert "MIMESIS_TEST_UNSET_KEY" in result.output and "is unset" in result.output
    assert "cannot reach the simulator" not in result.output
    assert not (tmp_path / "out").exists()
