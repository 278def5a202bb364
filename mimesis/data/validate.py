"""Great Expectations suite over the curated conversations (one dataframe row per conversation).

``great_expectations`` takes 6–7 s to import, so it is imported inside :func:`validate_frame` only.
Flow (GX 1.24): ephemeral context → pandas datasource → dataframe asset → whole-dataframe batch
definition → suite → validation definition → ``run(batch_parameters={"dataframe": df})``.
"""

from __future__ import annotations

from dataclasses import dataclass

import pandas as pd

from mimesis.data.split import SPLITS
from mimesis.schemas import Conversation

COLUMNS = [
    "id",
    "split",
    "source_ids",
    "n_turns",
    "roles",
    "first_role",
    "min_turn_chars",
    "max_turn_chars",
    "conversation_chars",
    "language",
    "splits_of_id",
    "shared_source_ids",
    "split_fraction_error",
]
_VALID_ROLES = r"^(?:user|assistant)(?:,(?:user|assistant))*$"
_ALTERNATING = r"^user(?:,assistant,user)*,assistant$"  # user first, alternating, agent last


class CurateValidationError(RuntimeError):
    """The curated data failed its expectation suite; the message lists each failure."""


@dataclass(frozen=True)
class Limits:
    """What the suite checks against (character counts; fractions of conversations)."""

    max_turns: int
    max_turn_chars: int
    max_conversation_chars: int
    val_fraction: float
    test_fraction: float


def conversation_frame(convs: list[Conversation], limits: Limits) -> pd.DataFrame:
    """One row per conversation with the columns the suite checks (``COLUMNS``)."""
    rows = [
        {
            "id": c.id,
            "split": c.split,
            "source_ids": ",".join(c.source_ids),
            "n_turns": len(c.turns),
            "roles": ",".join(t.role for t in c.turns),
            "first_role": c.turns[0].role if c.turns else None,
            "min_turn_chars": min((len(t.text.strip()) for t in c.turns), default=0),
            "max_turn_chars": max((len(t.text) for t in c.turns), default=0),
            "conversation_chars": sum(len(t.text) for t in c.turns),
            "language": c.language,
        }
        for c in convs
    ]
    df = pd.DataFrame(rows, columns=COLUMNS[:10])
    df["splits_of_id"] = df.groupby("id")["split"].transform("nunique").astype(int)
    source_count = pd.Series([s for c in convs for s in c.source_ids]).value_counts()
    df["shared_source_ids"] = [sum(int(source_count[s] > 1) for s in c.source_ids) for c in convs]
    target = {
        "train": 1 - limits.val_fraction - limits.test_fraction,
        "val": limits.val_fraction,
        "test": limits.test_fraction,
    }
    share = df["split"].value_counts(normalize=True)
    df["split_fraction_error"] = [abs(share.get(s, 0.0) - target.get(s, 0.0)) for s in df["split"]]
    return df


def fraction_tolerance(n: int) -> float:
    """Allowed |split share − target|: 0.02 plus one conversation's share (rounding, min 1)."""
    return 0.02 + 1.0 / max(n, 1)


def _expectations(limits: Limits, n: int) -> list:
    import great_expectations.expectations as gxe

    return [
        gxe.ExpectTableColumnsToMatchSet(column_set=COLUMNS, exact_match=True),
        gxe.ExpectTableRowCountToBeBetween(min_value=3),
        gxe.ExpectColumnValuesToNotBeNull(column="id"),
        gxe.ExpectColumnValuesToBeUnique(column="id"),
        gxe.ExpectColumnValuesToBeInSet(column="split", value_set=list(SPLITS)),
        gxe.ExpectColumnDistinctValuesToEqualSet(column="split", value_set=list(SPLITS)),
        gxe.ExpectColumnValuesToBeInSet(column="splits_of_id", value_set=[1]),
        gxe.ExpectColumnValuesToBeInSet(column="shared_source_ids", value_set=[0]),
        gxe.ExpectColumnValuesToMatchRegex(column="roles", regex=_VALID_ROLES),
        gxe.ExpectColumnValuesToBeInSet(column="first_role", value_set=["user"]),
        gxe.ExpectColumnValuesToMatchRegex(column="roles", regex=_ALTERNATING),
        gxe.ExpectColumnValuesToBeBetween(
            column="n_turns", min_value=2, max_value=limits.max_turns
        ),
        gxe.ExpectColumnValuesToBeBetween(column="min_turn_chars", min_value=1),
        gxe.ExpectColumnValuesToBeBetween(
            column="max_turn_chars", min_value=1, max_value=limits.max_turn_chars
        ),
        gxe.ExpectColumnValuesToBeBetween(
            column="conversation_chars", min_value=1, max_value=limits.max_conversation_chars
        ),
        gxe.ExpectColumnValuesToBeBetween(
            column="split_fraction_error", min_value=0, max_value=fraction_tolerance(n)
        ),
    ]


def validate_frame(df: pd.DataFrame, limits: Limits) -> dict:
    """Run the curate suite on ``df`` (from :func:`conversation_frame`).

    Returns:
        The GX validation result as a JSON-ready dict (``success``, ``statistics``, ``results``).
    """
    import great_expectations as gx
    from great_expectations.data_context.types.base import ProgressBarsConfig

    context = gx.get_context(mode="ephemeral")
    context.variables.progress_bars = ProgressBarsConfig(globally=False)
    asset = context.data_sources.add_pandas("curate").add_dataframe_asset("conversations")
    batch = asset.add_batch_definition_whole_dataframe("all_conversations")
    suite = context.suites.add(gx.ExpectationSuite(name="curate_conversations"))
    for expectation in _expectations(limits, len(df)):
        suite.add_expectation(expectation)
    definition = context.validation_definitions.add(
        gx.ValidationDefinition(name="curate", data=batch, suite=suite)
    )
    result = definition.run(batch_parameters={"dataframe": df}, result_format="SUMMARY")
    return result.to_json_dict()


def failures(report: dict) -> list[str]:
    """One readable line per failed expectation in a :func:`validate_frame` report."""
    lines = []
    for r in report.get("results", []):
        if r.get("success"):
            continue
        cfg = r.get("expectation_config", {})
        kwargs = {k: v for k, v in cfg.get("kwargs", {}).items() if k != "batch_id"}
        res = r.get("result", {})
        parts = [f"{cfg.get('type')} {kwargs}"]
        if res.get("observed_value") is not None:
            parts.append(f"observed {res['observed_value']!r}")
        if res.get("unexpected_count"):
            parts.append(
                f"{res['unexpected_count']} unexpected rows, e.g. "
                f"{res.get('partial_unexpected_list', [])[:5]!r}"
            )
        if res.get("partial_missing_list"):
            parts.append(f"missing {res['partial_missing_list']!r}")
        error = (r.get("exception_info") or {}).get("exception_message")
        if error:
            parts.append(f"error {error}")
        lines.append("; ".join(parts))
    return lines


def raise_on_failure(report: dict) -> None:
    """Raise :class:`CurateValidationError` listing every failed expectation, if any."""
    lines = failures(report)
    if lines or not report.get("success", False):
        raise CurateValidationError(
            "curate output failed its expectation suite:\n  - "
            + "\n  - ".join(lines or ["suite did not succeed"])
        )
