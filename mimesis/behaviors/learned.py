"""A learned behaviour and trait labeller that runs on CPU: MiniLM sentence embeddings of a user
turn and its context, plus the rule hits and surface features, into one calibrated logistic
regression per label; each abstains below a threshold chosen on validation folds, precision first.

Source: ours. Embeddings: all-MiniLM-L6-v2 (``mimesis.eval.embeddings``); calibration: Platt
scaling (``CalibratedClassifierCV(method="sigmoid")``, Platt 1999); thresholds from out-of-fold
probabilities of grouped cross-validation, so no turn (nor its conversation) scores a model that
was fitted on it.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd
from sklearn.calibration import CalibratedClassifierCV
from sklearn.compose import ColumnTransformer
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import GroupKFold, StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from mimesis.behaviors.catalog import BEHAVIOR_IDS, TRAIT_IDS
from mimesis.behaviors.lexicon import own_words, words
from mimesis.behaviors.rules import RuleResult
from mimesis.behaviors.traits import is_pasted, is_terse, is_thanks_and_leave, is_typo_rich

PRODUCER = "learned:minilm-logreg"
Embed = Callable[[Sequence[str]], np.ndarray]  # texts -> (n, d) unit-norm rows
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n)([A-Za-z])")
_LOWER_I = re.compile(r"(?<![\w.])i(?![\w.'’-])")


@dataclass(frozen=True)
class LearnedParams:
    """Settings of the learned labeller (params.yaml ``label.learned``)."""

    folds: int = 5  # outer grouped CV folds for the figures on the labelled set
    inner_folds: int = 4  # grouped folds inside a training set that choose each threshold
    min_positives: int = 8  # labels with fewer hand-labelled positives get no model (abstain)
    target_precision: float = 0.7  # a threshold must reach this out-of-fold precision ...
    min_predicted: int = 3  # ... on at least this many predictions, else the label abstains
    regularization: float = 0.05  # C of the behaviour regressions (traits: 1; smaller = stronger)
    embed_chars: int = 600  # characters of each text embedded (MiniLM keeps <= 128 tokens)

    def __post_init__(self) -> None:
        if self.folds < 2 or self.inner_folds < 2:
            raise ValueError("learned.folds and learned.inner_folds must be >= 2")
        if not 0 < self.target_precision <= 1 or self.regularization <= 0:
            raise ValueError("need 0 < target_precision <= 1 and regularization > 0")
        if self.min_positives < 3 or self.min_predicted < 1 or self.embed_chars < 1:
            raise ValueError("need min_positives >= 3, min_predicted >= 1, embed_chars >= 1")


@dataclass(frozen=True)
class TurnInput:
    """What the labeller sees of one user turn: its text, its context and its rule labels."""

    text: str
    prev_agent: str
    prev_user: str
    rules: RuleResult


def surface_features(text: str) -> list[float]:
    """Length, pasted/terse/typo/thanks rule hits and capitalisation cues of one turn."""
    own = own_words(text, head_chars=600).strip()
    starts = _SENTENCE_START.findall(own)
    lower_starts = sum(s.islower() for s in starts) / len(starts) if starts else 0.0
    return [np.log1p(len(text)), np.log1p(text.count("\n")), float(len(words(own)) <= 4),
            float(is_pasted(text)), float(is_terse(text)), float(is_typo_rich(text)),
            float(is_thanks_and_leave(text)), lower_starts, float(own[:1].islower()),
            float(bool(_LOWER_I.search(own))), float(not any(c.isupper() for c in own)),
            float(own[-1:] not in ".!?"), float(own.count("?"))]


def featurize(items: Sequence[TurnInput], embed: Embed, embed_chars: int = 600) -> pd.DataFrame:
    """One row per turn: ``text`` (the turn's own words, for TF-IDF), ``e*`` (its embedding),
    ``cos_agent``/``cos_user`` (its cosine with the agent reply and the user turn before it),
    ``r*`` (the 13 rule behaviour hits) and ``s*`` (:func:`surface_features`)."""
    texts = [own_words(t.text, head_chars=embed_chars) or t.text[:embed_chars] for t in items]
    agent = [t.prev_agent[:embed_chars] for t in items]
    user = [t.prev_user[:embed_chars] for t in items]
    unique = list(dict.fromkeys([*texts, *agent, *user]))
    table = dict(zip(unique, embed(unique), strict=True)) if unique else {}
    dim = len(next(iter(table.values()))) if table else 0
    e_turn, e_agent, e_user = (np.stack([table[s] for s in col]) if col else np.zeros((0, dim))
                               for col in (texts, agent, user))
    frame = pd.DataFrame(e_turn, columns=[f"e{k}" for k in range(dim)])
    frame["cos_agent"] = np.sum(e_turn * e_agent, 1)
    frame["cos_user"] = np.sum(e_turn * e_user, 1)
    for b in BEHAVIOR_IDS:
        frame[f"r{b}"] = [float(b in t.rules.behaviors) for t in items]
    surface = np.array([surface_features(t.text) for t in items]).reshape(len(items), -1)
    for k in range(surface.shape[1]):
        frame[f"s{k}"] = surface[:, k]
    frame.insert(0, "text", texts)
    return frame


def _columns(frame_columns: Sequence[str], label: str) -> list[str]:
    """Dense columns a label's model reads: traits are surface properties (rule hits and surface
    cues only); behaviours also read the embedding and context cosines."""
    keep = ("r", "s") if label in TRAIT_IDS else ("e", "cos", "r", "s")
    return [c for c in frame_columns if c != "text" and c.startswith(keep)]


def _classifier(params: LearnedParams, seed: int, label: str,
                columns: Sequence[str]) -> CalibratedClassifierCV:
    parts = [("dense", StandardScaler(), _columns(columns, label))]
    if label not in TRAIT_IDS:  # word n-grams of the turn, fitted on the training rows only
        parts.append(("words", TfidfVectorizer(ngram_range=(1, 2), min_df=2, sublinear_tf=True),
                      "text"))
    base = make_pipeline(ColumnTransformer(parts), LogisticRegression(
        C=params.regularization if label not in TRAIT_IDS else 1.0, class_weight="balanced",
        max_iter=3000))
    return CalibratedClassifierCV(base, method="sigmoid",
                                  cv=StratifiedKFold(3, shuffle=True, random_state=seed))


def choose_threshold(prob: np.ndarray, y: np.ndarray, target: float, min_predicted: int) -> float:
    """Lowest probability cut whose predictions reach ``target`` precision on at least
    ``min_predicted`` positives (most recall at that precision); ``inf`` (abstain) if none.

    >>> choose_threshold(np.array([.9, .8, .7, .2]), np.array([1, 1, 0, 0]), 0.6, 2)
    0.7
    """
    order = np.argsort(-prob, kind="stable")
    hits = np.cumsum(y[order])
    ranks = np.arange(1, len(prob) + 1)
    ok = (hits / ranks >= target) & (ranks >= min_predicted)
    ok &= np.append(prob[order][1:] < prob[order][:-1], True)  # cut between distinct values
    return float(prob[order][np.flatnonzero(ok)[-1]]) if ok.any() else float("inf")


@dataclass
class LabelModel:
    """One label's calibrated classifier and its abstention threshold."""

    classifier: CalibratedClassifierCV
    threshold: float


@dataclass
class LearnedLabeller:
    """Per-label models fitted on ``trained_on`` (row keys); labels without a model abstain."""

    labels: tuple[str, ...]
    models: dict[str, LabelModel] = field(default_factory=dict)
    trained_on: frozenset[str] = frozenset()

    def predict(self, x: pd.DataFrame) -> list[set[str]]:
        """Label sets for the rows of ``x`` (a :func:`featurize` frame)."""
        out: list[set[str]] = [set() for _ in range(len(x))]
        for label, model in self.models.items():
            if not np.isfinite(model.threshold) or not len(x):
                continue
            prob = model.classifier.predict_proba(x)[:, 1]
            for n in np.flatnonzero(prob >= model.threshold):
                out[n].add(label)
        return out


def fit(x: pd.DataFrame, y: np.ndarray, groups: Sequence[str], labels: Sequence[str],
        params: LearnedParams, seed: int = 0, keys: Sequence[str] = ()) -> LearnedLabeller:
    """Fit one model per label with at least ``min_positives`` positives in ``y[:, k]``; its
    threshold comes from out-of-fold probabilities of ``inner_folds`` grouped folds.

    Args:
        x: Features (:func:`featurize`), ``n`` rows.
        y: Hand labels, shape ``(n, len(labels))``, 0/1.
        groups: Conversation id per row (rows of one conversation share a fold).
        keys: Row identities recorded in ``trained_on`` (for leak checks).
    """
    groups = np.asarray(groups)
    labeller = LearnedLabeller(tuple(labels), trained_on=frozenset(keys))
    inner = GroupKFold(n_splits=min(params.inner_folds, len(set(groups))))
    for k, label in enumerate(labels):
        target = y[:, k].astype(int)
        if target.sum() < params.min_positives or target.sum() == len(target):
            continue
        oof = _out_of_fold(x, target, groups, inner, params, seed, label)
        threshold = choose_threshold(oof, target, params.target_precision, params.min_predicted)
        labeller.models[label] = LabelModel(
            _classifier(params, seed, label, x.columns).fit(x, target), threshold)
    return labeller


def _out_of_fold(x: pd.DataFrame, target: np.ndarray, groups: np.ndarray, inner: GroupKFold,
                 params: LearnedParams, seed: int, label: str) -> np.ndarray:
    """Out-of-fold probabilities; a fold whose training part has < 3 positives (too few to
    calibrate) gives 0, i.e. counts as abstaining there."""
    oof = np.zeros(len(target))
    for train, test in inner.split(x, groups=groups):
        if min(target[train].sum(), (1 - target[train]).sum()) < 3:
            continue
        model = _classifier(params, seed, label, x.columns).fit(x.iloc[train], target[train])
        oof[test] = model.predict_proba(x.iloc[test])[:, 1]
    return oof


def cross_validate(x: pd.DataFrame, y: np.ndarray, groups: Sequence[str], labels: Sequence[str],
                   params: LearnedParams, seed: int = 0, keys: Sequence[str] = ()
                   ) -> tuple[list[set[str]], list[LearnedLabeller]]:
    """Out-of-fold predictions for every row: each row is labelled by a model fitted (and
    thresholded) on the other ``folds - 1`` grouped folds only.

    Returns:
        ``(predictions, scorers)``: label sets per row and, per row, the labeller that made them.
    """
    keys = list(keys) or [str(n) for n in range(len(x))]
    preds: list[set[str]] = [set() for _ in range(len(x))]
    scorers: list[LearnedLabeller | None] = [None] * len(x)
    outer = GroupKFold(n_splits=min(params.folds, len(set(groups))))
    for train, test in outer.split(x, groups=groups):
        model = fit(x.iloc[train], y[train], [groups[n] for n in train], labels, params, seed,
                    [keys[n] for n in train])
        for n, labels_n in zip(test, model.predict(x.iloc[test]), strict=True):
            preds[n], scorers[n] = labels_n, model
    return preds, [s for s in scorers if s is not None]
