"""LaSR's configuration (``lasr.*``) and the run view its engine reads."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Literal, Protocol

from arca.config import ArcaRun
from lira.checkpoint.fingerprint import config_fingerprint
from lira.config import TrainingArguments, check, check_at_least, check_lr, to_dict

MAX_FUSION_DIM = 8192
"""Largest ``lasr.fusion_dim`` accepted (as wide as the widest backbones; memory grows with its
square)."""
MAX_FUSION_LAYERS = 64
"""Largest ``lasr.fusion_layers`` accepted."""


@dataclass
class LaSRArchitecture:
    """What :class:`lasr.model.LiRAModel` needs to rebuild its net: the fusion head's shape and
    the streams it reads (saved apart from the training settings in a model folder's
    ``lira_config.json``, section ``architecture``; YAML keys ``lasr.*`` as the rest of LaSR)."""

    fusion_dim: int = 256
    """Width of the fusion transformer that computes the residual Δ over stream tokens."""
    fusion_layers: int = 2
    """Layers of the fusion transformer."""
    fusion_heads: int = 4
    """Attention heads of the fusion transformer."""
    dropout: float = 0.1
    """Dropout inside the fusion transformer."""
    gate_init: float = 1.0
    """Initial weight r of the multilingual half of ẑ = [n(E_en); r·n(E_lr)] (lasr/fusion.py)."""
    raw_view: bool = False
    """Mix the backbone on the untranslated text into the English half of a translated text with
    a learned weight (lasr/fusion.py; one more backbone pass per translated text). On when the
    backbone reads the target languages, off when the gate cannot learn that (docs/studies.md
    "The raw view")."""
    raw_g: bool = True
    """Give ẑ a third block, g's own sentence vector (beyond the paper): where g is the stronger
    encoder, mapping it into h's space alone loses what g knows (lasr/fusion.py)."""
    translated_g: bool = False
    """Give ẑ a fourth block, g on the chosen English text (= g's own vector for an untranslated
    text; beyond the paper): translate-test with g, so the fusion can include the plain ensemble
    g(x) + g(y*) that a practitioner would try instead (docs/validation.md; one more g pass per
    translated text)."""
    raw_h: bool = False
    """Give ẑ a fifth block, h on the untranslated text (beyond the paper): with a multilingual
    backbone, h alone is the baseline LiRA must beat, and the fusion can then include it (one
    more backbone pass per translated text)."""
    use_translations: bool = True
    """Table 5 "– Translations": no translations, the English stream encodes the source itself."""
    use_multilingual_encoder: bool = True
    """Table 5 "– Multi-enc": no g(x) stream, the fusion head sees the English stream only."""

    def __post_init__(self) -> None:
        check(self.fusion_heads >= 1, "fusion_heads", "must be >= 1 (attention heads)")
        check_at_least(self, fusion_dim=1)
        check(
            self.fusion_dim <= MAX_FUSION_DIM,
            "fusion_dim",
            f"must be <= {MAX_FUSION_DIM} (the fusion transformer's width, 256 by default; a "
            "wider one does not fit in memory)",
        )
        check(
            self.fusion_dim % self.fusion_heads == 0,
            "fusion_dim",
            f"must be a multiple of fusion_heads ({self.fusion_heads})",
        )
        check_at_least(self, fusion_layers=1)
        check(
            self.fusion_layers <= MAX_FUSION_LAYERS,
            "fusion_layers",
            f"must be <= {MAX_FUSION_LAYERS} (layers of the fusion transformer, 2 by default)",
        )
        check(0 <= self.dropout < 1, "dropout", "must be in [0, 1)")
        check(
            self.use_translations or self.use_multilingual_encoder,
            "use_translations",
            "at least one stream is needed: keep use_translations or use_multilingual_encoder",
        )


ARCHITECTURE_KEYS = tuple(f.name for f in fields(LaSRArchitecture))
"""The ``lasr.*`` keys a model folder saves as its architecture."""


TASK_DATA = {
    "retrieval": "needs retrieval data (queries, a corpus and qrels: data.format xquad_r, "
    "lazretrieval, beir or hf); set lasr.task: rank (or auto) to train on an STS file",
    "rank": "needs STS pairs: set data.sts_path to a pairs file (sentence1, sentence2, score), "
    "or lasr.task: retrieval (or auto)",
}
"""What data each ``lasr.task`` needs, and the fix (the message of its ConfigError)."""


@dataclass
class LaSRConfig(TrainingArguments, LaSRArchitecture):
    """LaSR fine-tuning (paper §4.2, App. D.4, Eq. 31-44)."""

    lr: float = 1e-4
    """AdamW learning rate of the fusion head (the paper gives no value)."""
    weight_decay: float = 0.0
    """AdamW weight decay of the fusion head (0 = Adam, as paper App. C uses for all models)."""
    batch_size: int = 16
    """Queries (retrieval) or pairs (rank) per micro-batch and process."""
    encode_batch_size: int = 64
    """Texts per forward of the frozen h and g while LaSR builds its stream banks (longest
    first, on the accelerator's device)."""
    steps: int = 200
    grad_accum: int = 1
    """Micro-batches per optimisation step."""
    mixed_precision: Literal["no", "fp16", "bf16"] = "no"
    """accelerate mixed precision."""
    task: Literal["auto", "rank", "retrieval"] = "auto"
    """auto: retrieval when queries/qrels are given, rank on STS pairs, both mixed if both."""
    corr_alpha: float = 0.5
    """α of the correlation loss α(1 − Pearson) + (1 − α)(1 − SoftSpearman) (Eq. 34; the paper
    gives no value)."""
    corr_tau: float = 0.1
    """Temperature of SoftSpearman's soft ranks (Eq. 32)."""
    corr_queue_size: int = 1024
    """CorrQueue length K: past (prediction, gold) pairs the rank loss sees (§4.2; no value given)."""
    corr_min: int = 32
    """N_min: items the CorrQueue must hold before the rank loss is applied (App. D.4; no value)."""
    doc_queue_size: int = 1024
    """DocQueue length K: cached document embeddings mined as negatives (§4.2; no value given)."""
    num_negatives: int = 16
    """M: negatives per query in the soft-nDCG list (in-batch + DocQueue; App. D.4, no value)."""
    ndcg_k: int = 10
    """k of the soft nDCG@k objective (Eq. 37-38; paper App. B: soft-nDCG@10)."""
    tau: float = 0.1
    """Temperature τ of the soft ranks (Eq. 36; paper App. D.4: τ ∈ [0.05, 0.2])."""
    tau_k: float = 0.5
    """Temperature τ_k of the soft top-k mask (Eq. 37; paper App. D.4: τ_k ≈ 0.5)."""
    safe_delta: float = 0.2
    """δ of the safe-negative gate (Eq. 40-41; paper App. D.4: δ ∈ [0.1, 0.3]): negatives within δ
    of the positive are down-weighted."""
    safe_beta: float = 0.03
    """β (sharpness) of the safe-negative gate (Eq. 41; paper App. D.4: β ∈ [0.01, 0.05])."""
    hinge_gamma: float = 0.05
    """Margin γ of the hinge term (Eq. 42; paper App. D.4: γ ≈ 0.05)."""
    mv_nu: float = 0.15
    """Target variance ν of the mean/variance regulariser (Eq. 43; paper App. D.4: ν ≈ 0.15)."""
    lambda_h: float = 0.1
    """Weight λ_h of the hinge term (Eq. 44; the paper gives no value)."""
    lambda_r: float = 0.01
    """Weight λ_r of the mean/variance regulariser (Eq. 44; the paper gives no value)."""
    score_scale: float = 1.0
    """Scale applied to cosine scores before the soft-nDCG loss (``scale_free: false``)."""
    scale_free: bool = False
    """Train the gate on rankings only: each query's candidate scores are standardised (std
    ``score_std``) and queued documents get the current gate r(x). False (the paper's cosine
    scores): a shrinking r sharpens every score, and the gate learns that scale instead of a
    mix (docs/studies.md "The gate and the score scale"). Eq. 43 is inert when true."""
    score_std: float = 0.1
    """Standard deviation of each query's candidate scores under ``scale_free`` (τ's unit)."""
    ema_decay: float = 0.999
    """Decay of the EMA copy of the trained weights that is saved and evaluated."""
    fusion_init: Literal["validation", "paper"] = "validation"
    """Start the block weights at the best fixed score fusion on the validation split
    (``data.dev_fraction``; LiRA then equals that fusion at step 0), or at the paper reading
    (English queries: backbone only; also used when there is no validation split)."""
    fusion_grid: list[float] = field(default_factory=lambda: [0.0, 0.125, 0.25, 0.5, 1, 2, 4, 8])
    """Score weights tried per block by the validation fit (every combination, 0 = block off)."""
    fusion_rule: Literal["cv", "in_sample"] = "cv"
    """How the validation fit picks each query type's weights: cv keeps the grid's best only
    when it beats the best single block out of fold (paired 95% lower bound > 0), else that
    block; in_sample takes the grid's best on every validation query (overfits ~83 questions)."""
    fusion_folds: int = 5
    """Folds by question of the cv rule (foreign queries also leave one language out)."""
    select_on_validation: bool = True
    """Keep the best of step 0 and every ``eval_every`` EMA evaluation on the validation split
    (mean nDCG@k over its languages; English never below the backbone), not the last step."""
    learn_temperature: bool = True
    """Learn the ranking loss's inverse temperature (a scalar of the head) instead of letting
    the block weights act as one; false = fixed ``score_scale`` / ``score_std``."""
    negatives: Literal["queue", "corpus"] = "queue"
    """Where hard negatives come from: the DocQueue (paper §4.2), or the whole training corpus
    scored by the current model every step (exact, App. D.4's re-scoring; needs the corpus's
    streams in memory)."""
    eval_every: int = 0
    """Evaluate the EMA head on the validation split every N steps (0 = only at the end)."""
    train_adaptor: bool = True
    """End to end (App. D.1: "the LaSR module is trained end-to-end"): LaSR's objectives also
    train Arca's Adaptor; false trains the fusion head alone on frozen streams."""
    train_encoder: bool = False
    """Also train g in LaSR when it is trainable (full or LoRA; runs g every step, costly)."""
    adaptor_lr: float = 1e-4
    """Learning rate of the Adaptor (and g) in LaSR when they train."""
    gate_lr: float = 1e-2
    """Learning rate of the fusion gate r(x): a few weights that must move by units (log r),
    which Adam at the head's rate (~lr per step) cannot do in a few hundred steps."""
    safe_negatives: bool = True
    """Down-weight negatives scoring within safe_delta of the positive (Eq. 41); false keeps
    every mined negative at full weight."""
    queue_rescore: bool = False
    """false (paper §4.2): queued documents are stop-grad cached embeddings; true: re-score
    them with the current model (mining without grad, negatives with grad; slower)."""
    use_queue: bool = True
    """Table 5 "– FIFO queue": no CorrQueue / DocQueue (in-batch only)."""
    log_every: int = 10
    """Write a log.jsonl row every N steps."""
    save_every: int = 100
    seed: int = 0
    """Seed of LaSR's initialisation and batches."""

    def __post_init__(self) -> None:
        for k in ("lr", "adaptor_lr", "gate_lr"):
            check_lr(getattr(self, k), k)
        TrainingArguments.__post_init__(self)  # seed, max_grad_norm
        LaSRArchitecture.__post_init__(self)
        check_at_least(self, weight_decay=0, grad_accum=1, log_every=1)
        check(self.save_every >= 1, "save_every", "must be >= 1 (steps between checkpoints)")
        check_at_least(self, corr_min=0, batch_size=1, encode_batch_size=1, steps=0)
        check(0 <= self.corr_alpha <= 1, "corr_alpha", "must be in [0, 1]")
        for k in ("corr_tau", "tau", "tau_k", "safe_beta"):
            check(getattr(self, k) > 0, k, "temperatures must be > 0")
        check_at_least(self, corr_queue_size=0, doc_queue_size=0)
        check(self.score_std > 0, "score_std", "must be > 0")
        check_at_least(self, num_negatives=1, ndcg_k=1)
        check(0 <= self.ema_decay < 1, "ema_decay", "must be in [0, 1)")
        check(self.eval_every >= 0, "eval_every", "must be >= 0 (0 = only at the end)")
        check(
            any(w > 0 for w in self.fusion_grid) and all(w >= 0 for w in self.fusion_grid),
            "fusion_grid",
            "needs weights >= 0, at least one > 0",
        )
        check(self.fusion_folds >= 2, "fusion_folds", "must be >= 2 (folds by question)")
        check(
            not (self.translated_g and self.train_encoder),
            "translated_g",
            "g's view of each translation is computed once, before LaSR trains, and "
            "lasr.train_encoder changes g: set lasr.translated_g false (or lasr.train_encoder "
            "false)",
        )


def split_lasr(
    cfg: LaSRArchitecture, record: dict[str, object]
) -> tuple[LaSRArchitecture, dict[str, object]]:
    """``cfg``'s architecture and its training settings (a :class:`LaSRConfig`'s own fields;
    ``record`` for a bare architecture), which a model folder saves apart."""
    d = to_dict(cfg)
    architecture = LaSRArchitecture(**{k: d.pop(k) for k in ARCHITECTURE_KEYS})
    return architecture, d or dict(record)


class LaSRRun(ArcaRun, Protocol):
    """The parts of a run config LaSR's engine reads (a ``RunConfig`` is one)."""

    lasr: LaSRConfig


LASR_UNSHAPING = ("lasr.steps", "lasr.save_every", "lasr.log_every", "lasr.report_to")
"""LaSR fields left out of the fingerprint: the learning rate is constant and saving / logging
read no RNG, so a run resumed with more steps continues exactly (a checkpoint past
``lasr.steps`` is refused on resume)."""


def lasr_fingerprint(cfg: LaSRRun) -> dict[str, object]:
    """The config values that shape LaSR's training: ``models.*`` (less cache settings),
    ``data.*``, the candidate-deciding ``translation.*`` fields, ``arca.*`` (LaSR starts from
    Arca's model) and ``lasr.*`` (less :data:`LASR_UNSHAPING`); no torch, so the CLI checks
    ``--resume`` before the models load."""
    sections = ("models", "data", "translation", "arca", "lasr")
    return config_fingerprint("lasr", cfg, sections, LASR_UNSHAPING)
