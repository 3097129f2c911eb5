"""Arca's configuration (``arca.*``), with the run view its engine reads."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

from lira.checkpoint.fingerprint import config_fingerprint
from lira.config import (
    DataConfig,
    LoRAArguments,
    ModelsConfig,
    TrainingArguments,
    check,
    check_at_least,
    check_lr,
)
from lira.translation.config import TranslationConfig

MAX_POOL_SIZE = 4096
"""Largest ``arca.pool_size`` accepted (memory grows linearly with it)."""
MAX_ADAPTOR_HIDDEN = 65536
"""Largest ``arca.adaptor_hidden`` accepted (a wider MLP does not fit in memory)."""


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a file or folder name inside ``output_dir`` (None when it can)."""
    if name in (".", "..") or any(c in name for c in "/\\\0") or name != name.strip():
        return (
            f"{name!r} is used as a folder name inside output_dir: use letters, digits, "
            "'-', '_' or '.' (no path separators, no '..')"
        )
    return None


@dataclass
class ArcaConfig(TrainingArguments, LoRAArguments):
    """Arca training (paper §4.1, App. C-D.1, Tables 9-10)."""

    pool_size: int = 4
    """S: temporal-pooling bins (Table 9 uses 4 or 8)."""
    adaptor_hidden: int = 512
    """Hidden width of the Adaptor MLP d_g -> hidden -> d_h (App. D.1: 512)."""
    adaptor_init: Literal["paper", "identity"] = "paper"
    """paper (App. D.1): the MLP from a random start; identity: E_lr starts as g itself, a
    zero-initialised residual MLP over the identity (d_g = d_h) or a linear projection."""
    objective: Literal["d1", "shared", "distill"] = "d1"
    """d1 (App. D.1, default): the Adaptor sits on g's path only and the English side is a fixed
    target of h; shared (Eq. 4 read literally): one Adaptor on both token paths (can collapse);
    distill (beyond the paper): the Adaptor maps g(y) to h(y) on English text y alone (the
    candidates, + the corpus with distill_corpus), no translation pairs in L_anchor."""
    distill_solver: Literal["gradient", "ridge"] = "gradient"
    """objective distill: gradient (the MLP Adaptor trained on 1 - cos, + anchor_contrast
    InfoNCE) or ridge (a linear Adaptor fitted in closed form once before training, then kept)."""
    distill_ridge: float = 1.0
    """objective distill, solver ridge: the L2 penalty lambda of W = (G'G + lambda I)^-1 G'H."""
    distill_corpus: bool = False
    """objective distill: also distil on the English corpus being indexed (label-free, but
    transductive: it reads the documents it will rank)."""
    anchor_target: Literal["sentence", "bins"] = "sentence"
    """d1 target: h's sentence embedding of y (retrieval), or the S pooled bins of h's token
    stream, flattened (reasoning: the Adaptor's bins become the LLM's soft tokens)."""
    backbone_stream: Literal["input_embeddings", "last_hidden"] = "input_embeddings"
    """Token stream of h for the bins target / shared objective (paper: input embeddings)."""
    alpha: float = 0.4
    """Reward weight of the semantic critic score (Eq. 7; paper Table 10: 0.4)."""
    beta: float = 0.3
    """Reward weight of the emotional critic score (Eq. 7; paper Table 10: 0.3; §5.1's text says
    0.4, Table 10 is followed: docs/design.md "Arca")."""
    gamma: float = 0.3
    """Reward weight of the pragmatic critic score (Eq. 7; paper Table 10: 0.3)."""
    delta: float = 1.0
    """Reward weight of the anchor similarity sim_k (Eq. 7; paper Table 10: 1.0)."""
    eta: float = 1.0
    """Weight of the anchor loss in L = L_RL + eta * L_anchor (Eq. 9; the paper gives no value)."""
    reward_baseline: Literal["none", "mean", "ema"] = "none"
    """REINFORCE baseline b of Eq. 8: none (paper), mean of the candidates, or a running EMA."""
    ema_decay: float = 0.9
    """Decay of the ema reward baseline."""
    actor_features: Literal["raw", "standardized"] = "raw"
    """The Actor's input c_k: raw [s, e, p, sim] (paper, Eq. 6) or each feature z-scored over
    the source's own candidates (standardized: compares candidates, beyond the paper)."""
    actor_lr: float = 1e-4
    """Adam learning rate of the Actor (paper Table 10: 1e-4)."""
    encoder_lr: float = 5e-5
    """Adam learning rate of the encoder g (paper Table 10: 5e-5)."""
    adaptor_lr: float = 1e-4
    """Adam learning rate of the Adaptor (paper Table 10: 1e-4)."""
    max_grad_norm: float = 1.0
    """Gradient-norm clip over all trainable parameters (paper App. C/D.1: 1.0)."""
    batch_size: int = 8
    """Sources per micro-batch and process (paper Table 9: 1 per GPU on 8 GPUs; 8 here = that
    global batch on one process; configs/retrieval_qwen3_8b.yaml sets 1)."""
    eval_batch_size: int = 64
    """Sources per forward in Arca's held-out passes (no gradient: larger than batch_size keeps
    the GPU busy; the Table 9 batch of 1 left it idle)."""
    steps: int = 120
    """Optimisation steps (paper Table 9: 120 for LazRetrieval, 10 STS22, 5 Belebele/MLQA)."""
    grad_accum: int = 1
    """Micro-batches per optimisation step."""
    mixed_precision: Literal["no", "fp16", "bf16"] = "no"
    """accelerate mixed precision."""
    train_encoder: bool = True
    """Train g (full fine-tune, or LoRA with arca.lora); false keeps g frozen."""
    lora: bool = False
    """Train g through peft LoRA adapters instead of all weights (paper App. C: g in full)."""
    lora_alpha: int = 16
    """LoRA alpha."""
    lora_dropout: float = 0.0
    """LoRA dropout."""
    online_translation: bool = False
    """Translate missing candidates with the pool during training instead of reading the store."""
    anchor_contrast: float = 0.0
    """Weight of an in-batch InfoNCE term added to L_anchor (0 = paper, Eq. 5 only). Eq. 5 has
    no negatives, so a constant Adaptor output minimises it; this term keeps E_lr specific."""
    anchor_tau: float = 0.05
    """Temperature of the anchor_contrast InfoNCE term."""
    use_llm_critic: bool = True
    """Table 5 "– LLM critic" when false: Arca trains and selects without the translation critic
    (§4.1.2): s, e, p read the neutral 5.5 in the Actor's c_k (Eq. 6) and in LaSR's gate, and
    the reward (Eq. 7) loses 0.1 (alpha s + beta e + gamma p)."""
    use_embedding_critic: bool = True
    """Table 5 "– Embeds critic" when false: Arca trains without the embedding critic, the
    anchoring path of §4.1 ("anchors feature paths to translation paths via a regression-style
    penalty"): no L_anchor (Eq. 5, and no anchor_contrast), so g and the Adaptor do not train in
    Arca (LaSR still trains the Adaptor end to end); sim_k reads 0 in c_k (Eq. 6) and in LaSR's
    gate, and the reward (Eq. 7) loses delta sim_k, so only the LLM critic guides the Actor."""
    log_every: int = 10
    """Write a log.jsonl row (loss, reward, ε̂1) every N steps."""
    save_every: int = 50
    """Write a resumable checkpoint every N steps."""
    seed: int = 0
    """Seed of Arca's initialisation, batches and Actor sampling."""

    def __post_init__(self) -> None:
        check(self.pool_size >= 1, "pool_size", "must be >= 1 (Table 9 uses 4 or 8)")
        check(
            self.pool_size <= MAX_POOL_SIZE,
            "pool_size",
            f"must be <= {MAX_POOL_SIZE} (S bins per text; Table 9 uses 4 or 8)",
        )
        check(
            1 <= self.adaptor_hidden <= MAX_ADAPTOR_HIDDEN,
            "adaptor_hidden",
            f"must be in [1, {MAX_ADAPTOR_HIDDEN}] (the Adaptor MLP's hidden width, App. D.1: 512)",
        )
        for k in ("actor_lr", "encoder_lr", "adaptor_lr"):
            check_lr(getattr(self, k), k)
        TrainingArguments.__post_init__(self)  # seed, max_grad_norm
        check_at_least(self, batch_size=1, eval_batch_size=1, steps=0, grad_accum=1)
        check(0 <= self.ema_decay < 1, "ema_decay", "must be in [0, 1)")
        LoRAArguments.__post_init__(self)  # lora_r
        check_at_least(self, eta=0, log_every=1, save_every=1)
        check(self.anchor_contrast >= 0, "anchor_contrast", "must be >= 0 (0 = paper)")
        check(self.anchor_tau > 0, "anchor_tau", "must be > 0")
        check(self.distill_ridge >= 0, "distill_ridge", "must be >= 0")
        if self.objective == "distill":
            check(
                self.anchor_target == "sentence",
                "anchor_target",
                "objective distill maps sentence vectors: use anchor_target: sentence",
            )


class ArcaRun(Protocol):
    """The parts of a run config Arca's engine reads (a ``RunConfig`` is one)."""

    output_dir: str
    seed: int
    models: ModelsConfig
    data: DataConfig
    translation: TranslationConfig
    arca: ArcaConfig


ARCA_UNSHAPING = ("arca.steps", "arca.save_every", "arca.report_to")
"""Arca fields left out of the fingerprint: the learning rates are constant and saving reads no
RNG, so a run resumed with more steps continues exactly (a checkpoint past ``arca.steps`` is
refused on resume)."""


def arca_fingerprint(cfg: ArcaRun) -> dict[str, object]:
    """The config values that shape Arca's training: ``models.*`` (less cache settings),
    ``data.*``, the candidate-deciding ``translation.*`` fields and ``arca.*`` (less
    :data:`ARCA_UNSHAPING`); no torch, so the CLI checks ``--resume`` before the models load."""
    sections = ("models", "data", "translation", "arca")
    return config_fingerprint("arca", cfg, sections, ARCA_UNSHAPING)
