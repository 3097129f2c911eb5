"""One contrastive trainer for every baseline (``lira baseline CONFIG [--methods ...]``).

Every method fine-tunes the same backbone (``lira.models.load_backbone``; full fine-tuning or
LoRA via peft, merged back before saving) on the same training split, with the same step
budget, batch size, learning rate and seed (``cfg.baselines``):

- ``infonce``: target query -> English gold sentence, in-batch + mined hard negatives.
- ``clear``: :class:`~lira.baselines.clear.ClearLoss` on (q_en, p_en, p_en^-, q_l, q_l^-), hard
  negatives mined with the initial model for passages and for target-language queries.
- ``lancer``: English InfoNCE (q_en -> p_en) + λ·L_C on a stratified multilingual batch of
  questions (English + training languages; ``batch_size // n_langs`` per language).
- ``jsd``: :class:`~lira.baselines.jsd.JSDInfoNCELoss` with z_en = q_en, z_tgt = q_l, anchor q_l
  and English sentences as candidates.
- ``merging`` (paper 001): two runs of the GIST-guided loss (guide = the frozen initial
  backbone), one on D(l en en) for every training language l (cross-lingual) and one on
  D(en en en) (monolingual), each with the full step budget, then weight-averaged with
  ``cfg.baselines.merging_weights``. The two parts are kept under ``merging-parts/``.

The training examples come from ``lira.data.splits.load_splits(cfg.data)``: ``train_parallel``
(questions in English and the training languages, aligned by question id) and
``train_retrieval`` (training-language queries ``<qid>@<lang>`` -> English gold sentence).

The loop is a direct accelerate loop (sentence-transformers' trainer expects a
SentenceTransformer model and column datasets; CLEAR, LANCER and JSD need several encodings
per step and extra batches, which a plain loop states more directly). Each method's loss is
measured before and after training on the same fixed batches in eval mode and written to
``<output_dir>/baselines/summary.json``. Checkpoints are HF folders (config + safetensors +
tokenizer + ``lira_baseline.json`` holding pooling and prompts), written atomically and
loadable with :func:`load_baseline`.
"""

from __future__ import annotations

import copy
import json
import logging
import random
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from lira.baselines.clear import ClearLoss, mine_hard_negatives
from lira.baselines.composition import build_composition, guided_info_nce
from lira.baselines.infonce import info_nce
from lira.baselines.jsd import JSDInfoNCELoss
from lira.baselines.lancer import correlation_penalty, stratified_language_batch
from lira.baselines.merging import average_state_dicts
from lira.checkpoint import atomic_dir, write_json
from lira.config import BaselinesConfig, ModelsConfig, RunConfig
from lira.data.types import ParallelData, RetrievalData

log = logging.getLogger(__name__)

META_FILE = "lira_baseline.json"
METHODS = ("infonce", "clear", "lancer", "jsd", "merging")


# ----------------------------------------------------------------------------------- data
@dataclass
class TrainExample:
    """One training row: a question in English and in a training language, its gold sentence."""

    qid: str
    lang: str
    q_en: str
    q_tgt: str
    pos_id: str
    pos_text: str
    p_hn: list[int] = field(default_factory=list)
    """Corpus indices of mined hard-negative passages."""
    q_hn: list[int] = field(default_factory=list)
    """Example indices whose q_tgt are mined hard-negative target queries."""


def build_examples(parallel: ParallelData, retrieval: RetrievalData) -> list[TrainExample]:
    """Join target queries (``<qid>@<lang>``) with their English question and gold sentence."""
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
        out.append(
            TrainExample(qid, q.lang, parallel.texts["en"][row[qid]], q.text, pos, docs[pos])
        )
    if len(out) < 2:
        raise ValueError(
            f"only {len(out)} training examples could be joined from train_retrieval and "
            "train_parallel (query ids must be <qid>@<lang> with qrels into the corpus)"
        )
    return out


@torch.no_grad()
def mine_negatives(
    backbone: nn.Module, examples: list[TrainExample], corpus: list[Any], k: int, bs: int
) -> None:
    """Fill ``p_hn`` (passages) and ``q_hn`` (same-language target queries) with the model."""
    if k == 0:
        return
    corpus_ids = [r.id for r in corpus]
    ids = {d: i for i, d in enumerate(dict.fromkeys(corpus_ids + [e.pos_id for e in examples]))}
    q = torch.as_tensor(backbone.encode([e.q_en for e in examples], kind="query", batch_size=bs))
    p = torch.as_tensor(backbone.encode([r.text for r in corpus], kind="document", batch_size=bs))
    pos = torch.tensor([ids[e.pos_id] for e in examples])
    pool_ids = torch.tensor([ids[d] for d in corpus_ids])
    k_p = min(k, int((pool_ids.view(1, -1) != pos.view(-1, 1)).sum(1).min()))
    for e, row in zip(examples, mine_hard_negatives(q, p, pos, pool_ids, k_p).tolist()):
        e.p_hn = row
    p_gold = torch.as_tensor(
        backbone.encode([e.pos_text for e in examples], kind="document", batch_size=bs)
    )
    qt = torch.as_tensor(backbone.encode([e.q_tgt for e in examples], kind="query", batch_size=bs))
    for lang in sorted({e.lang for e in examples}):
        idx = [i for i, e in enumerate(examples) if e.lang == lang]
        sel = torch.tensor(idx)
        k_q = min(k, int((pos[sel].view(1, -1) != pos[sel].view(-1, 1)).sum(1).min()))
        rows = mine_hard_negatives(p_gold[sel], qt[sel], pos[sel], pos[sel], k_q).tolist()
        for i, r in zip(idx, rows):
            examples[i].q_hn = [idx[j] for j in r]


# -------------------------------------------------------------------------------- trainer
class ContrastiveTrainer:
    """Fine-tunes a backbone with one baseline objective; identical loop for every method.

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

        if method not in ("infonce", "clear", "lancer", "jsd", "gist"):
            raise ValueError(f"unknown method '{method}'; choose from {(*METHODS[:-1], 'gist')}")
        if method == "gist" and (composition is None or guide is None):
            raise ValueError("method 'gist' needs composition examples and a guide model")
        self.cfg, self.method = cfg, method
        self.examples, self.corpus = examples, corpus
        self.multilingual = multilingual or {}
        self.composition, self.guide = composition, guide
        ids = dict.fromkeys([r.id for r in corpus] + [e.pos_id for e in examples])
        self.doc_index = {d: i for i, d in enumerate(ids)}
        self.doc_text = {r.id: r.text for r in corpus}
        self.corpus_key = [self.doc_index[r.id] for r in corpus]
        self.clear = ClearLoss(cfg.tau, tuple(cfg.clear_lambdas), reverse=cfg.clear_reverse)
        self.jsd = JSDInfoNCELoss(cfg.tau, cfg.jsd_weight, cfg.jsd_eps)
        self.accelerator = Accelerator()
        self.backbone = backbone
        if cfg.lora:
            self._apply_lora()
        params = [p for p in backbone.parameters() if p.requires_grad]
        opt = torch.optim.AdamW(params, lr=cfg.lr)
        self.model, self.opt = self.accelerator.prepare(backbone, opt)
        if self.guide is not None:
            self.guide.to(self.accelerator.device).eval().requires_grad_(False)
        self.rng = random.Random(cfg.seed)
        self.history: list[float] = []

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
        return len(self.composition) if self.method == "gist" else len(self.examples)

    def draw(self, rng: random.Random) -> dict[str, Any]:
        """One batch: row indices (distinct) plus, for LANCER, a multilingual batch."""
        b = min(self.cfg.batch_size, self.n_rows())
        batch: dict[str, Any] = {"rows": rng.sample(range(self.n_rows()), b)}
        if self.method == "lancer":
            per_lang = max(1, self.cfg.batch_size // max(1, len(self.multilingual)))
            texts, lang_ids = stratified_language_batch(self.multilingual, per_lang, rng)
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
        k = min(len(e.p_hn) for e in ex)
        m = min(len(e.q_hn) for e in ex)
        p_hn_rows = [[self.corpus[j] for j in e.p_hn[:k]] for e in ex]
        p_hn_ids = torch.tensor(
            [[self.corpus_key[j] for j in e.p_hn[:k]] for e in ex], device=dev
        ).view(b, k)
        docs = [e.pos_text for e in ex] + [r.text for row in p_hn_rows for r in row]
        p_all = self._enc(docs, "document")  # [B(1+K), d]
        p_pos, p_hn = p_all[:b], p_all[b:].view(b, k, p_all.shape[-1])
        if self.method == "infonce":
            q_l = self._enc([e.q_tgt for e in ex], "query")
            return info_nce(q_l, p_pos, p_hn, self.cfg.tau, ids, p_hn_ids)
        if self.method == "lancer":
            q_en = self._enc([e.q_en for e in ex], "query")
            l_r = info_nce(q_en, p_pos, p_hn, self.cfg.tau, ids, p_hn_ids)
            x = self._enc(batch["ml_texts"], "query")  # [N, d]
            pen = correlation_penalty(x, batch["ml_ids"].to(dev), len(self.multilingual))
            return l_r + self.cfg.lancer_lambda * pen
        q_hn_ex = [[self.examples[j] for j in e.q_hn[:m]] for e in ex]
        queries = (
            [e.q_en for e in ex] + [e.q_tgt for e in ex] + [x.q_tgt for r in q_hn_ex for x in r]
        )
        q_all = self._enc(queries, "query")
        q_en, q_l, q_hn = q_all[:b], q_all[b : 2 * b], q_all[2 * b :].view(b, m, q_all.shape[-1])
        if self.method == "jsd":
            return self.jsd(q_en, q_l, q_l, p_pos, ids)
        q_hn_ids = torch.tensor(
            [[self.doc_index[x.pos_id] for x in r] for r in q_hn_ex], device=dev
        ).view(b, m)
        return self.clear(q_en, p_pos, p_hn, q_l, q_hn, ids, p_hn_ids, q_hn_ids)

    def _gist_loss(self, rows: list[int]) -> Tensor:
        assert self.composition is not None and self.guide is not None
        ex = [self.composition[i] for i in rows]
        b, k = len(ex), min(len(e.negatives) for e in ex)
        q = [e.query for e in ex]
        docs = [e.positive for e in ex] + [n for e in ex for n in e.negatives[:k]]
        a, p_all = self._enc(q, "query"), self._enc(docs, "document")
        with torch.no_grad():
            ga, gp_all = self.guide(q, kind="query"), self.guide(docs, kind="document")
        return guided_info_nce(
            a,
            p_all[:b],
            p_all[b:].view(b, k, p_all.shape[-1]),
            ga,
            gp_all[:b],
            gp_all[b:].view(b, k, gp_all.shape[-1]),
            tau=self.cfg.tau,
        )

    @torch.no_grad()
    def measure(self, batches: list[dict[str, Any]]) -> float:
        """Mean loss over fixed batches in eval mode (no dropout, no gradient)."""
        was = self.model.training
        self.model.eval()
        vals = [float(self.loss(bt)) for bt in batches]
        self.model.train(was)
        return sum(vals) / len(vals)

    def train(self, steps: int) -> list[float]:
        """Run ``steps`` optimisation steps; returns the per-step losses."""
        self.model.train()
        for step in range(steps):
            loss = self.loss(self.draw(self.rng))
            self.opt.zero_grad(set_to_none=True)
            self.accelerator.backward(loss)
            self.accelerator.clip_grad_norm_(self.model.parameters(), 1.0)
            self.opt.step()
            self.history.append(float(loss.detach()))
            if step % 10 == 0 or step == steps - 1:
                log.info("%s step %d/%d loss %.4f", self.method, step + 1, steps, self.history[-1])
        return self.history


# ----------------------------------------------------------------------------- checkpoints
def save_baseline(backbone: nn.Module, path: str | Path, mcfg: ModelsConfig, meta: dict) -> Path:
    """Write a loadable HF folder: config + safetensors + tokenizer + lira_baseline.json."""
    with atomic_dir(path) as tmp:
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
def _splits(cfg: RunConfig) -> tuple[ParallelData, RetrievalData]:
    from lira.data.splits import load_splits

    splits = load_splits(cfg.data)
    parallel = getattr(splits, "train_parallel", None)
    retrieval = getattr(splits, "train_retrieval", None) or getattr(splits, "train", None)
    if parallel is None or retrieval is None:
        raise ValueError(
            f"data.format={cfg.data.format} gives no parallel training questions; the baselines "
            "need parallel data (English + training languages), e.g. data.format=xquad_r"
        )
    return parallel, retrieval


def _fixed_batches(trainer: ContrastiveTrainer, seed: int, n: int = 2) -> list[dict[str, Any]]:
    rng = random.Random(seed + 10_007)
    return [trainer.draw(rng) for _ in range(n)]


def train_method(
    cfg: RunConfig,
    method: str,
    examples: list[TrainExample],
    corpus: list[Any],
    parallel: ParallelData,
    out: Path,
) -> dict[str, Any]:
    """Fine-tune a fresh backbone with ``method`` and save it under ``out``; returns its stats."""
    from accelerate.utils import set_seed

    from lira.models import load_backbone

    bc = cfg.baselines
    t0 = time.perf_counter()
    if method == "merging":
        return _train_merging(cfg, examples, parallel, out, t0)
    set_seed(bc.seed)
    backbone = load_backbone(cfg.models)
    multilingual = {lang: list(parallel.texts[lang]) for lang in parallel.texts}
    trainer = ContrastiveTrainer(backbone, bc, method, examples, corpus, multilingual)
    fixed = _fixed_batches(trainer, bc.seed)
    before = trainer.measure(fixed)
    trainer.train(bc.steps)
    after = trainer.measure(fixed)
    model = trainer.finish()
    trainer.accelerator.wait_for_everyone()
    if trainer.accelerator.is_main_process:
        save_baseline(model, out, cfg.models, {"method": method, "steps": bc.steps})
    stats = {"loss_before": before, "loss_after": after, "steps": bc.steps, "path": str(out)}
    stats["train_loss_first"] = trainer.history[0] if trainer.history else None
    stats["train_loss_last"] = trainer.history[-1] if trainer.history else None
    stats["seconds"] = round(time.perf_counter() - t0, 2)
    log.info("baseline %s: loss %.4f -> %.4f", method, before, after)
    return stats


def _train_merging(
    cfg: RunConfig, examples: list[TrainExample], parallel: ParallelData, out: Path, t0: float
) -> dict[str, Any]:
    from accelerate.utils import set_seed

    from lira.models import load_backbone

    bc = cfg.baselines
    langs = sorted({e.lang for e in examples})
    n_neg = max(1, bc.hard_negatives)

    def rows_of(rows: list[int], q_lang: str) -> tuple[ParallelData, ParallelData]:
        ex = [examples[i] for i in rows]
        q = [e.q_en if q_lang == "en" else e.q_tgt for e in ex]
        ids = [e.qid for e in ex]
        return ParallelData(ids, {q_lang: q}), ParallelData(ids, {"en": [e.pos_text for e in ex]})

    # D(l en en): target queries of every training language; D(en en en): each question once
    cross = []
    for lang in langs:
        q, p = rows_of([i for i, e in enumerate(examples) if e.lang == lang], lang)
        cross += build_composition(q, p, f"{lang}enen", n_neg, bc.seed)
    first_row = {e.qid: i for i, e in reversed(list(enumerate(examples)))}
    q, p = rows_of(sorted(first_row.values()), "en")
    mono = build_composition(q, p, "enenen", n_neg, bc.seed)
    parts: dict[str, Any] = {}
    models = []
    fixed: list[dict[str, Any]] = []
    guide = None
    for name, comp in ((f"{'+'.join(langs)}-en-en", cross), ("en-en-en", mono)):
        set_seed(bc.seed)
        backbone = load_backbone(cfg.models)
        if guide is None:
            guide = copy.deepcopy(backbone).eval().requires_grad_(False)
        trainer = ContrastiveTrainer(
            backbone, bc, "gist", examples, [], composition=comp, guide=guide
        )
        fb = _fixed_batches(trainer, bc.seed)
        if not fixed:
            fixed = fb
            first = trainer
        before = trainer.measure(fb)
        trainer.train(bc.steps)
        model = trainer.finish()
        after = trainer.measure(fb)
        part_dir = out.parent / "merging-parts" / name
        save_baseline(model, part_dir, cfg.models, {"method": "gist", "composition": name})
        parts[name] = {"loss_before": before, "loss_after": after, "path": str(part_dir)}
        models.append(model)
    merged_state = average_state_dicts([m.model.state_dict() for m in models], bc.merging_weights)
    merged = models[0]
    merged.model.load_state_dict(merged_state)
    # models[0] is the cross-lingual part's backbone, now holding the merged weights:
    # measure it on that part's fixed batches
    after = first.measure(fixed)
    save_baseline(
        merged,
        out,
        cfg.models,
        {"method": "merging", "weights": bc.merging_weights, "parts": list(parts)},
    )
    return {
        "loss_before": parts[next(iter(parts))]["loss_before"],
        "loss_after": after,
        "steps": bc.steps,
        "parts": parts,
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
            log.info("baseline %s already trained at %s (resume): skipped", m, root / m)
    if not todo:
        return summary
    parallel, retrieval = _splits(cfg)
    examples = build_examples(parallel, retrieval)
    corpus = list(retrieval.corpus)
    if any(m in ("infonce", "clear", "lancer") for m in todo) and cfg.baselines.hard_negatives:
        miner = load_backbone(cfg.models).eval()
        mine_negatives(miner, examples, corpus, cfg.baselines.hard_negatives, 64)
        del miner
    for method in todo:
        summary[method] = train_method(cfg, method, examples, corpus, parallel, root / method)
        summary["_data"] = {"examples": len(examples), "corpus": len(corpus)}
        write_json(summary_path, summary)
    return summary
