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
is skipped and counted (``nonfinite_steps``). Checkpoints (the :class:`lira.training.Trainer`
template) are atomic ``<output_dir>/lasr/step-XXXXXXXX`` folders: net, EMA, optimizer, queues,
sampler and RNG states (``trainer_state.{safetensors,json}``, no pickle) and the run fingerprint
(:func:`lasr.config.lasr_fingerprint`); the last ``keep_checkpoints`` (2) are kept; ``--resume``
continues exactly and refuses another fingerprint; a fresh run removes a previous run's. The
final model (EMA weights) goes to ``<output_dir>/lira-model`` (:meth:`LaSRTrainer.finalize`;
``lira eval`` / ``lira compare`` read it), the metrics to ``<output_dir>/lasr/metrics.json``
(:func:`lasr.engine.run_lasr`).
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from accelerate import Accelerator
from torch import Tensor

from arca.metrics import append_log, trim_log
from lasr.banks import (
    PER_QUERY,
    StreamBank,
    corpus_negatives,
    held_out_metrics,
    pair_bank,
    pair_keys,
    retrieval_banks,
    trainable_queries,
)
from lasr.config import LASR_UNSHAPING, LaSRConfig
from lasr.fixed_fusion import FusionFit, step_refusal
from lasr.fusion import HeadEMA, LaSRNet, pack
from lasr.losses import candidate_ranking_loss, corr_loss
from lasr.model import LiRAModel
from lasr.pretrained import save_atomically
from lasr.queues import CorrQueue, DocQueue
from lasr.sampler import StepSampler
from lasr.trainable import TrainedModules, fit_validation_fusion, param_groups, training_task
from lira.accelerator import finish_trackers, log_metrics, make_accelerator
from lira.data.types import PairData, RetrievalData
from lira.training import Trainer, TrainerState, all_finite, rng_state, set_rng_state, write_json

log = logging.getLogger(__name__)

FIXED_FUSION = "fixed-fusion"
"""``<output_dir>/lasr/fixed-fusion``: the LiRA model at step 0 (the validation-fitted fixed
score fusion of its blocks), which ``lira compare`` shows beside the trained one."""


class LaSRTrainer(Trainer):
    """Train a :class:`lasr.model.LiRAModel`'s LaSRNet (fusion head + Adaptor) on its streams,
    on the :class:`lira.training.Trainer` template."""

    section = "lasr"
    unshaping = LASR_UNSHAPING
    steps_key = "lasr.steps"

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
        fingerprint: dict[str, object] | None = None,
        keep_checkpoints: int = 2,
        fusion_pools: dict[str, RetrievalData] | None = None,
    ) -> None:
        task = training_task(cfg, retrieval, pairs)
        accelerator = accelerator or make_accelerator(
            "lasr",
            cfg.report_to,
            output_dir,
            mixed_precision=cfg.mixed_precision,
            grad_accum=cfg.grad_accum,
        )
        root = Path(output_dir) / "lasr"
        super().__init__(cfg, accelerator, root, "LaSR", fingerprint, keep_checkpoints)
        self.cfg: LaSRConfig = cfg
        self.task, self.model = task, model
        self.root = root
        self.retrieval, self.pairs = retrieval, pairs
        model.to(accelerator.device)  # frozen h and g build the banks there; the net trains there
        bs = cfg.encode_batch_size
        self.qbank = self.dbank = self.pbank = None
        if retrieval is not None and task in ("retrieval", "both"):
            sizes = (len(retrieval.queries), len(retrieval.corpus))
            log.info(
                "lasr: computing the streams (h, g, Arca) of %d training queries and %d "
                "documents once, before step 1 …",
                *sizes,
            )
            self.qbank, self.dbank = retrieval_banks(model, retrieval, bs)
            self.train_q = trainable_queries(retrieval, self.dbank)
        if pairs is not None and task in ("rank", "both"):
            self.pbank = pair_bank(model, pairs, bs)
            self.k1, self.k2 = pair_keys(pairs)
        # what trains: the head always; the Adaptor end to end; g when asked and trainable
        net: LaSRNet = model.net
        for p in model.arca.parameters():
            p.requires_grad_(False)
        self.last_per_query: dict[str, float] = {}
        """{query id: nDCG@k} of the last :meth:`evaluate` (what :meth:`consider` pairs)."""
        self.fits: dict[str, FusionFit] = {}
        """The validation-best fixed fusion per query type (``lasr.fusion_init: validation``)."""
        if cfg.fusion_init == "validation":
            pools = fusion_pools or ({"dev": eval_retrieval} if eval_retrieval else None)
            self.fits = fit_validation_fusion(model, pools, cfg)
        groups, self.train_g = param_groups(model, cfg, task)
        self.params = [p for g in groups for p in g["params"]]
        self.optimizer = torch.optim.AdamW(groups, weight_decay=cfg.weight_decay)
        self.net: LaSRNet = net
        """The trained net (unwrapped); :attr:`wrapped` is what runs it with gradient."""
        trained = TrainedModules(net, model.arca if self.train_g else None)
        self.wrapped, self.optimizer = self.accelerator.prepare(trained, self.optimizer)
        """:class:`TrainedModules` as the accelerator prepared it (DDP under a launcher)."""
        self.ema = HeadEMA(net, cfg.ema_decay)
        self.initial = self.ema.snapshot()
        """The net at step 0 (with ``fusion_init: validation``: the fitted fixed fusion)."""
        qsize = cfg.corr_queue_size if cfg.use_queue else 0
        self.corr_queue = CorrQueue(qsize, cfg.corr_min if cfg.use_queue else 0)
        self.doc_queue = DocQueue(cfg.doc_queue_size if cfg.use_queue else 0)
        self.sampler = StepSampler(cfg.seed, self.world, accelerator.process_index)
        """A step's draw, the same on every process, which each takes its own part of."""
        for n in (len(self.train_q) if self.qbank else None, len(self.k1) if self.pbank else None):
            if n is not None:
                self.sampler.require(n)
        self.drawn: dict[str, list[str]] = {}
        """The keys this process trained on at the last step (``queries``, ``pairs``)."""
        self.eval_retrieval, self.eval_pairs = eval_retrieval, eval_pairs
        self._bad_window = False
        self.best: dict[str, object] = {}
        """The selected weights (``lasr.select_on_validation``): step, validation score, EMA
        state; step 0 is the fixed fusion the head starts from."""
        self.english_floor = self.fits["en"].parts.get("en") if "en" in self.fits else None
        """The backbone's validation nDCG@k on English queries: no selection goes below it."""

    def consider(self, step: int, result: dict[str, object]) -> bool:
        """Keep the EMA weights of ``step`` (``select_on_validation``) unless their validation
        result gives a reason not to (:func:`lasr.fixed_fusion.step_refusal`: English queries
        below the backbone, no gain, or a gain whose paired 95% lower bound is not above 0)."""
        r = result.get("retrieval")
        if not self.cfg.select_on_validation or not r:
            return False
        per_query = r.get(PER_QUERY) or self.last_per_query
        kept = self.best.get(PER_QUERY) or {}
        why = step_refusal(r, per_query, self.english_floor, self.best, kept)
        if why is not None:
            log.info("lasr: step %d not kept: %s", step, why)
            return False
        state = self.ema.snapshot()
        self.best = {"step": step, "score": r["macro"], "state": state, PER_QUERY: per_query}
        log.info("lasr: step %d kept (validation macro nDCG %.4f)", step, r["macro"])
        return True

    # ---------------------------------------------------------------- steps
    def _embed(self, bank: StreamBank, keys: list[str], kind: str = "query") -> Tensor:
        """ẑ [B, d] of bank ``keys`` (``kind`` texts), with gradient."""
        s = bank.rows(keys)
        dev = self.accelerator.device
        texts = None
        if self.train_g:  # g trains: its bins are recomputed with gradient
            texts = [bank.texts[bank.index[k]] for k in keys]
        return self.wrapped(*s.net_inputs(dev), texts, kind)

    def retrieval_loss(self) -> Tensor:
        """One query batch + document batch -> soft nDCG loss with mined negatives (Eq. 35-44)."""
        cfg, data = self.cfg, self.retrieval
        assert data is not None and self.qbank is not None and self.dbank is not None
        draw, shard = self.sampler.draw, self.sampler.shard
        qids = [self.train_q[i] for i in draw(len(self.train_q), cfg.batch_size)]
        rng = self.sampler.numpy_rng()
        pos = []
        for q in qids:
            rel = sorted(d for d, v in data.qrels[q].items() if v > 0 and d in self.dbank.index)
            pos.append(rel[int(rng.integers(len(rel)))])
        extra = [self.dbank.keys[i] for i in draw(len(self.dbank.keys), cfg.batch_size)]
        qids, pos, extra = shard(qids), shard(pos), shard(extra)
        self.drawn["queries"] = qids
        docs = list(dict.fromkeys(pos + extra))  # positives first, no duplicates
        zq = self._embed(self.qbank, qids)  # [B, d]
        relevant = [{d for d, v in data.qrels[q].items() if v > 0} for q in qids]
        net = self.net
        if cfg.negatives == "corpus":  # embeds its own positives and negatives
            return self._corpus_loss(net, zq, pos, relevant)
        zd = self._embed(self.dbank, docs, "document")  # [D, d]
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
        loss = self._ranking_loss(zq, zd[pos_rows], neg, valid)
        if cfg.use_queue:
            packed = None  # what `rescore` reads per entry; stop-grad entries need none
            if cfg.queue_rescore:
                packed = pack(*self.dbank.rows(docs).tensors()).to(self.accelerator.device)
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
        dev = self.accelerator.device
        values, indices = corpus_negatives(net, bank, zq, pos, relevant, cfg.num_negatives, dev)
        m, valid = values.shape[1], torch.isfinite(values)
        keys = [bank.keys[j] for j in indices.flatten().tolist()]
        uniq = list(dict.fromkeys(keys + pos))
        z = self._embed(bank, uniq, "document")  # with gradient
        row = {k: i for i, k in enumerate(uniq)}
        neg = z[[row[k] for k in keys]].view(len(pos), m, -1)  # [B, M, d]
        return self._ranking_loss(zq, z[[row[p] for p in pos]], neg, valid)

    def _ranking_loss(self, zq: Tensor, z_pos: Tensor, neg: Tensor, valid: Tensor) -> Tensor:
        """:func:`lasr.losses.candidate_ranking_loss` of zq [B, d] with its positives [B, d] and
        negatives [B, M, d] (``valid`` [B, M]), at the learned 1/T with ``learn_temperature``."""
        scale = self.net.head.loss_log_scale() if self.cfg.learn_temperature else None
        return candidate_ranking_loss(zq, z_pos, neg, valid, self.cfg, scale)

    def rank_loss(self) -> Tensor | None:
        """One batch of pairs -> correlation loss on [CorrQueue; batch] (Eq. 31-34), or None
        during warm-up (the batch is only enqueued)."""
        cfg = self.cfg
        assert self.pbank is not None and self.pairs is not None
        rows = self.sampler.shard(self.sampler.draw(len(self.k1), cfg.batch_size))
        self.drawn["pairs"] = [f"pair {i}" for i in rows]
        dev = self.accelerator.device
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

    # ---------------------------------------------------------------- loop hooks
    def train_step(self) -> dict[str, float]:
        """One optimisation step (one micro-batch of the accumulation window): the task losses,
        backward, and at the window's end the clipped, finite-checked update; the EMA follows."""
        acc = self.accelerator
        with acc.accumulate(self.wrapped):
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
                acc.backward(loss)
                if acc.sync_gradients:  # skipped when not finite: no NaN reaches the weights
                    bad = float("nan") if self._bad_window else None
                    self.clip_and_step(self.params, [self.optimizer], bad)
                    self._bad_window = False
                else:
                    self.optimizer.step()  # inside an accumulation window: a no-op
                self.optimizer.zero_grad()
        self.step += 1
        self.ema.update(self.net)
        terms["step"] = self.step
        self.history.append(terms)
        return terms

    def before_loop(self, total: int) -> None:
        """The net trains (evaluation leaves it in eval mode); ``log.jsonl`` keeps the steps done."""
        self.net.train()
        if self.accelerator.is_main_process:
            trim_log(self.root / "log.jsonl", self.step)

    def after_step(self, row: object, total: int) -> None:
        """Log the step's terms every ``log_every`` steps and at the last."""
        if self.step % self.cfg.log_every == 0 or self.step == total:
            assert isinstance(row, dict)
            log_metrics(self.accelerator, row, self.step)
            terms = {k: round(v, 4) for k, v in row.items()}
            log.info("lasr step %d/%d %s", self.step, total, terms)
            if self.accelerator.is_main_process:  # the per-step log, as Arca's (training curves)
                append_log(self.root / "log.jsonl", row)

    def eval_due(self, total: int) -> bool:
        """Every ``eval_every`` steps, and at the last with ``select_on_validation``."""
        cfg = self.cfg
        last = self.step == total and cfg.select_on_validation
        return bool(cfg.eval_every and self.step % cfg.eval_every == 0) or last

    def held_out(self) -> dict[str, object] | None:
        """:meth:`evaluate` on the validation data (None without any)."""
        if self.eval_retrieval is None and self.eval_pairs is None:
            return None
        return self.evaluate(self.eval_retrieval, self.eval_pairs)

    def on_eval(self, result: dict[str, object]) -> None:
        """Keep the weights when they are the best so far (:meth:`consider`)."""
        self.consider(int(result["step"]), result)

    def evaluate(
        self,
        retrieval: RetrievalData | None = None,
        pairs: PairData | None = None,
        use_ema: bool = True,
    ) -> dict[str, object]:
        """Held-out metrics of the EMA weights (or the live ones): nDCG@k / soft loss, Pearson
        (each query's nDCG@k goes to :attr:`last_per_query`)."""
        net = self.ema.shadow if use_ema else self.net
        out = held_out_metrics(self.model, net, self.cfg, retrieval, pairs)
        self.net.train()
        r = out.get("retrieval")
        self.last_per_query = r.pop(PER_QUERY, {}) if isinstance(r, dict) else {}
        return out

    # ---------------------------------------------------------------- checkpoints
    def checkpoint_state(self) -> TrainerState:
        """Net (and g when it trains), EMA, optimizer, sampler, history, evals, best, and per
        process (:meth:`~lira.training.Trainer.rank_states`) its queues and RNG states."""
        own = {
            "corr_queue": self.corr_queue.state_dict(),
            "doc_queue": self.doc_queue.state_dict(),
            "rng": rng_state(),
        }
        state = {
            "step": self.step,
            "net": self.net.state_dict(),
            "ema": self.ema.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "generator": self.sampler.gen.get_state(),
            "ranks": self.rank_states(own),
            "history": self.history,
            "evals": self.evals,
            "nonfinite_steps": self.nonfinite_steps,
            "best": self.best,
        }
        if self.train_g:
            state["encoder"] = self.model.arca.encoder.state_dict()
        return state

    def save_files(self, folder: Path) -> None:
        """``meta.json``: the step and the task."""
        write_json(folder / "meta.json", {"step": self.step, "task": self.task})

    def load_checkpoint_state(self, folder: Path, state: TrainerState) -> None:
        """Restore :meth:`checkpoint_state`."""
        self.net.load_state_dict(state["net"])
        if self.train_g:
            self.model.arca.encoder.load_state_dict(state["encoder"])
        self.ema.load_state_dict(state["ema"])
        self.optimizer.load_state_dict(state["optimizer"])
        ranks = state.get("ranks") or [state]  # one process's state at the top: older runs
        own = self.own_rank_state(ranks)
        self.corr_queue.load_state_dict(own["corr_queue"])
        self.doc_queue.load_state_dict(own["doc_queue"])
        self.sampler.gen.set_state(state["generator"])
        set_rng_state(own["rng"])
        self.step, self.history = int(state["step"]), list(state["history"])
        self.evals = list(state.get("evals", []))
        self.nonfinite_steps = int(state.get("nonfinite_steps", 0))
        self.best = dict(state.get("best", {}))

    def finalize(self) -> Path:
        """Copy the EMA weights — the validation-selected ones with ``select_on_validation`` —
        into the model's head and Adaptor, write the loadable LiRA model to
        ``<output_dir>/lira-model`` and end the trackers; returns that folder."""
        state = self.best["state"] if self.best else self.ema.shadow.state_dict()
        if self.best:
            step, score = self.best["step"], self.best["score"]
            log.info("lasr: the saved model is step %d's (validation macro nDCG %.4f)", step, score)
        for p in self.model.parameters():
            p.requires_grad_(False)
        self.model.net.eval()
        main = self.accelerator.is_main_process
        if self.fits and main:  # step 0's fixed fusion, for leaderboards
            self.model.net.load_state_dict(self.initial)
            # read with LiRA's store
            save_atomically(self.model, self.root / FIXED_FUSION, store_snapshot=False)
        self.model.net.load_state_dict(state)
        final = self.root.parent / "lira-model"
        if main:
            save_atomically(self.model, final)
        self.accelerator.wait_for_everyone()
        finish_trackers(self.accelerator)  # the process group lives on: the CLI ends it
        return final
