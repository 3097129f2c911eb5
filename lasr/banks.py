"""LaSR's stream banks and held-out metrics (LiRA paper §4.2, App. D.4).

A :class:`StreamBank` holds the pre-computed streams of a set of texts (E_en, the pooled g
bins, the gate features; :meth:`lasr.model.LiRAModel.streams`), built once per run by
:func:`build_bank` (:func:`retrieval_banks` for queries and corpus, :func:`pair_bank` for STS
pairs). :func:`evaluate_retrieval` and :func:`evaluate_pairs` measure a :class:`LaSRNet` on
them: nDCG@k / soft nDCG loss per query language, Pearson / Spearman (both:
:func:`held_out_metrics`). :func:`trainable_queries` and :func:`corpus_negatives` are LaSR
training's reads of a bank.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import Tensor
from tqdm.auto import tqdm

from lasr.config import LaSRConfig
from lasr.fusion import LaSRNet
from lasr.losses import soft_ndcg_loss
from lasr.model import LiRAModel
from lasr.streams import Streams
from lira.accelerator import live_world, process_state
from lira.data.types import PairData, Record, RetrievalData
from lira.encoding import length_batches
from lira.metrics import ndcg_dense, sts_correlations


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
    model: LiRAModel,
    keys: list[str],
    texts: list[str],
    langs: list[str],
    kind: str,
    batch_size: int,
) -> StreamBank:
    """Streams of ``texts`` from ``model.streams`` in length-sorted batches of ``batch_size``
    (memoised there: each distinct (kind, lang, text) is computed once per run).

    The English stream uses the inference selection: train-only references (gold English) are
    Arca's anchors, never LaSR inputs, so the head trains on the translations it is evaluated
    on.
    """
    model.cache_streams = True
    if live_world()[0] > 1:  # each text computed on one process, gathered to all
        share_streams(model, texts, langs, kind, batch_size)
    batches = length_batches(texts, batch_size)  # longest first: less padding
    main = live_world()[1] == 0
    bar = tqdm(batches, desc=f"lasr: {kind} bank (h, g, Arca)", unit="batch", leave=False,
               disable=not main or len(batches) < 2)  # fmt: skip
    parts = [model.streams([texts[i] for i in idx], [langs[i] for i in idx], kind=kind)
             for idx in bar]  # fmt: skip
    if not parts:
        return StreamBank(list(keys), list(langs), list(texts), model.streams([], [], kind=kind))
    order = torch.tensor([i for idx in batches for i in idx])
    streams = Streams.cat(parts).select(order.argsort())  # back to input order
    return StreamBank(list(keys), list(langs), list(texts), streams)


PER_QUERY = "per_query"
"""The key of :func:`evaluate_retrieval`'s {query id: nDCG@k} (what the validation selection
pairs; left out of logs and ``metrics.json``)."""
GATHER_ROWS = 2048
"""Rows of a bank gathered across processes per collective call (bounds the padded buffer)."""


def share_streams(
    model: LiRAModel,
    texts: list[str],
    langs: list[str],
    kind: str,
    batch_size: int,
) -> None:
    """Memoise the streams of every distinct not-yet-memoised ``kind`` text on every process,
    each computed by one: the length-sorted batches go round-robin over the processes, the
    rows are gathered (``accelerate.utils.gather``, :data:`GATHER_ROWS` at a time); the
    translation counters and the frozen-g cache (:meth:`arca.g_cache.GEmbeddingCache.sync`:
    one writer) end as one process would leave them."""
    from accelerate.utils import gather, gather_object, pad_across_processes

    todo, todo_langs = model.unmemoised(texts, langs, kind)
    world, rank = live_world()
    device = process_state().device  # where the collectives run (the process's GPU, or CPU)
    batches = length_batches(todo, batch_size)
    shards = [[i for idx in batches[r::world] for i in idx] for r in range(world)]
    seen = (model.missing_translations, model.translation_lookups)
    mine = batches[rank::world]  # batches as one process would compute them
    computed = [
        model.streams([todo[i] for i in idx], [todo_langs[i] for i in idx], kind=kind)
        for idx in mine
    ]
    local = Streams.cat(computed) if computed else model.streams([], [], kind=kind)
    counts = gather_object(
        [(model.missing_translations - seen[0], model.translation_lookups - seen[1])]
    )
    model.missing_translations = seen[0] + sum(c[0] for c in counts)
    model.translation_lookups = seen[1] + sum(c[1] for c in counts)
    if model.arca.g_cache is not None:
        model.arca.g_cache.sync()
    longest = max(len(s) for s in shards)
    gathered: list[list[Tensor]] = [[] for _ in range(world)]
    for t in local.tensors():  # e_en, g_bins, feats, e_raw, g_tr (Streams.tensors)
        parts: list[list[Tensor]] = [[] for _ in range(world)]
        for c in range(0, longest, GATHER_ROWS):
            chunk = pad_across_processes(t[c : c + GATHER_ROWS].to(device), dim=0)
            rows = gather(chunk).cpu().view(world, -1, *t.shape[1:])  # [world, chunk, ...]
            for r in range(world):
                parts[r].append(rows[r, : max(0, min(GATHER_ROWS, len(shards[r]) - c))])
        for r in range(world):
            gathered[r].append(torch.cat(parts[r]) if parts[r] else t[:0])
    for r in range(world):
        if r != rank and shards[r]:
            model.memoise([todo[i] for i in shards[r]], [todo_langs[i] for i in shards[r]],
                          kind, Streams(*gathered[r]))  # fmt: skip


def records_bank(model: LiRAModel, records: list[Record], kind: str, batch_size: int) -> StreamBank:
    """Bank of ``records`` keyed by their ids."""
    ids, texts, langs = (
        [r.id for r in records],
        [r.text for r in records],
        [r.lang for r in records],
    )
    return build_bank(model, ids, texts, langs, kind, batch_size)


def retrieval_banks(
    model: LiRAModel, data: RetrievalData, batch_size: int
) -> tuple[StreamBank, StreamBank]:
    """(query bank, corpus bank) of a retrieval data set."""
    q = records_bank(model, data.queries, "query", batch_size)
    return q, records_bank(model, data.corpus, "document", batch_size)


def pair_bank(model: LiRAModel, pairs: PairData, batch_size: int) -> StreamBank:
    """Bank of every distinct sentence of a pair data set (keyed 'lang\\ttext': :func:`pair_keys`)."""
    k1, k2 = pair_keys(pairs)
    keys = list(dict.fromkeys(k1 + k2))
    langs, texts = zip(*(k.split("\t", 1) for k in keys)) if keys else ((), ())
    return build_bank(model, keys, list(texts), list(langs), "query", batch_size)


def pair_keys(pairs: PairData) -> tuple[list[str], list[str]]:
    """Bank keys of sentence1 and sentence2 of every pair."""
    l1 = pairs.lang1 or ["xx"] * len(pairs.sentence1)
    l2 = pairs.lang2 or ["xx"] * len(pairs.sentence2)
    return (
        [f"{lang}\t{t}" for t, lang in zip(pairs.sentence1, l1)],
        [f"{lang}\t{t}" for t, lang in zip(pairs.sentence2, l2)],
    )


SOFT_NDCG_ELEMENTS = 2**26
"""Bound on the [queries, C, C] elements of one soft nDCG call in :func:`evaluate_retrieval`
(16 queries at a time, fewer over a large corpus: it runs on the net's device)."""


def relevance_matrix(
    qkeys: Sequence[str], dkeys: Sequence[str], qrels: dict[str, dict[str, int]]
) -> Tensor:
    """Binary labels [Q, D]: 1 where ``qrels[qkeys[i]][dkeys[j]] > 0``, built from the
    judgements (O(judgements), not a loop over every query x document)."""
    col = {d: j for j, d in enumerate(dkeys)}
    rows, cols = [], []
    for i, q in enumerate(qkeys):
        for d, v in qrels.get(q, {}).items():
            j = col.get(d)
            if v > 0 and j is not None:
                rows.append(i)
                cols.append(j)
    y = torch.zeros(len(qkeys), len(dkeys))
    y[rows, cols] = 1.0
    return y


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
) -> dict[str, object]:
    """True nDCG@k (binary gains; :func:`lira.metrics.ndcg_dense`, equal to pytrec_eval's) and
    1 − soft nDCG@k over each query's same-language corpus, for the queries of ``qbank`` that
    have judgements; ``by_lang`` per query language and their mean ``macro``, and each query's
    nDCG@k under :data:`PER_QUERY`."""
    net.eval()
    dev = next(net.parameters()).device  # scores and losses on the net's device
    zq = embed_rows(net, qbank.streams, dev).float()  # [Q, d]
    zd = embed_rows(net, dbank.streams, dev).float()  # [D, d]
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
        y = relevance_matrix([qbank.keys[q] for q in rows], [dbank.keys[j] for j in cols], qrels)
        y = y.to(dev)  # [q, C]
        true.update(zip(rows, ndcg_dense(s, y, k).tolist()))
        step = max(1, min(16, SOFT_NDCG_ELEMENTS // max(1, len(cols) ** 2)))
        for c in range(0, len(rows), step):  # O(rows · C²) memory: a few queries at a time
            part = slice(c, c + step)
            loss = soft_ndcg_loss(
                s[part], y[part], k=k, tau=cfg.tau, tau_k=cfg.tau_k, safe_negatives=False
            )
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
        PER_QUERY: {qbank.keys[q]: v for q, v in true.items()},
    }


@torch.no_grad()
def evaluate_pairs(net: LaSRNet, bank: StreamBank, pairs: PairData) -> dict[str, object]:
    """Pearson and Spearman (:func:`lira.metrics.sts_correlations`, scipy; not x100) of cosine
    predictions against gold pair scores."""
    net.eval()
    k1, k2 = pair_keys(pairs)
    dev = next(net.parameters()).device
    pred = (embed_rows(net, bank.rows(k1), dev) * embed_rows(net, bank.rows(k2), dev)).sum(-1).cpu()
    gold = np.asarray(pairs.scores, dtype=np.float64)
    return {**sts_correlations(pred.double().numpy(), gold, scale=1.0), "pairs": len(gold)}


def held_out_metrics(
    model: LiRAModel,
    net: LaSRNet,
    cfg: LaSRConfig,
    retrieval: RetrievalData | None = None,
    pairs: PairData | None = None,
) -> dict[str, object]:
    """``net``'s held-out metrics on fresh banks of ``model``: ``retrieval`` (nDCG@k, soft loss)
    and ``rank`` (Pearson / Spearman), for the data given."""
    out: dict[str, object] = {}
    if retrieval is not None:
        qb, db = retrieval_banks(model, retrieval, cfg.encode_batch_size)
        out["retrieval"] = evaluate_retrieval(net, qb, db, retrieval.qrels, cfg.ndcg_k, cfg)
    if pairs is not None:
        bank = pair_bank(model, pairs, cfg.encode_batch_size)
        out["rank"] = evaluate_pairs(net, bank, pairs)
    return out


def trainable_queries(retrieval: RetrievalData, docs: StreamBank) -> list[str]:
    """Ids of the queries with a relevant document in ``docs`` (a ValueError when none has)."""
    out = [
        r.id
        for r in retrieval.queries
        if any(d in docs.index and v > 0 for d, v in retrieval.qrels.get(r.id, {}).items())
    ]
    if not out:
        raise ValueError("lasr: no training query has a relevant document in the corpus")
    return out


@torch.no_grad()
def corpus_negatives(
    net: LaSRNet,
    bank: StreamBank,
    zq: Tensor,
    pos: list[str],
    relevant: list[set[str]],
    num: int,
    device: torch.device | str,
) -> tuple[Tensor, Tensor]:
    """The ``num`` hardest negatives of each query zq [B, d] in the whole ``bank``, scored by
    ``net`` in eval mode: in its positive's language, never a relevant document. Returns scores
    [B, M] (-inf: no such negative) and bank rows [B, M], M = min(num, len(bank))."""
    was = net.training
    net.eval()
    zall = embed_rows(net, bank.streams, device)  # [D, d]
    net.train(was)
    s_all = zq.detach() @ zall.T  # [B, D]
    langs = np.asarray(bank.langs)
    for b, p in enumerate(pos):
        off = langs != langs[bank.index[p]]
        off[[bank.index[d] for d in relevant[b] if d in bank.index]] = True
        s_all[b, torch.from_numpy(off).to(s_all.device)] = float("-inf")
    top = s_all.topk(min(num, s_all.shape[1]), dim=1)
    return top.values, top.indices
