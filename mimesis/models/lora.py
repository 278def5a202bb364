"""LoRA adapter settings shared by every stage that trains one (user simulator and agents).

Kept in the library, not in a stage module, so a change to one stage's code does not re-run the
stages that only share these settings (dvc re-runs a stage when a module it imports changes).
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class LoraParams:
    """LoRA adapter settings (peft; Hu et al. 2021, arXiv 2106.09685): the ``lora`` key of the
    ``train_user``, ``sft_agent``, ``train_agent`` and ``distill_agent`` params.

    Attributes:
        r: Adapter rank.
        alpha: Scaling numerator: the update is scaled by ``alpha / r``.
        dropout: Dropout on the adapter's input, in [0, 1).
        target_modules: Names of the linear layers that get an adapter.

    Raises:
        ValueError: ``r`` or ``alpha`` not positive, ``dropout`` outside [0, 1), or no target
            module.
    """

    r: int = 16
    alpha: int = 32
    dropout: float = 0.05
    # attention and MLP projections of Llama/Qwen-style blocks
    target_modules: list[str] = field(default_factory=lambda: [
        "q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"])

    def __post_init__(self) -> None:
        if self.r <= 0 or self.alpha <= 0 or not 0 <= self.dropout < 1:
            raise ValueError(f"bad LoRA settings r={self.r} alpha={self.alpha} "
                             f"dropout={self.dropout}")
        if not self.target_modules:
            raise ValueError("lora.target_modules is empty")

    def peft_config(self):
        """The peft ``LoraConfig`` of these settings (causal LM); the one place one is built."""
        from peft import LoraConfig  # lazy: full fine-tuning needs no peft

        return LoraConfig(r=self.r, lora_alpha=self.alpha, lora_dropout=self.dropout,
                          target_modules=list(self.target_modules), task_type="CAUSAL_LM")
