"""A learned behaviour and trait labeller that runs on CPU: word n-grams of a user turn, the rule
hits, surface features and features of how the turn relates to the agent reply before it (edit
cues, word overlap, a cut-off reply; optionally MiniLM sentence embeddings of the turn and its
context) into one calibrated logistic regression per label; each behaviour abstains below a
threshold chosen on validation folds, precision first (a trait's threshold maximises its F1).

Source: ours. Embeddings: all-MiniLM-L6-v2 (``mimesis.models.embeddings``); calibration: Platt
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
from mimesis.behaviors.lexicon import content_words, own_words, stem, words
from mimesis.behaviors.rules import RuleResult
from mimesis.behaviors.traits import is_pasted, is_terse, is_thanks_and_leave, is_typo_rich

PRODUCER = "learned:minilm-logreg"
Embed = Callable[[Sequence[str]], np.ndarray]  # texts -> (n, d) unit-norm rows
_SENTENCE_START = re.compile(r"(?:^|[.!?]\s+|\n)([A-Za-z])")
_LOWER_I = re.compile(r"(?<![\w.])i(?![\w.'’-])")
# Cues that a turn edits the deliverable the agent just produced (B2, B7) rather than asking
# something new: imperative edits, comparatives, "instead", references back to the reply.
_EDIT = re.compile(
    r"(?i)\b(?:make (?:it|this|that|them|the)|rewrite|rephrase|restate|redo|revise|modify|"
    r"update|change|replace|remove|delete|add|include|insert|put|use|shorten|expand|"
    r"convert|translate|turn (?:it|this)|again|instead|rather|without|except|only|"
    r"shorter|longer|simpler|more|less|fewer|too|but)\b")
_BACK_REF = re.compile(r"(?i)\b(?:it|this|that|these|those|the above|above|the same|"
                       r"your (?:answer|response|code|list|text|version)|the (?:code|list|"
                       r"table|story|text|letter|email|script|essay|poem|article))\b")
_OPENER = re.compile(r"(?i)^\s*(?:what|how|why|who|when|where|which|is|are|can you "
                     r"(?:explain|tell)|do you know|explain|tell me)\b")
_VERDICT = re.compile(r"(?i)\b(?:not what|wrong|incorrect|doesn'?t work|not working|that'?s not|"
                      r"no,|you (?:forgot|missed|didn'?t)|still|misunderstood|i (?:said|asked|"
                      r"meant|mean))\b")
_ITEM = re.compile(r"(?m)^\s*(?:\d+[.)-]|[-*•]|[a-z]\))\s")
# Cues of the rarer behaviours, from the labelling guide and the development turns that show
# them: a restriction knocking out the proposal (B7), pressure that names nothing (B9), a request
# sentence opening with an ask (B12 counts them), a verdict on the answer's fit (B1).
_RESTRICT = re.compile(r"(?i)\b(?:without|don'?t (?:use|want to use)|do not use|dont use|avoid|"
                       r"not allowed|can'?t use|cannot use|instead of|only (?:use|one)|"
                       r"no (?:library|libraries|password|class|framework))\b")
_PRESSURE = re.compile(r"(?i)\b(?:still|again|same (?:error|problem|issue|link|thing)|"
                       r"(?:doesn'?t|didn'?t|does not|did not|won'?t) work|not working|"
                       r"try again|hurry|come on)\b|!{2,}|\?{2,}")
_ASK = re.compile(r"(?im)(?:^|[.?!:]\s+|\n\s*(?:\d+[.)]|[-*•])?\s*)(?:please\s+)?(?:write|give|"
                  r"create|explain|list|provide|describe|analy[sz]e|suggest|include|generate|"
                  r"compare|summari[sz]e|what|how|why|which|who|when|where|can you|could you)\b")
_FIT = re.compile(r"(?i)\b(?:not (?:quite )?(?:what|the problem|right|good)|too (?:complicated|"
                  r"formal|professional|long|short|generic|simple)|not \w+ enough|"
                  r"gone wrong|i (?:said|asked|meant|wanted)|should have said|misunderstood|"
                  r"not (?:a )?good fit|close,? but)\b")
# Cues read from the agent's reply (B3, B4): it ends by asking the user something; the user
# defers the choice back instead of answering; it refuses or calls the request impossible.
_DEFER = re.compile(r"(?i)\b(?:just (?:do|pick|choose|write|give|make)|you (?:decide|choose|pick|"
                    r"have to make)|up to you|whatever|doesn'?t matter|i don'?t (?:know|care))\b")
_REFUSED = re.compile(r"(?i)\b(?:i'?m sorry,? but|i (?:cannot|can'?t|am unable|am not able)|"
                      r"as an ai|not (?:possible|able to)|i don'?t have (?:access|the ability)|"
                      r"unable to (?:provide|browse|access))")


@dataclass(frozen=True)
class LearnedParams:
    """Settings of the learned labeller (params.yaml ``label.learned``)."""

    folds: int = 5  # outer grouped CV folds for the figures on the labelled set
    inner_folds: int = 3  # grouped folds inside a training set that choose each threshold
    min_positives: int = 8  # labels with fewer hand-labelled positives get no model (abstain)
    target_precision: float = 0.7  # a threshold must reach this out-of-fold precision ...
    min_predicted: int = 3  # ... on at least this many predictions, else the label abstains
    regularization: float = 0.2  # C of the behaviour regressions (traits: 1; smaller = stronger)
    embed_chars: int = 600  # characters of each text embedded (MiniLM keeps <= 128 tokens)
    embeddings: bool = False  # behaviour models also read MiniLM embeddings (cross-validated on
    # the 510 labelled turns they lowered micro P/R over B1-B13 from 0.76/0.39 to 0.73/0.30)
    precision_floor: float = 0.5  # a behaviour whose cross-validated precision on the labelled
    # set is below this (or that is never predicted there) abstains
    behaviors_from_rules: bool = True  # ``mixed`` may take a behaviour from the rules
    # (``quality.choose_rule_behaviors``)

    def __post_init__(self) -> None:
        if self.folds < 2 or self.inner_folds < 2:
            raise ValueError("learned.folds and learned.inner_folds must be >= 2")
        if not 0 < self.target_precision <= 1 or self.regularization <= 0:
            raise ValueError("need 0 < target_precision <= 1 and regularization > 0")
        if not 0 <= self.precision_floor <= 1:
            raise ValueError("need 0 <= precision_floor <= 1")
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


def _overlap(a: str, b: str) -> float:
    """Share of the content-word stems of ``a`` that also occur in ``b``."""
    sa = {stem(w) for w in content_words(a)}
    return len(sa & {stem(w) for w in content_words(b)}) / len(sa) if sa else 0.0


def context_features(text: str, prev_agent: str, prev_user: str) -> list[float]:
    """How the turn relates to the agent reply before it: whether there is one, its length and
    whether it was cut off; the turn's word overlap with it and with the previous user turn;
    edit, back-reference, verdict and new-question cues in the turn's first words; counts of
    questions and enumerated items (overloading); and cues of the rarer behaviours: a restriction
    after a reply (B7), short pressure naming nothing (B9), asks typed by the user (B12) and a
    verdict on the answer's fit (B1); whether the reply ends by asking the user something, and
    whether the turn then opens a new question or defers the choice instead of answering (B3);
    whether the reply refuses, and the turn's overlap with the request it refused (B4).

    Returns:
        22 floats, in the order above."""
    own = own_words(text, head_chars=600)
    head = own[:200]
    agent = prev_agent.rstrip()
    asked = bool(agent) and "?" in agent[-250:]
    refused = bool(_REFUSED.search(agent[:600]))
    return [float(bool(agent)), np.log1p(len(agent)),
            float(bool(agent) and agent[-1:] not in ".!?)`\"'*:"),
            _overlap(own, prev_agent[-2000:]), _overlap(own, prev_user),
            float(len(_EDIT.findall(head))), float(bool(_EDIT.search(own[:60]))),
            float(bool(_BACK_REF.search(head))), float(bool(_VERDICT.search(head))),
            float(bool(_OPENER.search(own))), float(bool(agent) and bool(_OPENER.search(own))),
            float(own.count("?")), float(len(_ITEM.findall(own))),
            float(bool(agent) and bool(_EDIT.search(own[:60])) and not _OPENER.search(own)),
            float(bool(agent) and bool(_RESTRICT.search(head))),
            float(bool(agent) and bool(_PRESSURE.search(head)) and len(words(own)) <= 15),
            float(len(_ASK.findall(own))) * float(not is_pasted(text)),
            float(bool(agent) and bool(_FIT.search(head))),
            float(asked), float(asked and bool(_OPENER.search(own) or _DEFER.search(head))),
            float(refused), float(refused) * _overlap(own, prev_user)]


def featurize(items: Sequence[TurnInput], embed: Embed | None,
              embed_chars: int = 600) -> pd.DataFrame:
    """One row per turn: ``text`` (the turn's own words, for TF-IDF); with ``embed``, ``e*`` (its
    embedding) and ``cos_agent``/``cos_user`` (its cosine with the agent reply and the user turn
    before it); ``r*`` (the 13 rule behaviour hits), ``s*`` (:func:`surface_features`) and ``c*``
    (:func:`context_features`)."""
    texts = [own_words(t.text, head_chars=embed_chars) or t.text[:embed_chars] for t in items]
    frame = (_embedded(items, texts, embed, embed_chars) if embed is not None
             else pd.DataFrame(index=range(len(items))))
    for b in BEHAVIOR_IDS:
        frame[f"r{b}"] = [float(b in t.rules.behaviors) for t in items]
    surface = np.array([surface_features(t.text) for t in items]).reshape(len(items), -1)
    for k in range(surface.shape[1]):
        frame[f"s{k}"] = surface[:, k]
    context = np.array([context_features(t.text, t.prev_agent, t.prev_user)
                        for t in items]).reshape(len(items), -1)
    for k in range(context.shape[1]):
        frame[f"c{k}"] = context[:, k]
    frame.insert(0, "text", texts)
    return frame


def _embedded(items: Sequence[TurnInput], texts: list[str], embed: Embed,
              embed_chars: int) -> pd.DataFrame:
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
    return frame


def _columns(frame_columns: Sequence[str], label: str) -> list[str]:
    """Dense columns a label's model reads: traits are surface properties (rule hits and surface
    cues only); behaviours also read the context features and, when the frame has them, the
    embedding and context cosines."""
    keep = ("r", "s") if label in TRAIT_IDS else ("e", "cos", "r", "s", "c")
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


def choose_threshold_f1(prob: np.ndarray, y: np.ndarray) -> float:
    """The probability cut with the highest F1 (traits are judged by F1, not precision first);
    ``inf`` when there is no positive.

    >>> choose_threshold_f1(np.array([.9, .8, .7, .2]), np.array([1, 1, 0, 0]))
    0.8
    """
    order = np.argsort(-prob, kind="stable")
    hits = np.cumsum(y[order])
    if not len(prob) or hits[-1] == 0:
        return float("inf")
    ranks = np.arange(1, len(prob) + 1)
    f1 = 2 * hits / (ranks + hits[-1])
    f1[:-1][prob[order][1:] == prob[order][:-1]] = -1  # cut between distinct values only
    return float(prob[order][int(np.argmax(f1))])


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
        params: LearnedParams, seed: int = 0, keys: Sequence[str] = (),
        known: np.ndarray | None = None) -> LearnedLabeller:
    """Fit one model per label with at least ``min_positives`` positives in ``y[:, k]``; its
    threshold comes from out-of-fold probabilities of ``inner_folds`` grouped folds (a
    behaviour's: the lowest reaching ``target_precision``; a trait's: the best F1).

    Args:
        x: Features (:func:`featurize`), ``n`` rows.
        y: Hand labels, shape ``(n, len(labels))``, 0/1.
        groups: Conversation id per row (rows of one conversation share a fold).
        keys: Row identities recorded in ``trained_on`` (for leak checks).
        known: Optional bool mask, shape of ``y``: a label's model fits only the rows where it
            was labelled (turns labelled for behaviours only say nothing about traits).

    Raises:
        ValueError: ``known`` is not shaped like ``y``.
    """
    groups = np.asarray(groups)
    if known is not None and known.shape != y.shape:
        raise ValueError(f"known mask of shape {known.shape} for labels of shape {y.shape}")
    labeller = LearnedLabeller(tuple(labels), trained_on=frozenset(keys))
    for k, label in enumerate(labels):
        rows = np.flatnonzero(known[:, k]) if known is not None else np.arange(len(y))
        target, xk, gk = y[rows, k].astype(int), x.iloc[rows], groups[rows]
        if target.sum() < params.min_positives or target.sum() == len(target):
            continue
        inner = GroupKFold(n_splits=min(params.inner_folds, len(set(gk))))
        oof = _out_of_fold(xk, target, gk, inner, params, seed, label)
        threshold = (choose_threshold_f1(oof, target) if label in TRAIT_IDS else
                     choose_threshold(oof, target, params.target_precision, params.min_predicted))
        labeller.models[label] = LabelModel(
            _classifier(params, seed, label, x.columns).fit(xk, target), threshold)
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
                   params: LearnedParams, seed: int = 0, keys: Sequence[str] = (),
                   known: np.ndarray | None = None
                   ) -> tuple[list[set[str]], list[LearnedLabeller]]:
    """Out-of-fold predictions for every row: each row is labelled by a model fitted (and
    thresholded) on the other ``folds - 1`` grouped folds only (``known``: as in :func:`fit`;
    every row still gets a prediction for every label).

    Returns:
        ``(predictions, scorers)``: label sets per row and, per row, the labeller that made them.
    """
    keys = list(keys) or [str(n) for n in range(len(x))]
    preds: list[set[str]] = [set() for _ in range(len(x))]
    scorers: list[LearnedLabeller | None] = [None] * len(x)
    outer = GroupKFold(n_splits=min(params.folds, len(set(groups))))
    for train, test in outer.split(x, groups=groups):
        model = fit(x.iloc[train], y[train], [groups[n] for n in train], labels, params, seed,
                    [keys[n] for n in train], None if known is None else known[train])
        for n, labels_n in zip(test, model.predict(x.iloc[test]), strict=True):
            preds[n], scorers[n] = labels_n, model
    return preds, [s for s in scorers if s is not None]
