"""FIFO memories of LaSR (LiRA paper §4.2, Fig. 3b, App. D.4).

- :class:`CorrQueue` holds detached (pred, gold) pairs of the rank task; the correlation loss
  runs on [history; batch] so Pearson/Spearman are stable under small batches (Eq. 30).
- :class:`DocQueue` holds detached (doc_id, lang, ẑ_d) of recent documents (and, optionally,
  the document's fusion-head inputs so the current head can re-score it); it mines the
  hardest same-language negatives for each query, never the query's own positive(s).

In DDP both queues gather what every rank pushes (``torch.distributed.all_gather``), so every
rank holds the same queue. Both queues keep at most ``max_size`` entries, oldest dropped first,
and round-trip through ``state_dict`` / ``load_state_dict`` for exact resume.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from typing import TypedDict, TypeVar

import torch
import torch.distributed as dist
from torch import Tensor

T = TypeVar("T")


class CorrQueueState(TypedDict):
    """What :meth:`CorrQueue.state_dict` returns."""

    pred: Tensor
    gold: Tensor
    max_size: int


class DocQueueState(TypedDict):
    """What :meth:`DocQueue.state_dict` returns."""

    ids: list[str]
    langs: list[str]
    emb: Tensor | None
    feats: Tensor | None


def _distributed() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def all_gather_rows(t: Tensor) -> Tensor:
    """Concatenate ``t`` [n_r, ...] from every rank along dim 0 (rank order); sizes may differ."""
    if not _distributed():
        return t
    world = dist.get_world_size()
    n = torch.tensor([t.shape[0]], device=t.device, dtype=torch.long)
    sizes = [torch.zeros_like(n) for _ in range(world)]
    dist.all_gather(sizes, n)
    top = int(max(int(s) for s in sizes))
    padded = t.new_zeros((top, *t.shape[1:]))
    padded[: t.shape[0]] = t
    parts = [torch.zeros_like(padded) for _ in range(world)]
    dist.all_gather(parts, padded.contiguous())
    return torch.cat([p[: int(s)] for p, s in zip(parts, sizes)], dim=0)


def all_gather_list(items: list[T]) -> list[T]:
    """Concatenate a picklable list from every rank (rank order)."""
    if not _distributed():
        return list(items)
    out: list[list[T]] = [[] for _ in range(dist.get_world_size())]
    dist.all_gather_object(out, list(items))
    return [x for part in out for x in part]


class CorrQueue:
    """FIFO of detached (pred, gold) pairs for the correlation loss (LiRA Eq. 30-34).

    Usage per step: ``p, t = q.concat(pred, gold)``; if ``q.ready(len(pred))`` compute
    ``corr_loss(p, t)`` and step; then ``q.push(pred, gold)`` (enqueue in any case).
    """

    def __init__(self, max_size: int, min_size: int = 0) -> None:
        if max_size < 0 or min_size < 0:
            raise ValueError(f"queue sizes must be >= 0, got max={max_size}, min={min_size}")
        self.max_size = max_size
        self.min_size = min_size
        self.pred = torch.zeros(0)  # [m]
        self.gold = torch.zeros(0)  # [m]

    def __len__(self) -> int:
        return int(self.pred.shape[0])

    def concat(self, pred: Tensor, gold: Tensor) -> tuple[Tensor, Tensor]:
        """[history; batch] of predictions and labels (history detached), each [m + B]."""
        hist_p = self.pred.to(device=pred.device, dtype=pred.dtype)
        hist_g = self.gold.to(device=gold.device, dtype=gold.dtype)
        return torch.cat([hist_p, pred]), torch.cat([hist_g, gold])

    def ready(self, batch_size: int) -> bool:
        """True when history + batch reach the warm-up threshold N_min (else: enqueue only)."""
        return len(self) + batch_size >= max(self.min_size, 2)

    def push(self, pred: Tensor, gold: Tensor) -> None:
        """Enqueue a batch (gathered from all ranks in DDP), keeping the newest ``max_size``."""
        pred = all_gather_rows(pred.detach().float())
        gold = all_gather_rows(gold.detach().float().to(pred.device))
        self.pred = torch.cat([self.pred.to(pred.device), pred])[-self.max_size :]
        self.gold = torch.cat([self.gold.to(pred.device), gold])[-self.max_size :]
        if self.max_size == 0:
            self.pred, self.gold = self.pred[:0], self.gold[:0]

    def state_dict(self) -> CorrQueueState:
        """Contents for exact resume."""
        return {"pred": self.pred.cpu(), "gold": self.gold.cpu(), "max_size": self.max_size}

    def load_state_dict(self, state: CorrQueueState) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.pred, self.gold = state["pred"].clone(), state["gold"].clone()


class DocQueue:
    """FIFO of detached (doc_id, lang, ẑ_d) for same-language hard-negative mining.

    Optional ``feats`` per document (the fusion head's inputs) let :meth:`mine` and
    :meth:`negatives` re-score queued documents with the current model (paper App. D.4:
    "re-score with the current model and then take top-M"). A doc id pushed again replaces
    its older entry.
    """

    def __init__(self, max_size: int) -> None:
        if max_size < 0:
            raise ValueError(f"max_size must be >= 0, got {max_size}")
        self.max_size = max_size
        self.ids: list[str] = []
        self.langs: list[str] = []
        self.emb: Tensor | None = None  # [n, d]
        self.feats: Tensor | None = None  # [n, ...] fusion inputs, or None

    def __len__(self) -> int:
        return len(self.ids)

    def push(
        self, ids: Sequence[str], langs: Sequence[str], emb: Tensor, feats: Tensor | None = None
    ) -> None:
        """Enqueue documents (gathered from all ranks in DDP), newest ``max_size`` kept."""
        if len(ids) != emb.shape[0] or len(langs) != emb.shape[0]:
            raise ValueError(f"push needs one id and lang per row: {len(ids)}, {emb.shape}")
        ids = all_gather_list(list(ids))
        langs = all_gather_list(list(langs))
        emb = all_gather_rows(emb.detach())
        feats = all_gather_rows(feats.detach()) if feats is not None else None
        # a doc pushed twice (in this call or before) keeps its newest entry only
        last = {d: i for i, d in enumerate(ids)}
        keep_new = [i for i, d in enumerate(ids) if last[d] == i]
        keep_old = [i for i, d in enumerate(self.ids) if d not in last]
        old_emb = self.emb if self.emb is not None else emb[:0]
        all_ids = [self.ids[i] for i in keep_old] + [ids[i] for i in keep_new]
        all_langs = [self.langs[i] for i in keep_old] + [langs[i] for i in keep_new]
        all_emb = torch.cat([old_emb[keep_old].to(emb.device), emb[keep_new]])
        all_feats = None
        if feats is not None:
            old_f = self.feats if self.feats is not None else feats[:0]
            all_feats = torch.cat([old_f[keep_old].to(feats.device), feats[keep_new]])
        start = max(len(all_ids) - self.max_size, 0)
        self.ids, self.langs = all_ids[start:], all_langs[start:]
        self.emb = all_emb[start:]
        self.feats = all_feats[start:] if all_feats is not None else None

    def mine(
        self,
        query: Tensor,
        positive_ids: Sequence[str | Collection[str]],
        langs: Sequence[str],
        m: int,
        batch_ids: Sequence[str] = (),
        batch_langs: Sequence[str] = (),
        batch_emb: Tensor | None = None,
        rescore: Callable[[Tensor], Tensor] | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Top-``m`` hardest negatives per query among batch ∪ queue, same language only.

        ``query``: [Q, d] current query embeddings; ``positive_ids[q]``: the id (or ids) that
        must never be a negative of query q; ``langs[q]``: the language negatives must have.
        Pool order: the B batch documents, then the queue. Returns (indices [Q, m'] into that
        pool, valid [Q, m'] bool), m' = min(m, pool size). Queued entries are scored with
        ``rescore(feats)`` (the current model, no grad) when both are available.
        """
        b = len(batch_ids)
        pool_ids = list(batch_ids) + [d for d in self.ids if d not in set(batch_ids)]
        in_batch = set(batch_ids)
        q_keep = [i for i, d in enumerate(self.ids) if d not in in_batch]
        pool_langs = list(batch_langs) + [self.langs[i] for i in q_keep]
        parts = []
        if b:
            if batch_emb is None or batch_emb.shape[0] != b:
                raise ValueError("mine: batch_emb must have one row per batch id")
            parts.append(batch_emb.detach())
        if q_keep:
            queued = self._current(rescore)[q_keep].to(query.device, query.dtype)
            parts.append(queued)
        n = len(pool_ids)
        if n == 0 or m <= 0:
            empty = torch.zeros(query.shape[0], 0, dtype=torch.long, device=query.device)
            return empty, empty.bool()
        with torch.no_grad():
            scores = query.detach() @ torch.cat(parts).T  # [Q, n]
        allowed = torch.zeros_like(scores, dtype=torch.bool)
        lang_idx: dict[str, list[int]] = {}
        for j, lang in enumerate(pool_langs):
            lang_idx.setdefault(lang, []).append(j)
        pos_of = {d: j for j, d in enumerate(pool_ids)}
        for qi, (pos, lang) in enumerate(zip(positive_ids, langs)):
            allowed[qi, lang_idx.get(lang, [])] = True
            for d in [pos] if isinstance(pos, str) else pos:
                if d in pos_of:
                    allowed[qi, pos_of[d]] = False
        scores = scores.masked_fill(~allowed, float("-inf"))
        top = scores.topk(min(m, n), dim=1)
        self._pool_map = [None] * b + q_keep  # pool index -> queue index (None = batch)
        return top.indices, torch.isfinite(top.values)

    def negatives(
        self,
        indices: Tensor,
        batch_emb: Tensor,
        rescore: Callable[[Tensor], Tensor] | None = None,
    ) -> Tensor:
        """Embeddings [Q, m, d] of mined pool ``indices``: batch rows keep their gradient,
        queued rows are re-scored with ``rescore(feats)`` (with grad) or taken as cached."""
        b = batch_emb.shape[0]
        flat = indices.reshape(-1).tolist()
        q_rows = sorted({self._pool_map[i] for i in flat if i >= b})
        table = {}
        if q_rows:
            if rescore is not None and self.feats is not None:
                fresh = rescore(self.feats[q_rows].to(batch_emb.device))
            else:
                fresh = self.emb[q_rows].to(batch_emb.device, batch_emb.dtype)  # type: ignore[index]
            table = {r: fresh[k] for k, r in enumerate(q_rows)}
        rows = [batch_emb[i] if i < b else table[self._pool_map[i]] for i in flat]
        if not rows:
            return batch_emb.new_zeros(*indices.shape, batch_emb.shape[-1])
        return torch.stack(rows).reshape(*indices.shape, -1)

    def _current(self, rescore: Callable[[Tensor], Tensor] | None) -> Tensor:
        assert self.emb is not None
        if rescore is None or self.feats is None:
            return self.emb
        with torch.no_grad():
            return rescore(self.feats)

    def state_dict(self) -> DocQueueState:
        """Contents for exact resume."""
        return {
            "ids": list(self.ids),
            "langs": list(self.langs),
            "emb": None if self.emb is None else self.emb.cpu(),
            "feats": None if self.feats is None else self.feats.cpu(),
        }

    def load_state_dict(self, state: DocQueueState) -> None:
        """Restore what :meth:`state_dict` returned."""
        self.ids, self.langs = list(state["ids"]), list(state["langs"])
        self.emb, self.feats = state["emb"], state["feats"]
