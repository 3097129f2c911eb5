"""Training-data language compositions D(l1 l2 l3) and the GIST guided loss (paper 001).

Paper 001 (Korean-English CLIR) writes a training set as D(l1 l2 l3): queries in l1,
positives in l2, negatives in l3 (e.g. D(koenen) = Korean queries, English positives and
negatives), built from *parallel* data so that every composition holds the same examples.
Models are trained with GISTEmbedLoss (Solatorio 2024) with a frozen guide model:

    s_ij = cos(a_i, c_j)/τ over candidates c ∈ {positives, anchors, positives, negatives};
    a candidate j is dropped (s_ij = -inf) when g(a_i, c_j) > g(a_i, p_i) - margin,
    L = CE(s_i, i),

where g is the guide's cosine similarity (false-negative suppression; the anchor's own
positive is never dropped, and anchor-anchor / positive-positive self pairs always are since
g = 1 there). The guide is the frozen initial backbone here (the paper uses bge-m3).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor

from lira.data.types import ParallelData


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
    """One training triple of a composition; ``doc_id`` names the positive (false negatives)."""

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
    num_negatives: int = 1,
    seed: int = 0,
    negative_rows: list[list[int]] | None = None,
) -> list[CompositionExample]:
    """The examples of D(l1 l2 l3): row i = (query_i in l1, passage_i in l2, negatives in l3).

    ``queries`` and ``passages`` are row-aligned parallel data (passage i is the gold of query
    i). Negatives are other rows' passages in l3 whose positive differs (same English/first
    text = same document), taken from ``negative_rows`` (e.g. mined hard negatives) when
    given, else drawn at random with ``seed``.
    """
    comp = parse_composition(spec) if isinstance(spec, str) else spec
    if len(queries.ids) != len(passages.ids):
        raise ValueError(
            f"queries ({len(queries.ids)} rows) and passages ({len(passages.ids)}) must be "
            "row-aligned parallel data"
        )
    for what, data, lang in (
        ("query", queries, comp.query),
        ("positive", passages, comp.positive),
        ("negative", passages, comp.negative),
    ):
        if lang not in data.texts:
            raise ValueError(
                f"D({comp.name}) needs {what}s in '{lang}' but the data has {sorted(data.texts)}"
            )
    key_lang = "en" if "en" in passages.texts else sorted(passages.texts)[0]
    doc_keys = passages.texts[key_lang]
    rng = random.Random(seed)
    n = len(queries.ids)
    out = []
    for i in range(n):
        cands = negative_rows[i] if negative_rows is not None else None
        if cands is None:
            cands = rng.sample(range(n), min(n, num_negatives + 8))
        negs = [j for j in cands if doc_keys[j] != doc_keys[i]][:num_negatives]
        if len(negs) < num_negatives:
            negs += [j for j in range(n) if doc_keys[j] != doc_keys[i] and j not in negs][
                : num_negatives - len(negs)
            ]
        if len(negs) < num_negatives:
            raise ValueError(f"row {i} has fewer than {num_negatives} distinct negatives")
        out.append(
            CompositionExample(
                query=queries.texts[comp.query][i],
                positive=passages.texts[comp.positive][i],
                negatives=[passages.texts[comp.negative][j] for j in negs],
                doc_id=doc_keys[i],
            )
        )
    return out


def guided_info_nce(
    anchor: Tensor,
    positive: Tensor,
    negatives: Tensor | None,
    g_anchor: Tensor,
    g_positive: Tensor,
    g_negatives: Tensor | None,
    tau: float = 0.05,
    margin: float = 0.0,
    contrast_anchors: bool = True,
    contrast_positives: bool = True,
) -> Tensor:
    """GIST guided contrastive loss (Solatorio 2024; paper 001 §3) with guide-similarity masks.

    anchor/positive [B, d], negatives [B, K, d] or None; g_* the guide's embeddings of the same
    texts (any width d_g). Returns the mean cross-entropy over the batch.
    """
    b = anchor.shape[0]

    def cos(x: Tensor, y: Tensor) -> Tensor:
        return F.normalize(x.float(), dim=-1) @ F.normalize(y.float(), dim=-1).T

    with torch.no_grad():
        g_ap = cos(g_anchor, g_positive)  # [B, B]
        thresh = g_ap.diagonal().view(-1, 1) - margin  # [B, 1]
    own = torch.eye(b, dtype=torch.bool, device=anchor.device)
    blocks = [cos(anchor, positive).masked_fill((g_ap > thresh) & ~own, float("-inf"))]
    if contrast_anchors:
        g = cos(g_anchor, g_anchor)
        blocks.append(cos(anchor, anchor).masked_fill((g > thresh) | own, float("-inf")))
    if contrast_positives:
        g = cos(g_positive, g_positive)
        blocks.append(cos(positive, positive).masked_fill((g > thresh) | own, float("-inf")))
    if negatives is not None and negatives.numel() > 0:
        if g_negatives is None:
            raise ValueError("negatives given without the guide's g_negatives")
        neg = negatives.reshape(-1, negatives.shape[-1])  # [B*K, d]
        g = cos(g_anchor, g_negatives.reshape(-1, g_negatives.shape[-1]))  # [B, B*K]
        blocks.append(cos(anchor, neg).masked_fill(g > thresh, float("-inf")))
    logits = torch.cat(blocks, dim=1) / tau  # [B, C]
    return F.cross_entropy(logits, torch.arange(b, device=anchor.device))
