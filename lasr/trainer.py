"""LaSR fine-tuning loop (``lira lasr``; LiRA paper §4.2, Fig. 3b, App. D.4).

The Arca encoder and the backbone are frozen by default (``lasr.freeze_arca``), so the two
streams of every training text are computed once (:meth:`LiRAModel.streams`) and the loop
trains only the fusion head on them — cheap enough for CPU. Each step takes

- ``retrieval`` task: a query batch and a document batch (positives + random corpus documents);
  candidates per query = its positive + the top-M hardest same-language negatives of
  batch ∪ DocQueue, re-scored with the current head; loss = :func:`soft_ndcg_loss`
  (+ λ_h hinge + λ_r mean/variance, Eq. 35-44);
- ``rank`` task: a batch of STS pairs; cosine predictions joined with the CorrQueue history;
  loss = :func:`corr_loss` (Eq. 31-34), skipped (enqueue only) below ``corr_min`` items;

both summed when both data sets are given (``task: auto``). Evaluation uses an EMA of the head
weights (decay warmed up as min(decay, (1 + t)/(10 + t)), a choice recorded here because the
paper only says "use EMA for evaluation"). Checkpoints are atomic folders
``<output_dir>/lasr/step-XXXXXXXX`` holding head, EMA, optimizer, queues, sampler and RNG
states; ``--resume`` continues exactly. The final model (EMA head) is written with
:meth:`LiRAModel.save_pretrained` to ``<output_dir>/lira-model`` (where ``lira eval`` /
``lira compare`` look for it), the metrics to ``<output_dir>/lasr/metrics.json``.
"""

from __future__ import annotations

import copy
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

from lasr.fusion import FusionHead, pack
from lasr.losses import corr_loss, hard_ndcg, soft_ndcg_loss
from lasr.queues import CorrQueue, DocQueue
from lira.checkpoint import (
    atomic_dir,
    latest_checkpoint,
    rng_state,
    set_rng_state,
    step_dir,
    write_json,
)
from lira.config import LaSRConfig, RunConfig
from lira.data.types import PairData, RetrievalData

log = logging.getLogger(__name__)


class HeadEMA:
    """Exponential moving average of a module's parameters and buffers (for evaluation)."""

    def __init__(self, module: torch.nn.Module, decay: float) -> None:
        self.decay = decay
        self.updates = 0
        self.shadow = copy.deepcopy(module).eval()
        for p in self.shadow.parameters():
            p.requires_grad_(False)

    @torch.no_grad()
    def update(self, module: torch.nn.Module) -> None:
        """shadow ← d·shadow + (1 − d)·module, d = min(decay, (1 + t)/(10 + t))."""
        self.updates += 1
        d = min(self.decay, (1 + self.updates) / (10 + self.updates))
        for s, p in zip(self.shadow.state_dict().values(), module.state_dict().values()):
            if s.dtype.is_floating_point:
                s.mul_(d).add_(p.detach(), alpha=1 - d)
            else:
                s.copy_(p)

    def state_dict(self) -> dict[str, Any]:
        """Shadow weights and update count."""
        return {"shadow": self.shadow.state_dict(), "updates": self.updates}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`."""
        self.shadow.load_state_dict(state["shadow"])
        self.updates = int(state["updates"])


@dataclass
class StreamBank:
    """Pre-computed (frozen) streams of a set of texts: rows of ``e_en`` [N, d_en], ``e_lr``."""

    keys: list[str]
    langs: list[str]
    e_en: Tensor
    e_lr: Tensor
    index: dict[str, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.index = {k: i for i, k in enumerate(self.keys)}

    def rows(self, keys: list[str]) -> tuple[Tensor, Tensor]:
        """(e_en [B, d_en], e_lr [B, d_lr]) of ``keys``."""
        idx = torch.tensor([self.index[k] for k in keys], dtype=torch.long)
        return self.e_en[idx], self.e_lr[idx]


StreamMemo = dict[tuple[str, str, str], tuple[Tensor, Tensor]]
"""(kind, lang, text) -> (E_en [d_en], E_lr [d_lr]): streams already computed."""


def build_bank(
    model: Any,
    keys: list[str],
    texts: list[str],
    langs: list[str],
    kind: str,
    batch_size: int,
    memo: StreamMemo | None = None,
) -> StreamBank:
    """Streams of ``texts`` from ``model.streams``, each distinct (kind, lang, text) computed
    once: the streams are frozen, so ``memo`` may be shared by every bank built from the same
    model and stream settings.

    The English stream uses the inference selection: train-only references (gold English) are
    Arca's anchors, never LaSR inputs, so the head trains on the translations it is evaluated
    on (with gold in its training stream the head learns to trust E_en: on xquad_minilm,
    held-out L→En nDCG@10 was 25.0 with it and 28.7 without).
    """
    memo = {} if memo is None else memo
    todo = list(dict.fromkeys((kind, lang, t) for t, lang in zip(texts, langs)))
    todo = [k for k in todo if k not in memo]
    for i in range(0, len(todo), batch_size):
        chunk = todo[i : i + batch_size]
        e_en, e_lr = model.streams([k[2] for k in chunk], [k[1] for k in chunk], kind=kind)
        for k, a, b in zip(chunk, e_en.float().cpu(), e_lr.float().cpu()):
            memo[k] = (a, b)
    rows = [memo[(kind, lang, t)] for t, lang in zip(texts, langs)]
    e_en = torch.stack([r[0] for r in rows]) if rows else torch.zeros(0, model.d_en)
    e_lr = torch.stack([r[1] for r in rows]) if rows else torch.zeros(0, model.d_lr)
    return StreamBank(list(keys), list(langs), e_en, e_lr)


def retrieval_banks(
    model: Any, data: RetrievalData, batch_size: int, memo: StreamMemo | None = None
) -> tuple[StreamBank, StreamBank]:
    """(query bank, corpus bank) of a retrieval data set."""
    q = build_bank(
        model,
        [r.id for r in data.queries],
        [r.text for r in data.queries],
        [r.lang for r in data.queries],
        "query",
        batch_size,
        memo,
    )
    d = build_bank(
        model,
        [r.id for r in data.corpus],
        [r.text for r in data.corpus],
        [r.lang for r in data.corpus],
        "document",
        batch_size,
        memo,
    )
    return q, d


def pair_bank(
    model: Any, pairs: PairData, batch_size: int, memo: StreamMemo | None = None
) -> StreamBank:
    """Bank of every distinct sentence of a pair data set (keyed 'lang\\ttext')."""
    l1 = pairs.lang1 or ["xx"] * len(pairs.sentence1)
    l2 = pairs.lang2 or ["xx"] * len(pairs.sentence2)
    seen: dict[str, tuple[str, str]] = {}
    for t, lang in zip(pairs.sentence1 + pairs.sentence2, l1 + l2):
        seen.setdefault(f"{lang}\t{t}", (t, lang))
    keys = list(seen)
    return build_bank(
        model,
        keys,
        [seen[k][0] for k in keys],
        [seen[k][1] for k in keys],
        "query",
        batch_size,
        memo,
    )


def pair_keys(pairs: PairData) -> tuple[list[str], list[str]]:
    """Bank keys of sentence1 and sentence2 of every pair."""
    l1 = pairs.lang1 or ["xx"] * len(pairs.sentence1)
    l2 = pairs.lang2 or ["xx"] * len(pairs.sentence2)
    return (
        [f"{lang}\t{t}" for t, lang in zip(pairs.sentence1, l1)],
        [f"{lang}\t{t}" for t, lang in zip(pairs.sentence2, l2)],
    )


@torch.no_grad()
def evaluate_retrieval(
    head: torch.nn.Module,
    qbank: StreamBank,
    dbank: StreamBank,
    qrels: dict[str, dict[str, int]],
    k: int,
    cfg: LaSRConfig,
) -> dict[str, float]:
    """True nDCG@k (pytrec_eval-equivalent, binary) and 1 − soft nDCG@k over each query's
    same-language corpus, for the queries of ``qbank`` that have judgements."""
    head.eval()
    zq = head(*qbank.rows(qbank.keys))  # [Q, d]
    zd = head(*dbank.rows(dbank.keys))  # [D, d]
    by_lang: dict[str, list[int]] = {}
    for j, lang in enumerate(dbank.langs):
        by_lang.setdefault(lang, []).append(j)
    true, soft = [], []
    for qi, qid in enumerate(qbank.keys):
        rel = qrels.get(qid, {})
        # candidates: the corpus of the language of the query's relevant documents
        langs = {dbank.langs[dbank.index[d]] for d in rel if d in dbank.index}
        cols = sorted({j for lang in langs for j in by_lang[lang]})
        if not cols:
            continue
        s = (zq[qi : qi + 1] @ zd[cols].T).float()  # [1, C]
        y = torch.tensor([[1.0 if rel.get(dbank.keys[j], 0) > 0 else 0.0 for j in cols]])
        true.append(float(hard_ndcg(s, y, k)[0]))
        soft.append(
            float(soft_ndcg_loss(s, y, k=k, tau=cfg.tau, tau_k=cfg.tau_k, safe_negatives=False))
        )
    if not true:
        raise ValueError("evaluate_retrieval: no query has a judged document in the corpus")
    return {
        f"ndcg@{k}": float(np.mean(true)),
        f"soft_ndcg_loss@{k}": float(np.mean(soft)),
        "queries": len(true),
    }


@torch.no_grad()
def evaluate_pairs(head: torch.nn.Module, bank: StreamBank, pairs: PairData) -> dict[str, float]:
    """Pearson and Spearman (scipy) of cosine predictions against gold pair scores."""
    from scipy import stats

    head.eval()
    k1, k2 = pair_keys(pairs)
    pred = (head(*bank.rows(k1)) * head(*bank.rows(k2))).sum(-1).double().numpy()
    gold = np.asarray(pairs.scores, dtype=np.float64)
    return {
        "pearson": float(stats.pearsonr(pred, gold).statistic),
        "spearman": float(stats.spearmanr(pred, gold).statistic),
        "pairs": len(gold),
    }


class LaSRTrainer:
    """Train the LaSR fusion head of a :class:`lira.model.LiRAModel` (frozen streams)."""

    def __init__(
        self,
        model: Any,
        cfg: LaSRConfig,
        output_dir: str | Path,
        retrieval: RetrievalData | None = None,
        pairs: PairData | None = None,
        accelerator: Accelerator | None = None,
        eval_retrieval: RetrievalData | None = None,
        eval_pairs: PairData | None = None,
        memo: StreamMemo | None = None,
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
        self.acc = accelerator or Accelerator(
            mixed_precision=cfg.mixed_precision,
            gradient_accumulation_steps=cfg.grad_accum,
            cpu=not torch.cuda.is_available(),
        )
        self.retrieval, self.pairs = retrieval, pairs
        bs = max(cfg.batch_size, 8)
        self.qbank = self.dbank = self.pbank = None
        self.memo: StreamMemo = {} if memo is None else memo
        if retrieval is not None and task in ("retrieval", "both"):
            self.qbank, self.dbank = retrieval_banks(model, retrieval, bs, self.memo)
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
            self.pbank = pair_bank(model, pairs, bs, self.memo)
            self.k1, self.k2 = pair_keys(pairs)
        self.head: FusionHead = model.head
        self.optimizer = torch.optim.AdamW(
            [p for p in self.head.parameters() if p.requires_grad],
            lr=cfg.lr,
            weight_decay=cfg.weight_decay,
        )
        self.head, self.optimizer = self.acc.prepare(self.head, self.optimizer)
        self.ema = HeadEMA(self.acc.unwrap_model(self.head), cfg.ema_decay)
        qsize = cfg.corr_queue_size if cfg.use_queue else 0
        self.corr_queue = CorrQueue(qsize, cfg.corr_min if cfg.use_queue else 0)
        self.doc_queue = DocQueue(cfg.doc_queue_size if cfg.use_queue else 0)
        self.gen = torch.Generator().manual_seed(cfg.seed + self.acc.process_index)
        self.step = 0
        self.history: list[dict[str, float]] = []
        self.eval_retrieval, self.eval_pairs = eval_retrieval, eval_pairs
        self.evals: list[dict[str, Any]] = []

    # ---------------------------------------------------------------- steps
    def _sample(self, n: int, size: int) -> list[int]:
        return torch.randperm(n, generator=self.gen)[: min(size, n)].tolist()

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
        d_en, d_lr = self.dbank.rows(docs)
        q_en, q_lr = self.qbank.rows(qids)
        dev = self.acc.device
        zq = self.head(q_en.to(dev), q_lr.to(dev))  # [B, d]
        zd = self.head(d_en.to(dev), d_lr.to(dev))  # [D, d]
        d_langs = [self.dbank.langs[self.dbank.index[d]] for d in docs]
        pos_rows = [docs.index(p) for p in pos]
        relevant = [{d for d, v in data.qrels[q].items() if v > 0} for q in qids]
        neg_langs = [d_langs[r] for r in pos_rows]  # negatives in the positive's language
        head = self.acc.unwrap_model(self.head)
        idx, valid = self.doc_queue.mine(
            zq, relevant, neg_langs, cfg.num_negatives, docs, d_langs, zd, rescore=head.fuse_packed
        )
        neg = self.doc_queue.negatives(idx, zd, rescore=head.fuse_packed)  # [B, M, d]
        s_pos = (zq * zd[pos_rows]).sum(-1, keepdim=True)  # [B, 1]
        s_neg = torch.einsum("bd,bmd->bm", zq, neg)  # [B, M]
        scores = cfg.score_scale * torch.cat([s_pos, s_neg], dim=1)
        labels = torch.zeros_like(scores)
        labels[:, 0] = 1
        mask = torch.cat([torch.ones_like(valid[:, :1]), valid], dim=1)
        loss = soft_ndcg_loss(
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
            mask=mask,
        )
        if cfg.use_queue:
            self.doc_queue.push(docs, d_langs, zd, feats=pack(d_en, d_lr).to(dev))
        return loss

    def rank_loss(self) -> Tensor | None:
        """One batch of pairs -> correlation loss on [CorrQueue; batch] (Eq. 31-34), or None
        during warm-up (the batch is only enqueued)."""
        cfg = self.cfg
        assert self.pbank is not None and self.pairs is not None
        rows = self._sample(len(self.k1), cfg.batch_size)
        dev = self.acc.device
        z1 = self.head(*(t.to(dev) for t in self.pbank.rows([self.k1[i] for i in rows])))
        z2 = self.head(*(t.to(dev) for t in self.pbank.rows([self.k2[i] for i in rows])))
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
    def train(self, steps: int | None = None) -> list[dict[str, float]]:
        """Run up to ``steps`` (default cfg.steps) optimisation steps, checkpointing as configured."""
        cfg = self.cfg
        total = cfg.steps if steps is None else steps
        self.head.train()
        while self.step < total:
            with self.acc.accumulate(self.head):
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
                if loss is not None:
                    self.acc.backward(loss)
                    if self.acc.sync_gradients:
                        self.acc.clip_grad_norm_(self.head.parameters(), cfg.max_grad_norm)
                    self.optimizer.step()
                    self.optimizer.zero_grad()
            self.step += 1
            self.ema.update(self.acc.unwrap_model(self.head))
            terms["step"] = self.step
            self.history.append(terms)
            if self.step % cfg.log_every == 0 or self.step == total:
                log.info(
                    "lasr step %d/%d %s",
                    self.step,
                    total,
                    {k: round(v, 4) for k, v in terms.items()},
                )
            held_out = self.eval_retrieval is not None or self.eval_pairs is not None
            if cfg.eval_every and self.step % cfg.eval_every == 0 and held_out:
                result = {"step": self.step, **self.evaluate(self.eval_retrieval, self.eval_pairs)}
                log.info("lasr eval %s", json.dumps(result))
                self.evals.append(result)
            if self.step % cfg.save_every == 0 and self.acc.is_main_process:
                self.save_checkpoint()
        return self.history

    def evaluate(
        self,
        retrieval: RetrievalData | None = None,
        pairs: PairData | None = None,
        use_ema: bool = True,
    ) -> dict[str, Any]:
        """Held-out metrics of the EMA head (or the live head): nDCG@k / soft loss, Pearson."""
        head = self.ema.shadow if use_ema else self.acc.unwrap_model(self.head)
        out: dict[str, Any] = {}
        if retrieval is not None:
            qb, db = retrieval_banks(self.model, retrieval, max(self.cfg.batch_size, 8), self.memo)
            out["retrieval"] = evaluate_retrieval(
                head, qb, db, retrieval.qrels, self.cfg.ndcg_k, self.cfg
            )
        if pairs is not None:
            bank = pair_bank(self.model, pairs, max(self.cfg.batch_size, 8), self.memo)
            out["rank"] = evaluate_pairs(head, bank, pairs)
        self.head.train()
        return out

    # ---------------------------------------------------------------- checkpoints
    def save_checkpoint(self) -> Path:
        """Atomic ``step-XXXXXXXX`` folder with everything needed for exact resume."""
        final = step_dir(self.root, self.step)
        with atomic_dir(final) as tmp:
            torch.save(
                {
                    "step": self.step,
                    "head": self.acc.unwrap_model(self.head).state_dict(),
                    "ema": self.ema.state_dict(),
                    "optimizer": self.optimizer.state_dict(),
                    "corr_queue": self.corr_queue.state_dict(),
                    "doc_queue": self.doc_queue.state_dict(),
                    "generator": self.gen.get_state(),
                    "rng": rng_state(),
                    "history": self.history,
                    "evals": self.evals,
                },
                tmp / "trainer_state.pt",
            )
            write_json(tmp / "meta.json", {"step": self.step, "task": self.task})
        log.info("lasr: checkpoint %s", final)
        return final

    def resume(self) -> bool:
        """Load the latest checkpoint under ``<output_dir>/lasr`` (False if there is none)."""
        last = latest_checkpoint(self.root)
        if last is None:
            return False
        state = torch.load(last / "trainer_state.pt", weights_only=False)
        self.acc.unwrap_model(self.head).load_state_dict(state["head"])
        self.ema.load_state_dict(state["ema"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.corr_queue.load_state_dict(state["corr_queue"])
        self.doc_queue.load_state_dict(state["doc_queue"])
        self.gen.set_state(state["generator"])
        set_rng_state(state["rng"])
        self.step, self.history = int(state["step"]), list(state["history"])
        self.evals = list(state.get("evals", []))
        log.info("lasr: resumed from %s (step %d)", last, self.step)
        return True

    def finalize(self) -> None:
        """Copy the EMA weights into the model's head (what evaluation and saving use)."""
        self.model.head.load_state_dict(self.ema.shadow.state_dict())
        self.model.head.eval()


# ---------------------------------------------------------------------- engine (`lira lasr`)
def task_data(
    cfg: RunConfig,
) -> tuple[RetrievalData | None, RetrievalData | None, PairData | None, PairData | None]:
    """(train retrieval, held-out retrieval, train pairs, held-out pairs) of the config's data."""
    from lira.data.splits import load_splits

    splits = load_splits(cfg.data)
    train_r = getattr(splits, "train", None)
    eval_r = getattr(splits, "eval", None)
    train_p = getattr(splits, "train_pairs", None)
    eval_p = getattr(splits, "eval_pairs", None)
    if cfg.lasr.task == "rank":
        train_r = eval_r = None
    if cfg.lasr.task == "retrieval":
        train_p = eval_p = None
    return train_r, eval_r, train_p, eval_p


def run_lasr(cfg: RunConfig, args: Namespace | None = None) -> dict[str, Any]:
    """Engine of ``lira lasr``: train the fusion head, evaluate before/after, save the model."""
    from accelerate.utils import set_seed

    from lira.model import LiRAModel
    from lira.translation.runner import store_path
    from lira.translation.store import TranslationStore

    lc = cfg.lasr
    if not lc.freeze_arca:
        raise ValueError(
            "lasr.freeze_arca=false is not supported: LaSR trains the fusion head on frozen "
            "Arca/backbone streams; fine-tune g and the Adaptor with `lira arca` instead"
        )
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
    model = LiRAModel.from_config(
        cfg, out / "arca" / "final", store=store, online=cfg.arca.online_translation
    )
    from arca.encoders import attach_g_cache

    attach_g_cache(model.arca, cfg.models, out)  # a frozen g's embeddings: computed once per run
    train_r, eval_r, train_p, eval_p = task_data(cfg)
    trainer = LaSRTrainer(
        model, lc, out, retrieval=train_r, pairs=train_p, eval_retrieval=eval_r, eval_pairs=eval_p
    )
    resumed = bool(getattr(args, "resume", False)) and trainer.resume()
    before = {} if resumed else trainer.evaluate(eval_r, eval_p)
    log.info("LaSR held-out before training (Arca-only start): %s", json.dumps(before))
    trainer.train()
    after = trainer.evaluate(eval_r, eval_p)
    log.info("LaSR held-out after training (EMA head): %s", json.dumps(after))
    trainer.finalize()
    summary = {
        "task": trainer.task,
        "steps": trainer.step,
        "before": before,
        "after": after,
        "evals": trainer.evals,
        "missing_translations": model.missing_translations,
        "ablations": {
            k: getattr(lc, k)
            for k in (
                "use_llm_critic",
                "use_embedding_critic",
                "use_translations",
                "use_multilingual_encoder",
                "use_queue",
            )
        },
    }
    if trainer.acc.is_main_process:
        with atomic_dir(out / "lira-model") as tmp:
            model.save_pretrained(tmp)
        trainer.root.mkdir(parents=True, exist_ok=True)
        write_json(trainer.root / "metrics.json", summary)
    trainer.acc.wait_for_everyone()
    if store is not None:
        store.close()
    return summary
