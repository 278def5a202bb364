"""The offline realism table: every user-side metric of docs/metrics.md for one simulator (or for
real users, the ceiling), overall and per behaviour slice.

Two-sample metrics (style distances, behaviour JS, C2ST) always compare turns from *different*
conversations: a simulator's turns in half h against real turns in half 1 − h (both directions,
pooled). The real-vs-real row uses the same estimator: its C2ST pools ``c2st_real_splits``
random half splits of the real conversations (one comparison each: the two directions of a
real-vs-real split are the same test), its style and JS compare the protocol's two real halves.
Every row's Turing distance carries a permutation p-value (labels permuted by conversation) and a
bootstrap CI over conversations (:func:`mimesis.eval.realism.c2st.pool_c2st`); the real row's p-value is
its first split's test, since its splits share turns (:func:`pooled_c2st`).

A simulator that ends or writes nothing where the real user spoke loses that turn: the C2ST sees
only spoken turns, so ``turn_loss_rate`` is reported beside it and folded into
``realism_index`` = (1 − distance / 50) · (1 − turn_loss_rate) (0..1; 1 = indistinguishable and
no turn lost; 0 when every turn is lost). Beside it: ``scored_rate`` (share of positions with a
spoken turn, CI over conversations, :func:`clustered_share`) and ``c2st_all``, the C2ST over
every position with the lost ones as empty turns (:func:`all_position_c2st`), whose paired row
differences are ``comparisons_all``.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np

from mimesis.behaviors.catalog import BEHAVIOR_IDS
from mimesis.eval.realism.c2st import PER_CONVERSATION, c2st, compare_pooled, pool_c2st
from mimesis.eval.realism.divergence import behavior_frequencies, behavior_js
from mimesis.eval.realism.goals import Embed, goal_candidates, goal_identifiability, opening_quality
from mimesis.eval.realism.protocol import FIRST, NEXT, EvalItem
from mimesis.eval.realism.style import style_distances
from mimesis.eval.realism.userlm import (
    first_turn_diversity,
    mean_intent_decomposition,
    role_adherence,
    termination_f1,
)

Featurize = Callable[[list[str]], np.ndarray]


@dataclass(frozen=True)
class TurnRecord:
    """A user turn written at ``item`` by a simulator or by the real user.

    Attributes:
        item: The position.
        utterance: What the agent would see ("" when the writer ended or wrote nothing).
        ended: The writer ended the conversation here.
        behaviors: Behaviours of this turn by the shared labeler (``detect_rules``).
        reasoning: The writer's private reasoning for this turn ("" for real users).
    """

    item: EvalItem
    utterance: str
    ended: bool
    behaviors: tuple[str, ...]
    reasoning: str = ""

    @property
    def spoken(self) -> bool:
        return not self.ended and bool(self.utterance.strip())


@dataclass(frozen=True)
class RealismConfig:
    """Support thresholds, C2ST and statistics settings (of
    :class:`~mimesis.eval.realism.run.RealismParams`)."""

    min_support: int = 5
    c2st_min_support: int = 12
    c2st_folds: int = 5
    c2st_c: float = 1.0
    seed: int = 0
    c2st_permutations: int = 200
    c2st_real_splits: int = 10
    n_bootstrap: int = 1000
    goal_distractors: int = 10


def _key(record: TurnRecord) -> tuple[str, int]:
    return record.item.conv_id, record.item.turn_index


def _halves(records: Sequence[TurnRecord]) -> tuple[list[TurnRecord], list[TurnRecord]]:
    spoken = [r for r in records if r.spoken]
    return [r for r in spoken if r.item.half == 0], [r for r in spoken if r.item.half == 1]


def _pairs(sim: Sequence[TurnRecord] | None, real: Sequence[TurnRecord]) -> list[tuple]:
    r0, r1 = _halves(real)
    if sim is None:
        return [(r0, r1)]
    s0, s1 = _halves(sim)
    return [(s0, r1), (s1, r0)]


def two_sample(sim: Sequence[TurnRecord] | None, real: Sequence[TurnRecord],
               featurize: Featurize, cfg: RealismConfig, permutations: bool = True) -> dict:
    """Style distances, behaviour JS and C2ST across halves; a metric is left out when a side
    has fewer turns than its support threshold.

    Args:
        sim: A simulator's records, or ``None`` for the real-vs-real row.
        real: Real records (spoken turns are used).
        featurize: ``texts -> (n, d)`` features for the C2ST discriminator.
        cfg: Thresholds.
        permutations: Run the C2ST's permutation test and bootstrap (off for slices).
    """
    pairs = _pairs(sim, real)
    sizes = [min(len(a), len(b)) for a, b in pairs]
    out: dict = {}
    if min(sizes) >= cfg.min_support:
        styles = [style_distances([r.utterance for r in a], [r.utterance for r in b])
                  for a, b in pairs]
        out["style"] = {k: float(np.mean([s[k] for s in styles])) for k in styles[0]}
        out["behavior_js"] = float(np.mean([behavior_js([r.behaviors for r in a],
                                                        [r.behaviors for r in b])
                                            for a, b in pairs]))
    if sim is None:
        pairs = random_splits(real, cfg.c2st_real_splits, cfg.seed)
        sizes = [min(len(a), len(b)) for a, b in pairs]
    if min(sizes) >= cfg.c2st_min_support:
        out["c2st"] = pooled_c2st(pairs, featurize, cfg, permutations, real_row=sim is None)
    return out


def all_position_pairs(sim: Sequence[TurnRecord],
                       real: Sequence[TurnRecord]) -> list[tuple[list[TurnRecord], list[TurnRecord]]]:
    """The C2ST halves of :func:`_pairs` with every lost position kept: where the real user spoke
    and the simulator ended or wrote nothing, the simulator's turn enters as the empty string
    (a judge tells it from a real turn at once), so the distance counts every position and not
    only the turns that survived. Source: ours (docs/metrics.md, "Turing distance over all
    positions")."""
    kept = [r if r.spoken else replace(r, utterance="", ended=False)
            for r in sim if r.spoken or not r.item.real_ended]
    s0 = [r for r in kept if r.item.half == 0]
    s1 = [r for r in kept if r.item.half == 1]
    r0, r1 = _halves(real)
    return [(s0, r1), (s1, r0)]


def all_position_c2st(sim: Sequence[TurnRecord], real: Sequence[TurnRecord],
                      featurize: Featurize, cfg: RealismConfig) -> dict:
    """Pooled C2ST of :func:`all_position_pairs` with its bootstrap CI (no permutation test:
    the spoken-turn C2ST already carries the p-value); ``{}`` below ``c2st_min_support``."""
    pairs = all_position_pairs(sim, real)
    if min(min(len(a), len(b)) for a, b in pairs) < cfg.c2st_min_support:
        return {}
    results = [c2st(featurize([r.utterance for r in a]), featurize([r.utterance for r in b]),
                    [r.item.conv_id for r in a], [r.item.conv_id for r in b],
                    n_splits=cfg.c2st_folds, seed=cfg.seed + k, c=cfg.c2st_c, n_permutations=0)
               for k, (a, b) in enumerate(pairs)]
    return pool_c2st(results, cfg.n_bootstrap, cfg.seed)


def random_splits(real: Sequence[TurnRecord], n_splits: int,
                  seed: int) -> list[tuple[list[TurnRecord], list[TurnRecord]]]:
    """``n_splits`` random halves of the real conversations (seeded), as (half A, half B) spoken
    turns: the real-vs-real comparisons of the C2ST."""
    spoken = [r for r in real if r.spoken]
    ids = sorted({r.item.conv_id for r in spoken})
    out = []
    for k in range(n_splits):
        order = ids[:]
        random.Random(f"{seed}:split{k}").shuffle(order)
        first = set(order[:len(order) // 2])
        out.append(([r for r in spoken if r.item.conv_id in first],
                    [r for r in spoken if r.item.conv_id not in first]))
    return out


def pooled_c2st(pairs: list[tuple], featurize: Featurize, cfg: RealismConfig,
                permutations: bool = True, real_row: bool = False) -> dict:
    """The C2STs of ``pairs`` pooled into one estimate (:func:`mimesis.eval.realism.c2st.pool_c2st`);
    with ``permutations`` False (slices) no p-value and no CI.

    ``real_row``: ``pairs`` are random half splits of the *same* real turns, so their accuracies
    are correlated and averaging their permutation nulls would understate the null's spread
    (an anti-conservative p). The distance and CI pool every split (many splits shrink the
    ceiling's own noise); the p-value is the permutation test of the first split alone
    (``p_value_splits`` = 1).
    """
    n_perm = cfg.c2st_permutations if permutations else 0

    def test(k: int, a, b, n: int):
        return c2st(featurize([r.utterance for r in a]), featurize([r.utterance for r in b]),
                    [r.item.conv_id for r in a], [r.item.conv_id for r in b],
                    n_splits=cfg.c2st_folds, seed=cfg.seed + k, c=cfg.c2st_c, n_permutations=n)

    if not real_row:
        results = [test(k, a, b, n_perm) for k, (a, b) in enumerate(pairs)]
        return pool_c2st(results, cfg.n_bootstrap if permutations else 0, cfg.seed)
    results = [test(k, a, b, 0) for k, (a, b) in enumerate(pairs)]
    out = pool_c2st(results, cfg.n_bootstrap if permutations else 0, cfg.seed)
    if n_perm:
        first = test(0, *pairs[0], n_perm)
        out["p_value"] = float(first.p_value)
        out["p_value_splits"] = 1.0
    return out


def single_sample(records: Sequence[TurnRecord], is_assistant_like: Callable[[str], bool],
                  min_support: int, real: bool = False) -> dict:
    """First-turn diversity, intent decomposition, termination F1, role adherence and output
    health of one writer. For real users termination F1 and role adherence are 1 by definition
    (they are the reference); ``role_rule_flag_rate`` then shows how often the rule misfires."""
    out: dict = {}
    first = [r for r in records if r.item.kind == FIRST and r.spoken]
    if len(first) >= max(2, min_support):
        out["first_turn_diversity"] = first_turn_diversity([r.utterance for r in first])
        out["intent_decomposition"] = mean_intent_decomposition(
            [r.item.scenario.goal for r in first], [r.utterance for r in first])
    spoken = [r.utterance for r in records if r.spoken]
    if real:
        out["termination_f1"], out["role_adherence"] = 1.0, 1.0
        if spoken:
            out["role_rule_flag_rate"] = 1.0 - role_adherence(spoken, is_assistant_like)
        return out
    nxt = [r for r in records if r.item.kind == NEXT]
    if nxt:
        term = termination_f1([r.ended for r in nxt], [r.item.real_ended for r in nxt])
        out["termination_f1"] = term["f1"]
        out["termination"] = {k: term[k] for k in ("f1", "precision", "recall", "false_end_rate",
                                                    "positives", "predicted", "n")}
    if spoken:
        out["role_adherence"] = role_adherence(spoken, is_assistant_like)
    out["empty_rate"] = sum(not r.ended and not r.spoken for r in records) / max(1, len(records))
    out["first_turn_end_rate"] = (sum(r.ended for r in records if r.item.kind == FIRST)
                                  / max(1, sum(r.item.kind == FIRST for r in records)))
    return out


def turn_loss_rate(records: Sequence[TurnRecord]) -> float | None:
    """Share of the positions where the real user spoke at which the writer ended or wrote
    nothing (0..1); ``None`` when no such position is in ``records``."""
    asked = [r for r in records if not r.item.real_ended]
    return sum(not r.spoken for r in asked) / len(asked) if asked else None


def clustered_share(hits: Sequence[bool], groups: Sequence[str], n_bootstrap: int = 1000,
                    seed: int = 0, confidence: float = 0.95) -> dict[str, float]:
    """A share with its percentile bootstrap CI over conversations (positions of one
    conversation are resampled together: they share a writer and a topic).

    Args:
        hits: One bool per position.
        groups: The conversation id of each position (same length).
        n_bootstrap: Resamples (0 = no CI).
        seed: Seed of the resampling.
        confidence: Level of the CI.

    Returns:
        ``rate`` (0..1; NaN for no position), ``n`` (positions), ``conversations`` and, with a
        bootstrap and ≥ 2 conversations, ``ci_low`` / ``ci_high`` (each resample: pooled hits /
        pooled positions of the drawn conversations).

    Raises:
        ValueError: ``hits`` and ``groups`` differ in length.

    Source: percentile bootstrap over clusters, Efron & Tibshirani (1993), ch. 13 and §6.9.

    >>> out = clustered_share([True, False, True, True], ["a", "a", "b", "b"], 200)
    >>> out["rate"], out["n"], out["conversations"], 0.5 <= out["ci_low"] <= out["ci_high"] <= 1
    (0.75, 4.0, 2.0, True)
    """
    if len(hits) != len(groups):
        raise ValueError(f"clustered_share: {len(hits)} hits for {len(groups)} groups")
    per: dict[str, list[float]] = {}
    for hit, group in zip(hits, groups, strict=True):
        per.setdefault(group, [0.0, 0.0])
        per[group][0] += float(hit)
        per[group][1] += 1.0
    out = {"rate": sum(map(float, hits)) / len(hits) if hits else float("nan"),
           "n": float(len(hits)), "conversations": float(len(per))}
    if n_bootstrap and len(per) >= 2:
        h, t = (np.array(v) for v in zip(*per.values(), strict=True))
        draw = np.random.default_rng(seed).integers(0, len(h), (n_bootstrap, len(h)))
        shares = h[draw].sum(axis=1) / t[draw].sum(axis=1)
        tail = 100.0 * (1.0 - confidence) / 2.0
        out["ci_low"], out["ci_high"] = (float(x) for x in np.percentile(shares,
                                                                        [tail, 100.0 - tail]))
    return out


def with_share(out: dict, key: str, share: dict[str, float]) -> None:
    """Put a :func:`clustered_share` into a metrics row as flat keys: ``<key>`` (the rate) and
    ``<key>_ci_low`` / ``<key>_ci_high`` when there is a CI."""
    out[key] = share["rate"]
    for end in ("ci_low", "ci_high"):
        if end in share:
            out[f"{key}_{end}"] = share[end]


def realism_index(distance: float | None, loss: float | None) -> float | None:
    """(1 − distance / 50) · (1 − loss), in [0, 1]: the Turing distance (points) of the spoken
    turns discounted by the turns lost; 0 when every turn is lost, ``None`` when a part is
    missing. Source: ours (docs/metrics.md, realism index)."""
    if loss is not None and loss >= 1.0:
        return 0.0
    if distance is None or loss is None:
        return None
    return max(0.0, 1.0 - distance / 50.0) * (1.0 - loss)


def adherence(records: Sequence[TurnRecord], candidates: dict[str, list[str]],
              embed: Embed | None, real: bool = False) -> dict:
    """Turn loss, reasoning rate, goal identifiability (all spoken turns of a conversation, and
    its first turn alone) and opening quality of one writer."""
    out: dict = {}
    loss = 0.0 if real else turn_loss_rate(records)
    if loss is not None:
        out["turn_loss_rate"] = loss
    if not real and records:
        out["reasoning_rate"] = sum(bool(r.reasoning.strip()) for r in records) / len(records)
    first = [r for r in records if r.item.kind == FIRST]
    if first:
        out["opening"] = opening_quality([(r.item.scenario.goal, r.utterance, r.ended)
                                          for r in first])
    if embed is not None:
        turns: dict[str, list[str]] = {}
        for r in records:
            if r.spoken:
                turns.setdefault(r.item.conv_id, []).append(r.utterance)
        out["goal"] = goal_identifiability(turns, candidates, embed)
        out["goal_first"] = goal_identifiability(
            {r.item.conv_id: [r.utterance] for r in first if r.spoken}, candidates, embed)
    return out


def row_metrics(sim: Sequence[TurnRecord] | None, real: Sequence[TurnRecord],
                featurize: Featurize, is_assistant_like: Callable[[str], bool],
                cfg: RealismConfig, embed: Embed | None = None,
                candidates: dict[str, list[str]] | None = None,
                positions: Sequence[EvalItem] | None = None) -> dict:
    """All metrics of one row (``sim`` None = real vs real), plus its turn count, its scored
    positions and ``realism_index``.

    ``positions``: every evaluation position, for the real row's scored positions (its records
    hold only the positions where the real user spoke); default: the row's own records.

    Scored positions (``scored_rate``, with ``scored_rate_ci_low`` / ``_ci_high`` by
    :func:`clustered_share`): the share of the row's positions (``n_positions``, over
    ``n_conversations``) that produced a spoken turn, the turns every other metric scores.
    """
    own = real if sim is None else sim
    out = two_sample(sim, real, featurize, cfg)
    out.update(single_sample(own, is_assistant_like, cfg.min_support, real=sim is None))
    out.update(adherence(own, candidates or {}, embed, real=sim is None))
    out["n_turns"] = float(sum(r.spoken for r in own))
    out["n_conversations"] = float(len({r.item.conv_id for r in own}))
    if sim is None and positions is not None:
        spoken = {_key(r) for r in real if r.spoken}
        hits = [(it.conv_id, it.turn_index) in spoken for it in positions]
        groups = [it.conv_id for it in positions]
    else:
        hits, groups = [r.spoken for r in own], [r.item.conv_id for r in own]
    scored = clustered_share(hits, groups, cfg.n_bootstrap, cfg.seed)
    out["n_positions"] = scored["n"]
    with_share(out, "scored_rate", scored)
    if sim is not None:
        everything = all_position_c2st(sim, real, featurize, cfg)
        if everything:
            out["c2st_all"] = everything
    index = realism_index(out.get("c2st", {}).get("distance"), out.get("turn_loss_rate"))
    if index is not None:
        out["realism_index"] = index
    return out


def slice_metrics(rows: dict[str, Sequence[TurnRecord] | None], real: Sequence[TurnRecord],
                  featurize: Featurize, is_assistant_like: Callable[[str], bool],
                  cfg: RealismConfig) -> dict:
    """Per behaviour B1..B13 seen in the real labels: support counts, then per row the two-sample
    metrics and role adherence restricted to positions whose *real* turn carries the behaviour,
    and ``behavior_recall`` — the share of those positions at which the writer's turn shows the
    behaviour too (by the shared labeler). Termination is not sliced: an end position has no real
    turn, hence no label; first-turn metrics are not sliced (a few first turns per behaviour)."""
    out: dict = {}
    for b in BEHAVIOR_IDS:
        keep = {_key(r) for r in real if b in r.item.real_labels}
        if not keep:
            continue
        real_b = [r for r in real if _key(r) in keep]
        h0, h1 = _halves(real_b)
        entry: dict = {"support": {"turns": float(len(real_b)), "half0": float(len(h0)),
                                   "half1": float(len(h1)),
                                   "conversations": float(len({r.item.conv_id for r in real_b}))}}
        for name, records in rows.items():
            sub = None if records is None else [r for r in records if _key(r) in keep]
            own = real_b if sub is None else sub
            metrics = two_sample(sub, real_b, featurize, cfg, permutations=False)
            if sub is not None and any(r.spoken for r in sub):
                metrics["role_adherence"] = role_adherence([r.utterance for r in sub if r.spoken],
                                                           is_assistant_like)
            metrics["behavior_recall"] = sum(b in r.behaviors for r in own) / len(own)
            entry[name] = metrics
        out[b] = entry
    return out


def behavior_table(rows: dict[str, Sequence[TurnRecord]]) -> dict[str, dict[str, float]]:
    """Per writer, the share of spoken turns carrying each behaviour (for the bar plot)."""
    return {name: behavior_frequencies([r.behaviors for r in recs if r.spoken] or [()])
            for name, recs in rows.items()}


def evaluate_rows(simulated: dict[str, Sequence[TurnRecord]], real: Sequence[TurnRecord],
                  featurize: Featurize, is_assistant_like: Callable[[str], bool],
                  cfg: RealismConfig, embed: Embed | None = None) -> dict:
    """The whole realism result: one row per simulator, the ``real`` (real vs real) row, the
    per-behaviour ``slices`` and the ``behavior_frequencies`` behind the bar plot.

    Args:
        simulated: Row name -> the simulator's records (one per evaluation position).
        real: The real users' records.
        featurize: ``texts -> (n, d)`` C2ST features.
        is_assistant_like: The role rule.
        cfg: Settings.
        embed: ``texts -> (n, d)`` unit-norm sentence embeddings for goal identifiability
            (``None``: left out).
    """
    goals = {r.item.conv_id: r.item.scenario.goal
             for recs in [real, *simulated.values()] for r in recs}
    candidates = goal_candidates(goals, cfg.goal_distractors, cfg.seed)
    out: dict = {name: row_metrics(recs, real, featurize, is_assistant_like, cfg, embed,
                                   candidates) for name, recs in simulated.items()}
    # every simulator row holds one record per position: the positions the real row is out of
    positions = [r.item for r in next(iter(simulated.values()))] if simulated else None
    out["real"] = row_metrics(None, real, featurize, is_assistant_like, cfg, embed, candidates,
                              positions)
    out["slices"] = slice_metrics({**simulated, "real": None}, real, featurize,
                                  is_assistant_like, cfg)
    out["behavior_frequencies"] = behavior_table({"real": real, **simulated})
    out["comparisons"] = row_comparisons(out, list(simulated), cfg)
    out["comparisons_all"] = row_comparisons(out, list(simulated), cfg, key="c2st_all")
    return _drop_counts(out)


def _drop_counts(tree):
    """``tree`` without the per-conversation counts the comparisons needed (not outputs)."""
    if isinstance(tree, dict):
        return {k: _drop_counts(v) for k, v in tree.items() if k != PER_CONVERSATION}
    return tree


def row_comparisons(metrics: dict, rows: Sequence[str], cfg: RealismConfig,
                    key: str = "c2st") -> dict:
    """Paired Turing-distance differences of every pair of simulator rows (same positions,
    :func:`mimesis.eval.realism.c2st.compare_pooled`), keyed ``"a-vs-b"``; ``key``: ``c2st``
    (spoken turns) or ``c2st_all`` (every position, :func:`all_position_pairs`)."""
    out = {}
    for i, a in enumerate(rows):
        for b in rows[i + 1:]:
            got = compare_pooled(metrics[a].get(key, {}), metrics[b].get(key, {}),
                                 cfg.n_bootstrap, cfg.seed)
            if got:
                out[f"{a}-vs-{b}"] = got
    return out
