"""Training-data language compositions D(l1 l2 l3), their mined negatives, the GIST loss (paper 001).

Paper 001 (Korean-English CLIR) writes a training set as D(l1 l2 l3): queries in l1,
positives in l2, negatives in l3 (e.g. D(koenen) = Korean queries, English positives and
negatives), built from *parallel* data so that every composition holds the same examples.

Negatives (App. B.2): for each English query the English documents are ranked by a retriever
(NV-Embed-v2 there), candidates are taken from ranks 50-300, a candidate is dropped when its
cosine with the query exceeds 0.8 or is not below 0.95 × the positive's cosine, and the
first 5 that remain are kept (a sixth, LLM-generated negative has no counterpart here).
:func:`mine_filtered_negatives` does this with the initial backbone as the retriever. When a
query has fewer than k candidates passing the filters in the window, the ranks after the
window and then before it are searched, and only then are filtered-out items used (logged).
With a small corpus the window is clamped to the ranked items (logged).

Loss: the models are trained with sentence-transformers' ``CachedGISTEmbedLoss`` (Solatorio
2024; App. B.3), here the library's own class: :class:`SentenceView` lets it call our
encoders, :func:`gist_features` builds its input columns (anchor, positive, negative_1..k).
For anchor a_i with guide g, positive p_i and candidates c ∈ {positives, anchors, positives,
negatives} of the batch, s_ic = cos(a_i, c)/τ, candidates with g(a_i, c) > g(a_i, p_i)
(absolute margin 0, the library's default) are dropped except p_i itself, and
L = CE(s_i, i). The guide is the frozen initial backbone (the paper's guide is bge-m3, which
is not available offline); τ = 0.01 is the library's default (the paper sets none).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from lira.baselines.clear import rank_window, too_few_negatives
from lira.config import ConfigError
from lira.data.types import ParallelData

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Composition:
    """The languages of the query, the positive and the negatives of D(l1 l2 l3)."""

    query: str
    positive: str
    negative: str

    @property
    def name(self) -> str:
        """The paper's notation, e.g. 'deenen'."""
        return f"{self.query}{self.positive}{self.negative}"


@dataclass
class CompositionExample:
    """One training row of a composition; ``doc_id`` names the positive (false negatives)."""

    query: str
    positive: str
    negatives: list[str]
    doc_id: str


def parse_composition(spec: str) -> Composition:
    """Parse 'deenen' or 'de-en-en' (three ISO 639-1 codes) into a :class:`Composition`."""
    parts = spec.split("-") if "-" in spec else [spec[i : i + 2] for i in range(0, len(spec), 2)]
    if len(parts) != 3 or not all(len(p) == 2 and p.isalpha() for p in parts):
        raise ValueError(
            f"composition '{spec}' must be three 2-letter language codes, e.g. 'deenen' or de-en-en"
        )
    return Composition(*(p.lower() for p in parts))


def build_composition(
    queries: ParallelData,
    passages: ParallelData,
    spec: str | Composition,
    negatives: dict[str, list[list[str]]],
) -> list[CompositionExample]:
    """The examples of D(l1 l2 l3): row i = (query_i in l1, passage_i in l2, negatives_i in l3).

    ``queries`` and ``passages`` are row-aligned parallel data (passage i is the gold of query
    i); ``negatives[lang][i]`` are row i's mined negatives in ``lang`` (App. B.2 mines them
    once, in English, and every composition reuses them in its l3).
    """
    comp = parse_composition(spec) if isinstance(spec, str) else spec
    if len(queries.ids) != len(passages.ids):
        raise ValueError(
            f"queries ({len(queries.ids)} rows) and passages ({len(passages.ids)}) must be "
            "row-aligned parallel data"
        )
    for what, data, lang in (("query", queries.texts, comp.query),
                             ("positive", passages.texts, comp.positive),
                             ("negative", negatives, comp.negative)):  # fmt: skip
        if lang not in data:
            raise ValueError(
                f"D({comp.name}) needs {what}s in '{lang}' but the data has {sorted(data)}"
            )
    if len(negatives[comp.negative]) != len(queries.ids):
        raise ValueError(
            f"negatives hold {len(negatives[comp.negative])} rows for {len(queries.ids)} queries"
        )
    key_lang = "en" if "en" in passages.texts else sorted(passages.texts)[0]
    return [
        CompositionExample(
            query=queries.texts[comp.query][i],
            positive=passages.texts[comp.positive][i],
            negatives=list(negatives[comp.negative][i]),
            doc_id=passages.texts[key_lang][i],
        )
        for i in range(len(queries.ids))
    ]


@torch.no_grad()
def mine_filtered_negatives(
    queries: Tensor,
    pool: Tensor,
    positives: Tensor,
    query_ids: Tensor,
    pool_ids: Tensor,
    k: int,
    ranks: tuple[int, int] = (50, 300),
    max_sim: float = 0.8,
    relative_margin: float = 0.95,
    key: str = "baselines.merging.negatives",
) -> Tensor:
    """Indices [N, k] of paper 001's hard negatives (App. B.2) for each query.

    queries [N, d], pool [M, d], positives [N, d] (each query's gold document); pool items
    with the query's id are never negatives. Kept: the first k items in ranks [first, last]
    with cos(q, n) <= ``max_sim`` and cos(q, n) < ``relative_margin`` · cos(q, p). More
    negatives than a query can rank is a ConfigError naming ``key`` (the field that gave ``k``).
    """
    n = queries.shape[0]
    if k == 0 or n == 0:
        return torch.zeros(n, 0, dtype=torch.long)
    q = F.normalize(queries.float(), dim=-1)
    sim = q @ F.normalize(pool.float(), dim=-1).T  # [N, M]
    pos = (q * F.normalize(positives.float(), dim=-1)).sum(-1)  # [N]
    same = query_ids.view(-1, 1) == pool_ids.view(1, -1)
    usable = int((~same).sum(1).min())
    if k > usable:
        raise ConfigError(key, too_few_negatives(k, "negatives", usable))
    first, last = rank_window(ranks[0], ranks[1], usable, k)
    if (first, last) != tuple(ranks):
        log.info(
            "composition negatives: rank window %d-%d clamped to %d-%d (%d rankable documents)",
            ranks[0], ranks[1], first, last, usable,
        )  # fmt: skip
    order = sim.masked_fill(same, float("-inf")).argsort(dim=1, descending=True)[:, :usable]
    ok = (sim <= max_sim) & (sim < relative_margin * pos.view(-1, 1))  # [N, M]
    search = torch.cat([order[:, first - 1 : last], order[:, last:], order[:, : first - 1]], 1)
    passing = ok.gather(1, search).cpu().numpy()  # [N, usable], in search order
    search = search.cpu().numpy()
    out, relaxed = [], 0
    for i in range(n):
        keep = np.flatnonzero(passing[i])[:k]
        if len(keep) < k:  # too few pass the filters: the best-ranked others fill the row
            relaxed += 1
            keep = np.concatenate([keep, np.flatnonzero(~passing[i])[: k - len(keep)]])
        out.append(search[i, keep].tolist())
    if relaxed:
        log.warning(
            "composition negatives: %d of %d queries had < %d documents passing the filters "
            "(cos <= %.2f, < %.2f x positive); filled with filtered-out ones in search order",
            relaxed, n, k, max_sim, relative_margin,
        )  # fmt: skip
    return torch.tensor(out, dtype=torch.long)


class SentenceView(nn.Module):
    """An encoder as sentence-transformers' losses call a model: {'row'} -> {'sentence_embedding'}.

    ``row`` [N] indexes ``table`` (text, kind) pairs, set by :func:`gist_features` before the
    loss runs; the texts are encoded by ``encoder(texts, kind=...)`` (our Backbone, possibly
    wrapped by accelerate), so prompts, truncation and pooling stay the backbone's own. The
    loss slices ``row`` into mini-batches; a column never mixes kinds.
    """

    def __init__(
        self, encoder: nn.Module, tokenizer: PreTrainedTokenizerBase, max_length: int
    ) -> None:
        super().__init__()
        self.encoder = encoder
        self.tokenizer = tokenizer  # checked by sentence-transformers; token ids never leave
        self.max_seq_length = max_length
        self.table: list[tuple[str, str]] = []

    def __getitem__(self, index: int) -> nn.Module:
        """The first module (sentence-transformers checks it is no StaticEmbedding)."""
        return self.encoder

    def forward(self, features: dict[str, Tensor]) -> dict[str, Tensor]:
        """{'sentence_embedding': [N, d]} of the table rows in ``features['row']``."""
        rows = [self.table[r] for r in features["row"].tolist()]
        kinds = {kind for _, kind in rows}
        if len(kinds) != 1:
            raise ValueError(f"one mini-batch must hold one kind of text, got {sorted(kinds)}")
        return {"sentence_embedding": self.encoder([t for t, _ in rows], kind=kinds.pop())}


def gist_loss(
    model: nn.Module, guide: nn.Module, tokenizer: PreTrainedTokenizerBase, max_length: int, tau: float,
    mini_batch: int,
) -> nn.Module:  # fmt: skip
    """sentence-transformers' CachedGISTEmbedLoss over :class:`SentenceView` s of two encoders."""
    try:
        from sentence_transformers.sentence_transformer.losses import CachedGISTEmbedLoss
    except ImportError:  # sentence-transformers < 6
        from sentence_transformers.losses import CachedGISTEmbedLoss

    loss = CachedGISTEmbedLoss(
        SentenceView(model, tokenizer, max_length),
        SentenceView(guide, tokenizer, max_length),
        temperature=tau,
        mini_batch_size=mini_batch,
    )
    loss.must_retokenize = False  # each view encodes the texts itself
    return loss


def gist_features(
    loss: nn.Module, columns: list[list[str]], kinds: list[str], device: torch.device
) -> list[dict[str, Tensor]]:
    """The loss's input columns (anchor, positive, negative_1..k) for ``columns`` of texts."""
    table = [(t, kind) for col, kind in zip(columns, kinds) for t in col]
    loss.model.table = loss.guide.table = table
    out, start = [], 0
    for col in columns:
        out.append({"row": torch.arange(start, start + len(col), device=device)})
        start += len(col)
    return out
