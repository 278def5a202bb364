"""Coached self-distillation (CSD, MIMESIS Stage II) on top of turn-credit GRPO.

For the agent's own sampled tokens ``y`` of a coached turn (never regenerated):

    Δ      = log π_teacher(y) − log π_student(y)
    g      = σ(β · sg(Δ))
    L_CSD  = −mean(g · log π_student(y))                 (mean over the coached agent tokens)
    L      = L_GRPO + α · L_CSD                          (α = 0.01, β = 5 by default)

The student is the policy on the episode as it was played; the teacher is a stop-gradient copy
of the *same* current policy with the coach's note inserted before the turn as its own ``user``
message (:func:`teacher_sequence`, rendered with the tokenizer's chat template — never
hand-written ChatML, docs/pitfalls.md #10). The idea of a teacher that is the policy itself under a
privileged context comes from TRL's ``trl.experimental.sdpo`` (``_compute_teacher_student_logits``:
teacher = prompt + privileged context + the same completion, scored under ``no_grad``); its
single-turn layout (the completion as a suffix) and its KL losses do not fit notes interleaved
with turns or the gated objective above, so the loss and the sequence assembly are ours.
Where ``Δ > 0`` the note made the sampled token more likely — the coach "agrees" with it — and
the gate ``g > 1/2`` weights its log-likelihood up.

A placebo note (``mimesis/prompts/coach_placebo.md``, content-free) at the same turns is the
control: ``Δ_real − Δ_placebo > 0`` means the notes carry information (docs/metrics.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from mimesis.models.engine.tokens import TemplateDriftError, encode, render
from mimesis.rl.grpo import TurnCreditGRPOTrainer, log_to_mlflow
from mimesis.schemas import Messages


@dataclass(frozen=True)
class CSDTerms:
    """One CSD loss evaluation: ``loss`` (scalar, differentiable through the student), and the
    masked ``delta`` and ``gate`` values (1-D, detached) for diagnostics."""

    loss: torch.Tensor
    delta: torch.Tensor
    gate: torch.Tensor


def token_logps(logits: torch.Tensor, ids: torch.Tensor, temperature: float = 1.0
                ) -> torch.Tensor:
    """``log softmax(logits / temperature)[ids]``: ``[..., V]`` logits predicting ``[...]`` ids."""
    logp = torch.log_softmax(logits.float() / temperature, dim=-1)
    return logp.gather(-1, ids.unsqueeze(-1)).squeeze(-1)


def csd_loss(student_logps: torch.Tensor, teacher_logps: torch.Tensor, mask: torch.Tensor,
             beta: float, normalizer: torch.Tensor | float | None = None) -> CSDTerms:
    """The CSD loss of the module docstring on per-token log-probabilities.

    Args:
        student_logps: ``[B, T]`` log π_student(y), with gradient.
        teacher_logps: ``[B, T]`` log π_teacher(y) (treated as constants).
        mask: ``[B, T]`` 1 on coached agent tokens, 0 elsewhere (env, uncoached, padding).
        beta: Gate sharpness β.
        normalizer: Token count of the mean (default ``mask.sum()``; the trainer passes the
            count of the whole generation batch so that accumulated micro-batches average).

    Returns:
        :class:`CSDTerms`; ``loss`` is 0 (still attached to the graph) when the mask is empty.
    """
    mask = mask.to(student_logps.dtype)
    delta = (teacher_logps.detach() - student_logps.detach())
    gate = torch.sigmoid(beta * delta)
    n = mask.sum() if normalizer is None else torch.as_tensor(normalizer, dtype=mask.dtype)
    loss = -(gate * student_logps * mask).sum() / n.clamp(min=1.0)
    keep = mask.bool()
    return CSDTerms(loss=loss, delta=delta[keep], gate=gate[keep])


@dataclass(frozen=True)
class TeacherSequence:
    """The teacher's token sequence of one episode.

    Attributes:
        ids: Chat with the notes, rendered by the template, agent tokens verbatim.
        teacher_pos: Positions in ``ids`` of the agent tokens of turns ``0 … last noted``.
        completion_pos: The same tokens' positions in the episode's ``completion_ids``.
        messages: The teacher's chat (the episode's chat with the note messages).
    """

    ids: list[int]
    teacher_pos: list[int]
    completion_pos: list[int]
    messages: Messages


def note_message(note: str) -> dict[str, str]:
    """The note as its own user turn."""
    return {"role": "user", "content": note}


def teacher_sequence(tokenizer, episode: Any, notes: dict[int, str]) -> TeacherSequence:
    """Insert ``notes[k]`` as a user message before agent turn ``k`` and tokenise the chat.

    Injected text is the difference of two template renderings (as the rollout's transcript does,
    :mod:`mimesis.models.engine.tokens`); the agent's sampled ids are copied verbatim, so the teacher scores
    exactly the tokens the student sampled. The sequence ends after the last noted turn.

    Raises:
        TemplateDriftError: the template re-renders earlier turns differently (docs/pitfalls.md #8).
        ValueError: no notes, or a note for a turn the episode does not have.
    """
    by_turn: dict[int, list[int]] = {}
    for pos, (bit, turn) in enumerate(zip(episode.env_mask, episode.turn_ids, strict=True)):
        if bit:
            by_turn.setdefault(turn, []).append(pos)
    assistant = [i for i, m in enumerate(episode.messages) if m["role"] == "assistant"]
    if not notes or max(notes) >= len(assistant) or max(notes) not in by_turn:
        raise ValueError(f"notes for turns {sorted(notes)} but the episode has turns "
                         f"{sorted(by_turn)}")
    messages: Messages = []
    ids: list[int] = []
    text, prev = "", 0
    teacher_pos: list[int] = []
    completion_pos: list[int] = []
    for k in range(max(notes) + 1):
        messages += [dict(m) for m in episode.messages[prev:assistant[k]]]
        if k in notes:
            messages.append(note_message(notes[k]))
        after = render(tokenizer, messages, add_generation_prompt=True)
        if not after.startswith(text):
            raise TemplateDriftError(f"teacher chat of {episode.scenario_id} is not append-only "
                                     f"at turn {k}")
        ids += encode(tokenizer, after[len(text):])
        agent = [episode.completion_ids[p] for p in by_turn.get(k, [])]
        teacher_pos += range(len(ids), len(ids) + len(agent))
        completion_pos += by_turn.get(k, [])
        ids += agent
        text = after + tokenizer.decode(agent, skip_special_tokens=False)
        messages.append(dict(episode.messages[assistant[k]]))
        prev = assistant[k] + 1
    return TeacherSequence(ids, teacher_pos, completion_pos, messages)


@torch.no_grad()
def score_positions(model, sequences: Sequence[Sequence[int]], positions: Sequence[Sequence[int]],
                    temperature: float, pad_id: int, batch_size: int = 4) -> list[torch.Tensor]:
    """``log π(ids[p] | ids[:p])`` at each position ``p`` of each sequence (temperature-scaled,
    as TRL scores the policy); right-padded batches, logits gathered before the softmax."""
    out: list[torch.Tensor] = []
    device = next(model.parameters()).device
    for start in range(0, len(sequences), batch_size):
        chunk = [list(s) for s in sequences[start:start + batch_size]]
        width = max(len(s) for s in chunk)
        ids = torch.full((len(chunk), width), pad_id, dtype=torch.long, device=device)
        mask = torch.zeros_like(ids)
        for i, s in enumerate(chunk):
            ids[i, :len(s)] = torch.tensor(s, device=device)
            mask[i, :len(s)] = 1
        logits = model(input_ids=ids, attention_mask=mask, use_cache=False).logits
        for i, pos in enumerate(positions[start:start + batch_size]):
            p = torch.tensor(list(pos), dtype=torch.long, device=device)
            out.append(token_logps(logits[i, p - 1], ids[i, p], temperature).cpu())
    return out


def teacher_logps(model, tokenizer, episodes: Sequence[Any], notes: Sequence[dict[int, str]],
                  width: int, temperature: float, batch_size: int = 4
                  ) -> tuple[torch.Tensor, torch.Tensor]:
    """Teacher log-probs of every coached agent token, aligned with the completions.

    Args:
        episodes: ``B`` episodes (the trainer's rows, in order).
        notes: ``B`` dicts ``turn -> note`` (empty: the episode is not coached).
        width: Columns of the result (TRL's padded completion length).

    Returns:
        ``(logps [B, width], mask [B, width])``; ``mask`` is 1 on the agent tokens of the noted
        turns, where ``logps`` holds the teacher's values (0 elsewhere).

    Each noted turn ``k`` is scored in its own teacher sequence that holds only note ``h_k``
    (MIMESIS Stage II: the teacher of turn ``k`` is conditioned on that turn's note, not on the
    notes of earlier turns), so an episode with two notes costs two teacher sequences.
    """
    logps, mask = torch.zeros(len(episodes), width), torch.zeros(len(episodes), width)
    rows: list[tuple[int, list[int], TeacherSequence]] = []
    for b, (ep, n) in enumerate(zip(episodes, notes, strict=True)):
        for k in sorted(n):
            seq = teacher_sequence(tokenizer, ep, {k: n[k]})
            keep = [i for i, p in enumerate(seq.completion_pos) if ep.turn_ids[p] == k]
            rows.append((b, [seq.completion_pos[i] for i in keep],
                         replace(seq, teacher_pos=[seq.teacher_pos[i] for i in keep])))
    if not rows:
        return logps, mask
    scored = score_positions(model, [t.ids for *_, t in rows], [t.teacher_pos for *_, t in rows],
                             temperature, tokenizer.pad_token_id, batch_size)
    for (b, completion_pos, _), values in zip(rows, scored, strict=True):
        cols = torch.tensor(completion_pos, dtype=torch.long)
        logps[b, cols] = values
        mask[b, cols] = 1.0
    return logps, mask


def _stats(prefix: str, values: torch.Tensor) -> dict[str, float]:
    if values.numel() == 0:
        return {}
    std = float(values.std()) if values.numel() > 1 else 0.0
    return {f"{prefix}_mean": float(values.mean()), f"{prefix}_std": std}


class CSDTrainer(TurnCreditGRPOTrainer):
    """Turn-credit GRPO plus α·L_CSD (module docstring), with coach notes per rollout.

    Per generation batch: the coach writes notes for the episodes (:class:`~mimesis.rl.coach.
    Coach`), kept notes go into the teacher's chat, and the current policy scores the sampled
    agent tokens with the real and with the placebo note (no grad, eval mode). Δ statistics are
    taken there against the rollout's own log-probs (same policy, same temperature) and logged as
    ``csd/delta_real_*``, ``csd/delta_placebo_*`` and ``csd/delta_gap``; the loss uses the live
    student log-probs of TRL's forward for ``g`` and the gradient.

    Args:
        coach: Writes the notes.
        alpha: Weight α of L_CSD (0: GRPO only, diagnostics still computed).
        beta: Gate sharpness β.
        note_kind: ``real`` (the coach's note) or ``placebo`` (the content-free note) in the loss.
        placebo: Text of the placebo note.
        score_batch_size: Sequences per teacher forward.

    Attributes:
        notes: Every :class:`~mimesis.rl.coach.NoteRecord` written so far.
    """

    def __init__(self, *args: Any, coach, alpha: float = 0.01, beta: float = 5.0,
                 note_kind: str = "real", placebo: str = "", score_batch_size: int = 4,
                 **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        if note_kind not in ("real", "placebo") or alpha < 0 or not placebo.strip():
            raise ValueError("note_kind real|placebo, alpha >= 0 and a placebo text are required")
        # not self.beta / self.alpha: TRL's self.beta is its KL coefficient
        self.coach, self.csd_alpha, self.csd_beta = coach, alpha, beta
        self.note_kind = note_kind
        self.placebo, self.score_batch_size = placebo.strip(), score_batch_size
        self.notes: list = []
        self._capture, self._captured = False, None

    def _generate_and_score_completions(self, inputs: list[dict[str, Any]]) -> dict[str, Any]:
        output = super()._generate_and_score_completions(inputs)
        episodes = [x["episode"] for x in inputs]
        width = output["completion_ids"].size(1)
        records = self.coach.notes(episodes, step=self.state.global_step + 1)
        real: list[dict[int, str]] = [{} for _ in episodes]
        for r in records:
            if r.status == "kept":
                real[r.episode][r.turn] = r.note
        placebo = [{k: self.placebo for k in n} for n in real]
        model = self.accelerator.unwrap_model(self.model)
        training = model.training
        model.eval()
        try:
            scored = {kind: teacher_logps(model, self.processing_class, episodes, notes, width,
                                          self.temperature, self.score_batch_size)
                      for kind, notes in (("real", real), ("placebo", placebo))}
        finally:
            model.train(training)
        teacher, mask = scored[self.note_kind]
        device = output["completion_ids"].device
        output["csd_teacher_logps"], output["csd_mask"] = teacher.to(device), mask.to(device)
        output["csd_num_tokens"] = mask.sum().to(device)
        if training:
            self.notes += records
            self._record_csd(episodes, records, scored, width)
        return output

    def _record_csd(self, episodes, records, scored, width: int) -> None:
        """Note counts and Δ statistics (real vs placebo) into this step's history row."""
        sampled = torch.zeros(len(episodes), width)
        for b, ep in enumerate(episodes):
            sampled[b, :len(ep.logprobs)] = torch.tensor(ep.logprobs)
        mask = scored["real"][1].bool()
        row: dict[str, float] = {f"notes/{s}": float(sum(r.status == s for r in records))
                                 for s in ("kept", "none", "empty", "leak")}
        row["csd/tokens"] = float(mask.sum())
        deltas = {kind: (logps - sampled)[mask] for kind, (logps, _) in scored.items()}
        row.update(_stats("csd/delta_real", deltas["real"]))
        row.update(_stats("csd/delta_placebo", deltas["placebo"]))
        if mask.any():
            row["csd/delta_gap"] = float(deltas["real"].mean() - deltas["placebo"].mean())
        self.history[-1].update(row)
        log_to_mlflow(row, int(self.history[-1]["step"]))

    def _get_per_token_logps_and_entropies(self, model, *args: Any, **kwargs: Any):
        """TRL's scoring pass; the loss-time call's log-probs are kept for L_CSD (no second
        forward)."""
        out = super()._get_per_token_logps_and_entropies(model, *args, **kwargs)
        if self._capture:
            self._captured = out[0]
        return out

    def _compute_loss(self, model, inputs: dict[str, Any]) -> torch.Tensor:
        """TRL's GRPO loss + α·L_CSD on the coached agent tokens of this micro-batch."""
        self._capture, self._captured = True, None
        try:
            loss = super()._compute_loss(model, inputs)
        finally:
            self._capture = False
        mask = inputs["completion_mask"] * inputs["csd_mask"]
        if "tool_mask" in inputs:
            mask = mask * inputs["tool_mask"]
        normalizer = inputs["csd_num_tokens"]
        if self.model.training:  # accumulated micro-batches must average, as TRL's dapo loss
            normalizer = normalizer * self.current_gradient_accumulation_steps \
                / self.args.steps_per_generation
        terms = csd_loss(self._captured, inputs["csd_teacher_logps"], mask, self.csd_beta,
                         normalizer)
        mode = "train" if self.model.training else "eval"
        if terms.gate.numel():  # per micro-batch: mean gate and mean −g·log π_student
            student = self._captured.detach()[mask.bool()]
            self._metrics[mode]["csd/gate_mean"].append(float(terms.gate.mean()))
            self._metrics[mode]["csd/loss"].append(float(-(terms.gate * student).mean()))
        return loss + self.csd_alpha * terms.loss if self.csd_alpha > 0 else loss
