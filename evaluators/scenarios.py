"""Evaluation scenarios on parallel retrieval data (XQuAD-R and any set with the same shape).

For a target language T and question ids Q:
- ``en-en``: English queries -> English sentences (CLEAR, paper 000).
- ``lang-en``: T queries -> English sentences (CLEAR Lang-En; paper 003 Mono-Cross; LiRA's L->En).
- ``en-lang``: English queries -> T sentences (CLEAR En-Lang).
- ``mono-same``: T queries -> T sentences (paper 003 Mono-Same).
- ``mono-cross``: T queries -> English sentences (paper 003 Mono-Cross = conventional CLIR).
- ``multi``: T queries -> the pool of English and T sentences; both parallel gold sentences are
  relevant (paper 003 Multi; Complete@K, Max@R, Max@R_norm with |R| = 2).
- ``multi-1``: as Multi but the gold sentence in the query's own language is removed from the
  pool, so the one relevant document is in the other language (paper 003 Multi-1).
Each 003 scenario is also built with English queries (``<name>@en``) for the English-query vs
target-query gap.
"""

from __future__ import annotations

from dataclasses import dataclass

from lira.data.types import Record
from lira.data.xquad_r import XQuADR, query_id

SCENARIOS = ("en-en", "lang-en", "en-lang", "multi", "multi-1", "mono-same", "mono-cross")


@dataclass
class Scenario:
    """Queries, a document pool and qrels for one scenario and language."""

    name: str
    language: str
    queries: list[Record]
    docs: list[Record]
    qrels: dict[str, dict[str, int]]

    @property
    def multi_reference(self) -> bool:
        """True when queries have several relevant documents (Multi)."""
        return any(len(r) > 1 for r in self.qrels.values())


def _pair(ds: XQuADR, name: str, lang: str, q_lang: str, d_langs: list[str], qids: list[str],
          drop_own_gold: bool = False) -> Scenario:  # fmt: skip
    queries = [ds.question(q_lang, q) for q in qids]
    docs = [r for d in d_langs for r in ds.sentences(d)]
    qrels = {query_id(q, q_lang): {ds.gold_sentence(d, q).id: 1 for d in d_langs} for q in qids}
    if drop_own_gold:  # Multi-1: the query-language gold leaves the pool
        removed = {ds.gold_sentence(q_lang, q).id for q in qids}
        docs = [r for r in docs if r.id not in removed]
        for q in qids:
            qrels[query_id(q, q_lang)].pop(ds.gold_sentence(q_lang, q).id, None)
    return Scenario(name, lang, queries, docs, qrels)


def build_scenarios(
    ds: XQuADR, names: list[str], languages: list[str], qids: list[str]
) -> list[Scenario]:
    """Every requested scenario for every target language (English itself only for en-en)."""
    out: list[Scenario] = []
    if "en-en" in names:
        out.append(_pair(ds, "en-en", "en", "en", ["en"], qids))
    for t in [lang for lang in languages if lang != "en"]:
        for name in names:
            if name == "lang-en":
                out.append(_pair(ds, name, t, t, ["en"], qids))
            elif name == "en-lang":
                out.append(_pair(ds, name, t, "en", [t], qids))
            elif name == "mono-same":
                out.append(_pair(ds, name, t, t, [t], qids))
            elif name == "mono-cross":
                out.append(_pair(ds, name, t, t, ["en"], qids))
            elif name in ("multi", "multi-1"):
                for q_lang, suffix in ((t, ""), ("en", "@en")):
                    out.append(_pair(ds, name + suffix, t, q_lang, ["en", t], qids,
                                     drop_own_gold=name == "multi-1"))  # fmt: skip
    return out
