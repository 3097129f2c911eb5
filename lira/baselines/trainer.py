"""One contrastive trainer for every baseline (``lira baseline CONFIG [--methods ...]``).

Every method fine-tunes the same backbone (``lira.models.load_backbone``; full fine-tuning or
LoRA via peft, merged back before saving) on the same training split. Each method trains with
its paper's recipe (``cfg.baselines.<method>_*``: AdamW rate, batch size, epochs, schedule and
warm-up, weight decay, temperature); ``cfg.baselines.steps`` / ``batch_size`` / ``lr`` > 0 is a
shared budget that overrides them for every method. The recipe in force is logged and written
to ``<output_dir>/baselines/summary.json``.

- ``infonce`` (CLEAR's baseline, paper 000 §4.2): target query -> English gold sentence,
  in-batch + the same hard negatives as CLEAR, CLEAR's recipe.
- ``clear``: :class:`~lira.baselines.clear.ClearLoss` on (q_en, p_en, p_en^-, q_l, q_l^-); 5 hard
  negatives sampled from ranks 30-100 of the initial model's retrieval, for passages (anchor
  q_en) and for same-language target queries (anchor: the gold passage).
- ``lancer`` (paper 002): English InfoNCE (q_en -> p_en, one row per question, with CLEAR's
  mined passage negatives where the paper has MS MARCO's triples) + λ·L_C on a
  multilingual batch of ``lancer_per_language`` non-parallel sentences per language (English +
  training languages): the training questions' gold sentences, each parallel group dealt to
  one language (:func:`lancer_texts`).
- ``jsd`` (paper 003): :class:`~lira.baselines.jsd.JSDInfoNCELoss` on (q_en, p_en, p_tgt), with
  p_tgt the gold sentence in the training language: L_JSD(p_en, p_tgt) + L_NCE(anchor p_tgt,
  positive q_en, in-batch English queries).
- ``merging`` (paper 001): the D(l en en) fine-tune (every training language; App. B.2
  negatives mined from ranks 50-300 with its filters; sentence-transformers'
  CachedGISTEmbedLoss with the frozen initial backbone as guide) weight-averaged with its
  partner, ``merging_partner``: the base model (default; the paper merges a CLIR fine-tune with
  the best mono-lingual model, the base model for 3 of its 4 backbones) or a D(en en en)
  fine-tune. Trained parts are kept under ``merging-parts/``.

Departures, where a paper's setting cannot be had here or is not stated: the retriever that
mines negatives and paper 001's GIST guide are the initial backbone (the papers use each
model itself for CLEAR, NV-Embed-v2 and bge-m3 for paper 001, not available offline); paper
001's sixth, LLM-generated negative has no counterpart; one model is trained on all training
languages with every question in each (CLEAR's multilingual expansion uses non-overlapping
questions per language); LANCER scores with cosine / τ (its retrievers score unnormalised
dot products, ours output unit vectors); paper 003's learning rate is per backbone (App. C),
the default is its mE5-large value; the maximum length is ``models.backbone_max_length`` for
every method (CLEAR: 512).

The training examples come from ``lira.data.splits.load_splits(cfg.data)``: ``train_parallel``
(questions in English and the training languages, aligned by question id),
``train_retrieval`` (training-language queries ``<qid>@<lang>`` -> English gold sentence) and
``dataset`` (XQuAD-R: the gold sentence of a question in every language).

The loop is a direct accelerate loop (CLEAR, LANCER and JSD need several encodings per step
and extra batches, which a plain loop states more directly). Each method's loss is measured
before and after training on the same fixed batches in eval mode. Checkpoints are HF folders
(config + safetensors + tokenizer + ``lira_baseline.json`` holding pooling and prompts),
written atomically and loadable with :func:`load_baseline`; each also holds the run fingerprint
(:func:`baseline_fingerprint`): ``--resume`` skips a finished method only when its fingerprint
matches the config and refuses otherwise. A step whose loss or gradient norm is not finite is
skipped and counted (``nonfinite_steps`` in ``summary.json``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import random
import shutil
import time
from dataclasses import asdict, dataclass, field
from operator import attrgetter
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from lira.baselines.clear import ClearLoss, sample_hard_negatives
from lira.baselines.composition import (
    build_composition,
    gist_features,
    gist_loss,
    mine_filtered_negatives,
)
from lira.baselines.infonce import info_nce
from lira.baselines.jsd import JSDInfoNCELoss
from lira.baselines.lancer import (
    correlation_penalty,
    non_parallel_texts,
    stratified_language_batch,
)
from lira.baselines.merging import average_state_dicts
from lira.checkpoint import CheckpointError, atomic_dir, clean_stale, step_dirs, write_json
from lira.config import BaselinesConfig, ModelsConfig, RunConfig
from lira.data.types import ParallelData, Record, RetrievalData
from lira.data.xquad_r import XQuADR

log = logging.getLogger(__name__)

META_FILE = "lira_baseline.json"
METHODS = ("infonce", "clear", "lancer", "jsd", "merging")
by_id = attrgetter("id")
RECIPE_OF = {"infonce": "clear", "clear": "clear", "lancer": "lancer", "jsd": "jsd",
             "merging": "merging", "gist": "merging"}  # fmt: skip
"""The config prefix whose recipe a trainer method uses (InfoNCE is CLEAR's own baseline)."""


# ------------------------------------------------------------------------- run fingerprints
# Shared by the Arca, LaSR and baseline trainers (arca/lasr import them from here: lira is the
# lowest layer the three have in common).
FINGERPRINT_FILE = "run_fingerprint.json"
"""Written into every checkpoint: the config values that shaped the training it holds."""
FINGERPRINT_FORMAT = "lira-fingerprint/1"
_RUNTIME_KEYS = frozenset({"base_url", "api_key_env", "batch_size", "max_concurrency",
                           "timeout_s", "max_retries", "tensor_parallel_size"})  # fmt: skip
"""Translator / critic fields that change how fast candidates come, not which ones."""


def _flatten(obj: Any, prefix: str, out: dict[str, Any]) -> dict[str, Any]:
    if isinstance(obj, dict):
        for k, v in obj.items():
            _flatten(v, f"{prefix}.{k}" if prefix else str(k), out)
    elif isinstance(obj, (list, tuple)) and any(isinstance(v, dict) for v in obj):
        for i, v in enumerate(obj):
            _flatten(v, f"{prefix}[{i}]", out)
    else:
        out[prefix] = list(obj) if isinstance(obj, tuple) else obj
    return out


def run_fingerprint(stage: str, sections: dict[str, Any], skip: Any = ()) -> dict[str, Any]:
    """``{"format", "stage", "hash", "config"}`` of the config values that shape ``stage``.

    ``sections`` maps a name to a config dataclass or mapping; ``config`` is the flattened
    ``{dotted key: value}`` (minus the dotted keys in ``skip``), ``hash`` a short digest of it.
    """
    flat: dict[str, Any] = {}
    for name, sec in sections.items():
        _flatten(asdict(sec) if hasattr(sec, "__dataclass_fields__") else sec, name, flat)
    flat = {k: v for k, v in sorted(flat.items()) if k not in set(skip)}
    blob = json.dumps(flat, sort_keys=True, default=str)
    digest = hashlib.sha256(blob.encode()).hexdigest()[:16]
    return {"format": FINGERPRINT_FORMAT, "stage": stage, "hash": digest, "config": flat}


def models_fields(cfg: RunConfig) -> dict[str, Any]:
    """``models.*`` without the fields that only say where models are cached."""
    d = asdict(cfg.models)
    for k in ("cache_dir", "encoder_cache"):
        d.pop(k, None)
    return d


def translation_fields(cfg: RunConfig) -> dict[str, Any]:
    """The ``translation.*`` values that decide the training candidates and their scores: the
    active translators (pass@k) and the critic, without endpoints, keys and batch sizes."""
    tc = cfg.translation

    def plain(obj: Any) -> dict[str, Any]:
        return {k: v for k, v in asdict(obj).items() if k not in _RUNTIME_KEYS}

    return {
        "pass_at_k": tc.pass_at_k,
        "num_candidates": tc.num_candidates,
        "store": tc.store,
        "source_max_chars": tc.source_max_chars,
        "active": [plain(t) for t in tc.active_translators()],
        "critic": plain(tc.critic),
    }


def write_fingerprint(folder: str | Path, fingerprint: dict[str, Any]) -> None:
    """Store ``fingerprint`` in a checkpoint folder being written (inside ``atomic_dir``)."""
    (Path(folder) / FINGERPRINT_FILE).write_text(json.dumps(fingerprint, indent=1),
                                                 encoding="utf-8")  # fmt: skip


def read_fingerprint(folder: str | Path) -> dict[str, Any] | None:
    """The fingerprint stored in a checkpoint folder; None when absent or unreadable."""
    path = Path(folder) / FINGERPRINT_FILE
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, UnicodeDecodeError):
        return None
    ok = isinstance(data, dict) and isinstance(data.get("config"), dict) and "hash" in data
    return data if ok else None


def fingerprint_changes(old: dict[str, Any], new: dict[str, Any], limit: int = 6) -> str:
    """``key: old -> new`` for the config values that differ (at most ``limit`` named)."""
    a, b = old.get("config", {}), new.get("config", {})
    keys = sorted(k for k in set(a) | set(b) if a.get(k, "<unset>") != b.get(k, "<unset>"))
    parts = [f"{k}: {a.get(k, '<unset>')!r} -> {b.get(k, '<unset>')!r}" for k in keys[:limit]]
    if len(keys) > limit:
        parts.append(f"and {len(keys) - limit} more")
    return "; ".join(parts) or "a value outside the compared keys"


def check_fingerprint(folder: str | Path, fingerprint: dict[str, Any], what: str) -> None:
    """Refuse (``CheckpointError``) to resume ``folder`` unless it was written with the same
    training config as ``fingerprint``; the message names the changed keys and the fix."""
    folder = Path(folder)
    saved = read_fingerprint(folder)
    fix = (
        "run without --resume to start over (the old checkpoints are then removed), or use a "
        f"new --output-dir, or delete {folder.parent}"
    )
    if saved is None:
        raise CheckpointError(
            f"cannot resume {what} from {folder}: it has no readable {FINGERPRINT_FILE} (written "
            "by an older LiRA version or another program), so it cannot be checked against this "
            f"config; {fix}"
        )
    if saved["hash"] != fingerprint["hash"]:
        raise CheckpointError(
            f"cannot resume {what} from {folder}: it was trained with another config "
            f"({fingerprint_changes(saved, fingerprint)}); resuming would mix two runs. To "
            f"continue the old run, restore its config; otherwise {fix}"
        )


def clear_previous_run(root: str | Path, fingerprint: dict[str, Any], what: str) -> list[Path]:
    """Remove the ``step-*`` folders a previous run left under ``root`` before a fresh run.

    A fresh run starts at step 0: older checkpoints (of this config or another) would otherwise
    outrank its own when pruning and be picked up by a later ``--resume``. Logged.
    """
    root = Path(root)
    clean_stale(root)
    old = step_dirs(root)
    if not old:
        return []
    same = sum(1 for p in old if (read_fingerprint(p) or {}).get("hash") == fingerprint["hash"])
    for p in old:
        shutil.rmtree(p, ignore_errors=True)
    log.warning(
        "%s: fresh run (no --resume): removed %d checkpoint(s) of a previous run from %s "
        "(%d with this config, %d with another or none); pass --resume to continue a run",
        what, len(old), root, same, len(old) - same,
    )  # fmt: skip
    return old


def all_finite(*values: Any) -> bool:
    """True when every value (tensor, number or None = finite) is finite."""
    for v in values:
        if v is None:
            continue
        t = v.detach() if isinstance(v, Tensor) else torch.as_tensor(v, dtype=torch.float64)
        if not bool(torch.isfinite(t).all()):
            return False
    return True


# ----------------------------------------------------------------------------------- data
@dataclass
class TrainExample:
    """One training row: a question in English and a training language, its gold sentences."""

    qid: str
    lang: str
    q_en: str
    q_tgt: str
    pos_id: str
    pos_text: str
    p_tgt: str = ""
    """The gold sentence in ``lang`` (paper 003's p_tgt)."""
    p_hn: list[int] = field(default_factory=list)
    """Corpus indices of CLEAR's hard-negative passages."""
    q_hn: list[int] = field(default_factory=list)
    """Example indices whose q_tgt are CLEAR's hard-negative target queries."""
    gist_hn: list[int] = field(default_factory=list)
    """Corpus indices of paper 001's mined English negatives."""


def build_examples(
    parallel: ParallelData, retrieval: RetrievalData, dataset: XQuADR | None = None
) -> list[TrainExample]:
    """Join target queries (``<qid>@<lang>``) with their English question and gold sentences."""
    if "en" not in parallel.texts:
        raise ValueError(
            f"train_parallel must hold English questions; has {sorted(parallel.texts)}"
        )
    row = {qid: i for i, qid in enumerate(parallel.ids)}
    docs = {r.id: r.text for r in retrieval.corpus}
    out = []
    for q in retrieval.queries:
        if q.lang == "en":
            continue
        qid = q.id.rsplit("@", 1)[0]
        gold = [d for d, rel in retrieval.qrels.get(q.id, {}).items() if rel > 0 and d in docs]
        if qid not in row or not gold:
            continue
        pos = sorted(gold)[0]
        p_tgt = dataset.gold_sentence(q.lang, qid).text if dataset is not None else ""
        out.append(
            TrainExample(qid, q.lang, parallel.texts["en"][row[qid]], q.text, pos, docs[pos], p_tgt)
        )
    if len(out) < 2:
        raise ValueError(
            f"only {len(out)} training examples could be joined from train_retrieval and "
            "train_parallel (query ids must be <qid>@<lang> with qrels into the corpus)"
        )
    return out


def english_rows(examples: list[TrainExample]) -> list[int]:
    """The first example of each question: one row per English (q_en, p_en) pair."""
    first = {e.qid: i for i, e in reversed(list(enumerate(examples)))}
    return sorted(first.values())


def lancer_texts(
    dataset: XQuADR, langs: list[str], examples: list[TrainExample], seed: int
) -> dict[str, list[str]]:
    """Non-parallel passages per language for LANCER's L_C batches (paper 002 §4.1: mC4 text).

    The training questions' gold sentences, grouped by the English gold sentence (its
    translations are one group); each group is dealt to one language, so no content is in two
    languages' pools.
    """
    records: dict[str, dict[tuple[str, str], Record]] = {lang: {} for lang in langs}
    for qid in dict.fromkeys(e.qid for e in examples):
        group = dataset.gold_sentence("en", qid).id
        for lang in langs:
            text = dataset.gold_sentence(lang, qid).text
            records[lang].setdefault((group, text), Record(group, text, lang))
    return non_parallel_texts({k: list(v.values()) for k, v in records.items()}, by_id, seed)


@torch.no_grad()
def mine_clear_negatives(
    backbone: nn.Module, examples: list[TrainExample], corpus: list[Any], cfg: BaselinesConfig,
    bs: int = 64,
) -> None:  # fmt: skip
    """Fill ``p_hn`` (passages) and ``q_hn`` (same-language target queries), CLEAR §4.1-4.2."""
    k, ranks = cfg.clear_negatives, tuple(cfg.clear_negative_ranks)
    if k == 0:
        return
    gen = torch.Generator().manual_seed(cfg.seed)
    corpus_ids = [r.id for r in corpus]
    ids = {d: i for i, d in enumerate(dict.fromkeys(corpus_ids + [e.pos_id for e in examples]))}
    q = torch.as_tensor(backbone.encode([e.q_en for e in examples], kind="query", batch_size=bs))
    p = torch.as_tensor(backbone.encode([r.text for r in corpus], kind="document", batch_size=bs))
    pos = torch.tensor([ids[e.pos_id] for e in examples])
    pool_ids = torch.tensor([ids[d] for d in corpus_ids])
    rows = sample_hard_negatives(q, p, pos, pool_ids, k, ranks, gen, "CLEAR passage negatives")
    for e, row in zip(examples, rows.tolist()):
        e.p_hn = row
    p_gold = torch.as_tensor(
        backbone.encode([e.pos_text for e in examples], kind="document", batch_size=bs)
    )
    qt = torch.as_tensor(backbone.encode([e.q_tgt for e in examples], kind="query", batch_size=bs))
    for lang in sorted({e.lang for e in examples}):
        idx = [i for i, e in enumerate(examples) if e.lang == lang]
        sel = torch.tensor(idx)
        usable = int((pos[sel].view(1, -1) != pos[sel].view(-1, 1)).sum(1).min())
        k_q = min(k, usable)
        if k_q < k:
            log.info("CLEAR %s query negatives: %d per example (only %d usable)", lang, k_q, usable)
        rows = sample_hard_negatives(
            p_gold[sel],
            qt[sel],
            pos[sel],
            pos[sel],
            k_q,
            ranks,
            gen,
            f"CLEAR {lang} query negatives",
        )
        for i, r in zip(idx, rows.tolist()):
            examples[i].q_hn = [idx[j] for j in r]


@torch.no_grad()
def mine_composition_negatives(
    backbone: nn.Module, examples: list[TrainExample], corpus: list[Any], cfg: BaselinesConfig,
    bs: int = 64,
) -> None:  # fmt: skip
    """Fill ``gist_hn``: paper 001's English negatives, mined once per English question."""
    k = cfg.merging_negatives
    rows = english_rows(examples)
    corpus_ids = [r.id for r in corpus]
    ids = {d: i for i, d in enumerate(dict.fromkeys(corpus_ids + [e.pos_id for e in examples]))}
    ex = [examples[i] for i in rows]
    q = torch.as_tensor(backbone.encode([e.q_en for e in ex], kind="query", batch_size=bs))
    p = torch.as_tensor(backbone.encode([r.text for r in corpus], kind="document", batch_size=bs))
    gold = torch.as_tensor(
        backbone.encode([e.pos_text for e in ex], kind="document", batch_size=bs)
    )
    mined = mine_filtered_negatives(
        q, p, gold, torch.tensor([ids[e.pos_id] for e in ex]),
        torch.tensor([ids[d] for d in corpus_ids]), k, tuple(cfg.merging_negative_ranks),
        cfg.merging_max_sim, cfg.merging_relative_margin,
    ).tolist()  # fmt: skip
    by_qid = {e.qid: m for e, m in zip(ex, mined)}
    for e in examples:
        e.gist_hn = list(by_qid[e.qid])


# -------------------------------------------------------------------------------- recipes
@dataclass(frozen=True)
class Recipe:
    """One method's optimisation recipe after the shared budget is applied."""

    lr: float
    batch_size: int
    steps: int
    scheduler: str
    warmup: float
    weight_decay: float
    beta2: float
    tau: float
    shared: tuple[str, ...] = ()
    """The fields the shared budget set (the others are the paper's)."""


def recipe(cfg: BaselinesConfig, method: str, n_rows: int) -> Recipe:
    """The paper's recipe of ``method`` for ``n_rows`` training rows, shared budget applied."""
    key = RECIPE_OF[method]
    fields = ("lr", "batch_size", "epochs", "scheduler", "warmup", "weight_decay", "beta2", "tau")
    paper = {f: getattr(cfg, f"{key}_{f}") for f in fields}
    shared = tuple(f for f in ("steps", "batch_size", "lr") if getattr(cfg, f))
    batch = min(cfg.batch_size or paper["batch_size"], n_rows)
    steps = cfg.steps or math.ceil(paper["epochs"] * n_rows / batch)
    return Recipe(cfg.lr or paper["lr"], batch, steps, paper["scheduler"], paper["warmup"],
                  paper["weight_decay"], paper["beta2"], paper["tau"], shared)  # fmt: skip


def make_scheduler(opt: torch.optim.Optimizer, r: Recipe) -> Any:
    """The recipe's learning-rate schedule (warm-up steps = ceil(ratio · steps))."""
    from transformers import get_scheduler

    warm = math.ceil(r.warmup * r.steps)
    name = "constant_with_warmup" if r.scheduler == "constant" else r.scheduler
    return get_scheduler(name, opt, num_warmup_steps=warm, num_training_steps=max(r.steps, 1))


# -------------------------------------------------------------------------------- trainer
class ContrastiveTrainer:
    """Fine-tunes a backbone with one baseline objective and its paper's recipe.

    ``method`` is one of infonce / clear / lancer / jsd / gist (the loss of one merging part,
    which also needs ``composition`` examples and a frozen ``guide``).
    """

    def __init__(
        self,
        backbone: nn.Module,
        cfg: BaselinesConfig,
        method: str,
        examples: list[TrainExample],
        corpus: list[Any],
        multilingual: dict[str, list[str]] | None = None,
        composition: list[Any] | None = None,
        guide: nn.Module | None = None,
    ) -> None:
        from accelerate import Accelerator

        if method not in RECIPE_OF or method == "merging":
            raise ValueError(f"unknown method '{method}'; choose from {(*METHODS[:-1], 'gist')}")
        if method == "gist" and (composition is None or guide is None):
            raise ValueError("method 'gist' needs composition examples and a guide model")
        if method == "lancer" and not multilingual:
            raise ValueError("method 'lancer' needs multilingual texts for its L_C batches")
        if method == "jsd" and not all(e.p_tgt for e in examples):
            raise ValueError("method 'jsd' needs each example's target-language gold (p_tgt)")
        self.cfg, self.method = cfg, method
        self.examples, self.corpus = examples, corpus
        self.multilingual = multilingual or {}
        self.composition, self.guide = composition, guide
        self.rows = english_rows(examples) if method == "lancer" else None
        ids = dict.fromkeys([r.id for r in corpus] + [e.pos_id for e in examples])
        self.doc_index = {d: i for i, d in enumerate(ids)}
        self.corpus_key = [self.doc_index[r.id] for r in corpus]
        self.recipe = recipe(cfg, method, self.n_rows())
        r = self.recipe
        log.info("%s recipe: %s", method, json.dumps(asdict(r)))
        self.clear = ClearLoss(r.tau, tuple(cfg.clear_lambdas), reverse=cfg.clear_reverse)
        self.jsd = JSDInfoNCELoss(r.tau, cfg.jsd_weight, cfg.jsd_eps)
        self.accelerator = Accelerator()
        self.backbone = backbone
        if cfg.lora:
            self._apply_lora()
        params = [p for p in backbone.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=r.lr, betas=(0.9, r.beta2), weight_decay=r.weight_decay)
        self.model, self.opt = self.accelerator.prepare(backbone, opt)
        self.scheduler = make_scheduler(self.opt, r)
        self.gist = None
        if self.guide is not None:
            self.guide.to(self.accelerator.device).eval().requires_grad_(False)
            self.gist = gist_loss(self.model, self.guide, backbone.tokenizer, backbone.max_length,
                                  r.tau, cfg.merging_mini_batch)  # fmt: skip
        self.rng = random.Random(cfg.seed)
        self.history: list[float] = []
        self.nonfinite_steps = 0
        """Steps skipped because the loss or the gradient norm was not finite."""

    def _apply_lora(self) -> None:
        from peft import LoraConfig, get_peft_model

        lc = LoraConfig(
            r=self.cfg.lora_r, lora_alpha=2 * self.cfg.lora_r, target_modules="all-linear"
        )
        self.backbone.model = get_peft_model(self.backbone.model, lc)

    def finish(self) -> nn.Module:
        """The trained backbone (LoRA weights merged into the base model)."""
        bb = self.accelerator.unwrap_model(self.model)
        if self.cfg.lora and hasattr(bb.model, "merge_and_unload"):
            bb.model = bb.model.merge_and_unload()
        return bb.eval()

    # ------------------------------------------------------------------ batches and losses
    def n_rows(self) -> int:
        """Rows the batches are drawn from."""
        if self.method == "gist":
            assert self.composition is not None
            return len(self.composition)
        return len(self.rows) if self.rows is not None else len(self.examples)

    def draw(self, rng: random.Random) -> dict[str, Any]:
        """One batch: row indices (distinct) plus, for LANCER, a multilingual batch."""
        picks = rng.sample(range(self.n_rows()), self.recipe.batch_size)
        batch: dict[str, Any] = {"rows": [self.rows[i] for i in picks] if self.rows else picks}
        if self.method == "lancer":
            texts, lang_ids = stratified_language_batch(
                self.multilingual, self.cfg.lancer_per_language, rng
            )
            batch["ml_texts"], batch["ml_ids"] = texts, torch.tensor(lang_ids)
        return batch

    def _enc(self, texts: list[str], kind: str) -> Tensor:
        return self.model(texts, kind=kind)  # [N, d]

    def loss(self, batch: dict[str, Any]) -> Tensor:
        """The method's loss on one batch."""
        if self.method == "gist":
            return self._gist_loss(batch["rows"])
        ex = [self.examples[i] for i in batch["rows"]]
        b, dev = len(ex), self.accelerator.device
        ids = torch.tensor([self.doc_index[e.pos_id] for e in ex], device=dev)
        if self.method == "jsd":  # paper 003: (q_en, p_en, p_tgt), in-batch negatives only
            p = self._enc([e.pos_text for e in ex] + [e.p_tgt for e in ex], "document")
            q_en = self._enc([e.q_en for e in ex], "query")
            return self.jsd(p[:b], p[b:], q_en, ids)
        k = min(len(e.p_hn) for e in ex)
        m = min(len(e.q_hn) for e in ex)
        p_hn_ids = torch.tensor(
            [[self.corpus_key[j] for j in e.p_hn[:k]] for e in ex], device=dev
        ).view(b, k)
        docs = [e.pos_text for e in ex] + [self.corpus[j].text for e in ex for j in e.p_hn[:k]]
        p_all = self._enc(docs, "document")  # [B(1+K), d]
        p_pos, p_hn = p_all[:b], p_all[b:].view(b, k, p_all.shape[-1])
        if self.method == "infonce":
            q_l = self._enc([e.q_tgt for e in ex], "query")
            return info_nce(q_l, p_pos, p_hn, self.recipe.tau, ids, p_hn_ids)
        if self.method == "lancer":
            q_en = self._enc([e.q_en for e in ex], "query")
            l_r = info_nce(q_en, p_pos, p_hn, self.recipe.tau, ids, p_hn_ids)
            x = self._enc(batch["ml_texts"], "document")  # [N, d]: passages, as mC4 in §4.1
            pen = correlation_penalty(x, batch["ml_ids"].to(dev), len(self.multilingual))
            return l_r + self.cfg.lancer_lambda * pen
        q_hn_ex = [[self.examples[j] for j in e.q_hn[:m]] for e in ex]
        queries = (
            [e.q_en for e in ex] + [e.q_tgt for e in ex] + [x.q_tgt for r in q_hn_ex for x in r]
        )
        q_all = self._enc(queries, "query")
        q_en, q_l, q_hn = q_all[:b], q_all[b : 2 * b], q_all[2 * b :].view(b, m, q_all.shape[-1])
        q_hn_ids = torch.tensor(
            [[self.doc_index[x.pos_id] for x in r] for r in q_hn_ex], device=dev
        ).view(b, m)
        return self.clear(q_en, p_pos, p_hn, q_l, q_hn, ids, p_hn_ids, q_hn_ids)

    def _gist_loss(self, rows: list[int]) -> Tensor:
        assert self.composition is not None and self.gist is not None
        ex = [self.composition[i] for i in rows]
        k = min(len(e.negatives) for e in ex)
        columns = [[e.query for e in ex], [e.positive for e in ex]]
        columns += [[e.negatives[j] for e in ex] for j in range(k)]
        kinds = ["query"] + ["document"] * (1 + k)
        return self.gist(gist_features(self.gist, columns, kinds, self.accelerator.device), None)

    @torch.no_grad()
    def measure(self, batches: list[dict[str, Any]]) -> float:
        """Mean loss over fixed batches in eval mode (no dropout, no gradient)."""
        was = self.model.training
        self.model.eval()
        vals = [float(self.loss(bt)) for bt in batches]
        self.model.train(was)
        return sum(vals) / len(vals)

    def train(self, steps: int | None = None) -> list[float]:
        """Run ``steps`` optimisation steps (default: the recipe's); returns the losses.

        A step whose loss or gradient norm is not finite (on any process) is skipped and
        counted in ``nonfinite_steps``: no NaN/inf reaches the weights or the optimizer state.
        The schedule still advances (it is a function of the step).
        """
        steps = self.recipe.steps if steps is None else steps
        self.model.train()
        for step in range(steps):
            loss = self.loss(self.draw(self.rng))
            self.opt.zero_grad(set_to_none=True)
            self.accelerator.backward(loss)
            norm = self.accelerator.clip_grad_norm_(self.model.parameters(), 1.0)
            if self._finite_everywhere(loss, norm):
                self.opt.step()
            else:
                self.nonfinite_steps += 1
                self.opt.zero_grad(set_to_none=True)
                log.warning("%s step %d: non-finite loss or gradient norm, update skipped",
                            self.method, step + 1)  # fmt: skip
            self.scheduler.step()
            self.history.append(float(loss.detach()))
            if step % 10 == 0 or step == steps - 1:
                log.info("%s step %d/%d loss %.4f", self.method, step + 1, steps, self.history[-1])
        if self.nonfinite_steps:
            log.warning("%s: %d of %d steps skipped (non-finite loss or gradient)",
                        self.method, self.nonfinite_steps, steps)  # fmt: skip
        return self.history

    def _finite_everywhere(self, loss: Tensor, norm: Any) -> bool:
        ok = all_finite(loss, norm)
        if self.accelerator.num_processes > 1:  # the same decision on every process
            flag = torch.tensor([0.0 if ok else 1.0], device=self.accelerator.device)
            ok = float(self.accelerator.reduce(flag, reduction="sum").item()) == 0.0
        return ok


# ----------------------------------------------------------------------------- checkpoints
def save_baseline(
    backbone: nn.Module,
    path: str | Path,
    mcfg: ModelsConfig,
    meta: dict,
    fingerprint: dict[str, Any] | None = None,
) -> Path:
    """Write a loadable HF folder: config + safetensors + tokenizer + lira_baseline.json (+ the
    run fingerprint that ``--resume`` checks, see :func:`baseline_fingerprint`)."""
    with atomic_dir(path) as tmp:
        if fingerprint is not None:
            write_fingerprint(tmp, fingerprint)
        backbone.model.save_pretrained(str(tmp), safe_serialization=True)
        backbone.tokenizer.save_pretrained(str(tmp))
        info = {
            "pooling": mcfg.backbone_pooling,
            "query_prompt": mcfg.query_prompt,
            "document_prompt": mcfg.document_prompt,
            "max_length": mcfg.backbone_max_length,
            "dtype": mcfg.dtype,
            "base": mcfg.backbone,
            **meta,
        }
        (tmp / META_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")
    return Path(path)


def baseline_models_config(path: str | Path) -> ModelsConfig:
    """The ModelsConfig that loads a saved baseline folder as the backbone."""
    path = Path(path)
    meta_file = path / META_FILE
    if not meta_file.is_file():
        raise FileNotFoundError(f"{path} has no {META_FILE}: not a saved lira baseline folder")
    meta = json.loads(meta_file.read_text(encoding="utf-8"))
    return ModelsConfig(
        backbone=str(path),
        backbone_pooling=meta["pooling"],
        query_prompt=meta["query_prompt"],
        document_prompt=meta["document_prompt"],
        backbone_max_length=int(meta["max_length"]),
        dtype=meta.get("dtype", "float32"),
    )


def load_baseline(path: str | Path) -> nn.Module:
    """Load a saved baseline as a Backbone (satisfies the ``encode(texts, langs, kind)`` protocol)."""
    from lira.models import load_backbone

    return load_backbone(baseline_models_config(path))


# ----------------------------------------------------------------------------------- engine
def _splits(cfg: RunConfig) -> tuple[ParallelData, RetrievalData, XQuADR | None]:
    from lira.data.splits import load_splits

    splits = load_splits(cfg.data)
    parallel = getattr(splits, "train_parallel", None)
    retrieval = getattr(splits, "train_retrieval", None) or getattr(splits, "train", None)
    if parallel is None or retrieval is None:
        raise ValueError(
            f"data.format={cfg.data.format} gives no parallel training questions; the baselines "
            "need parallel data (English + training languages), e.g. data.format=xquad_r"
        )
    return parallel, retrieval, getattr(splits, "dataset", None)


def _fixed_batches(trainer: ContrastiveTrainer, seed: int, n: int = 2) -> list[dict[str, Any]]:
    rng = random.Random(seed + 10_007)
    return [trainer.draw(rng) for _ in range(n)]


def _stats(trainer: ContrastiveTrainer, before: float, after: float, out: Path) -> dict[str, Any]:
    h = trainer.history
    return {
        "loss_before": before, "loss_after": after, "steps": len(h), "path": str(out),
        "recipe": asdict(trainer.recipe),
        "train_loss_first": h[0] if h else None, "train_loss_last": h[-1] if h else None,
        "nonfinite_steps": trainer.nonfinite_steps,
    }  # fmt: skip


def baseline_fingerprint(cfg: RunConfig, method: str) -> dict[str, Any]:
    """The config values that shape ``method``'s model: ``models.*`` (less cache settings),
    ``data.*``, the shared budget / seed / LoRA fields and the method's own recipe fields
    (``baselines.<recipe>_*``; CLEAR's negative mining for InfoNCE, CLEAR and LANCER)."""
    bc = asdict(cfg.baselines)
    prefixes = tuple(sorted({f"{p}_" for p in RECIPE_OF.values()}))
    own = f"{RECIPE_OF[method]}_"
    keep = {k: v for k, v in bc.items()
            if k != "methods" and (not k.startswith(prefixes) or k.startswith(own))}  # fmt: skip
    if method in ("infonce", "clear", "lancer"):
        keep.update({k: bc[k] for k in ("clear_negatives", "clear_negative_ranks")})
    sections = {"models": models_fields(cfg), "data": cfg.data, "baselines": keep}
    return run_fingerprint(f"baseline {method}", sections)


def train_method(
    cfg: RunConfig,
    method: str,
    examples: list[TrainExample],
    corpus: list[Any],
    dataset: XQuADR | None,
    out: Path,
) -> dict[str, Any]:
    """Fine-tune a fresh backbone with ``method`` and save it under ``out``; returns its stats."""
    from accelerate.utils import set_seed

    from lira.models import load_backbone

    bc = cfg.baselines
    t0 = time.perf_counter()
    if method == "merging":
        return _train_merging(cfg, examples, corpus, out, t0)
    set_seed(bc.seed)
    multilingual = None
    if method == "lancer":
        if dataset is None:
            raise ValueError("lancer needs XQuAD-R sentences for its non-parallel batches")
        langs = sorted({"en", *(e.lang for e in examples)})
        multilingual = lancer_texts(dataset, langs, examples, bc.seed)
        log.info("lancer texts per language: %s", {k: len(v) for k, v in multilingual.items()})
    backbone = load_backbone(cfg.models)
    trainer = ContrastiveTrainer(backbone, bc, method, examples, corpus, multilingual)
    fixed = _fixed_batches(trainer, bc.seed)
    before = trainer.measure(fixed)
    trainer.train()
    after = trainer.measure(fixed)
    model = trainer.finish()
    trainer.accelerator.wait_for_everyone()
    if trainer.accelerator.is_main_process:
        meta = {"method": method, "steps": len(trainer.history)}
        save_baseline(model, out, cfg.models, meta, baseline_fingerprint(cfg, method))
    stats = _stats(trainer, before, after, out)
    stats["seconds"] = round(time.perf_counter() - t0, 2)
    log.info("baseline %s: loss %.4f -> %.4f", method, before, after)
    return stats


def _train_merging(
    cfg: RunConfig, examples: list[TrainExample], corpus: list[Any], out: Path, t0: float
) -> dict[str, Any]:
    from accelerate.utils import set_seed

    from lira.models import load_backbone

    bc = cfg.baselines
    langs = sorted({e.lang for e in examples})

    def composition(rows: list[int], q_lang: str) -> list[Any]:
        ex = [examples[i] for i in rows]
        ids = [e.qid for e in ex]
        q = ParallelData(ids, {q_lang: [e.q_en if q_lang == "en" else e.q_tgt for e in ex]})
        p = ParallelData(ids, {"en": [e.pos_text for e in ex]})
        negs = {"en": [[corpus[j].text for j in e.gist_hn] for e in ex]}
        return build_composition(q, p, f"{q_lang}enen", negs)

    # D(l en en): target queries of every training language; D(en en en): each question once
    cross: list[Any] = []
    for lang in langs:
        cross += composition([i for i, e in enumerate(examples) if e.lang == lang], lang)
    todo = [(f"{'+'.join(langs)}-en-en", cross)]
    if bc.merging_partner == "mono":
        todo.append(("en-en-en", composition(english_rows(examples), "en")))
    guide = load_backbone(cfg.models).eval().requires_grad_(False)  # the frozen base model
    parts: dict[str, Any] = {}
    models, first = [], None
    for name, comp in todo:
        set_seed(bc.seed)
        trainer = ContrastiveTrainer(
            load_backbone(cfg.models), bc, "gist", examples, [], composition=comp, guide=guide
        )
        fixed = _fixed_batches(trainer, bc.seed)
        before = trainer.measure(fixed)
        trainer.train()
        model = trainer.finish()
        after = trainer.measure(fixed)
        part_dir = out.parent / "merging-parts" / name
        save_baseline(model, part_dir, cfg.models, {"method": "gist", "composition": name})
        parts[name] = _stats(trainer, before, after, part_dir)
        models.append(model)
        first = first or (trainer, fixed)
    assert first is not None
    partner = models[1] if bc.merging_partner == "mono" else guide
    merged_state = average_state_dicts(
        [models[0].model.state_dict(), partner.model.state_dict()], bc.merging_weights
    )
    merged = models[0]  # the cross-lingual part's backbone now holds the merged weights
    merged.model.load_state_dict(merged_state)
    trainer, fixed = first
    after = trainer.measure(fixed)
    partner_name = "en-en-en" if bc.merging_partner == "mono" else "base"
    save_baseline(merged, out, cfg.models, {
        "method": "merging", "weights": bc.merging_weights, "parts": [todo[0][0], partner_name],
    }, baseline_fingerprint(cfg, "merging"))  # fmt: skip
    first_part = parts[todo[0][0]]
    return {
        "loss_before": first_part["loss_before"],
        "loss_after": after,
        "steps": first_part["steps"],
        "recipe": first_part["recipe"],
        "parts": parts,
        "partner": partner_name,
        "weights": list(bc.merging_weights),
        "path": str(out),
        "seconds": round(time.perf_counter() - t0, 2),
    }


def run_baselines(cfg: RunConfig, args: Any = None) -> dict[str, Any]:
    """Engine of ``lira baseline``: train each method, save it, write ``baselines/summary.json``."""
    from lira.models import load_backbone

    methods = list(getattr(args, "methods", None) or cfg.baselines.methods)
    bad = [m for m in methods if m not in METHODS]
    if bad:
        raise ValueError(f"unknown baseline methods {bad}; choose from {list(METHODS)}")
    root = Path(cfg.output_dir) / "baselines"
    root.mkdir(parents=True, exist_ok=True)
    summary_path = root / "summary.json"
    summary: dict[str, Any] = {}
    if summary_path.is_file():
        summary = json.loads(summary_path.read_text(encoding="utf-8"))
    todo = methods
    if getattr(args, "resume", False):
        todo = [m for m in methods if not ((root / m / META_FILE).is_file() and m in summary)]
        for m in sorted(set(methods) - set(todo)):
            # a model trained with another config is not "done": refuse rather than keep it
            check_fingerprint(root / m, baseline_fingerprint(cfg, m), f"baseline {m}")
            log.info("baseline %s already trained at %s (resume): skipped", m, root / m)
    if not todo:
        return summary
    parallel, retrieval, dataset = _splits(cfg)
    examples = build_examples(parallel, retrieval, dataset)
    corpus = list(retrieval.corpus)
    bc = cfg.baselines
    need_clear = any(m in ("infonce", "clear", "lancer") for m in todo) and bc.clear_negatives
    need_gist = "merging" in todo
    if need_clear or need_gist:
        miner = load_backbone(cfg.models).eval()  # the initial model (CLEAR §4.1)
        if need_clear:
            mine_clear_negatives(miner, examples, corpus, bc)
        if need_gist:
            mine_composition_negatives(miner, examples, corpus, bc)
        del miner
    for method in todo:
        summary[method] = train_method(cfg, method, examples, corpus, dataset, root / method)
        summary["_data"] = {"examples": len(examples), "corpus": len(corpus)}
        write_json(summary_path, summary)
    return summary
