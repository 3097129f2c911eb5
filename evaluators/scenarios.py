"""Evaluation scenarios on parallel retrieval data (XQuAD-R and any set with the same shape).

Our names are *query language → document language*; T is the target language (paper 001's
"ko", a Korean-English study):

- ``en-en``: English queries → English sentences. CLEAR (000) "English-English"; paper 001
  T(en-en); the English-query half of paper 003's Mono-Same.
- ``lang-en``: T queries → English sentences. CLEAR (000) "English-Lang" (CLEAR names the
  *passage* language first, so its English-Lang is English passages with T queries); paper 001
  T(ko-en); the T-query half of paper 003's Mono-Cross; the README's L→En.
- ``en-lang``: English queries → T sentences. CLEAR (000) "Lang-English"; paper 001 T(en-ko);
  the English-query half of paper 003's Mono-Cross.
- ``mono-same`` / ``mono-same@en``: paper 003 Mono-Same (Table 2, "English/target language
  queries"): T queries → T sentences, and its English-query half, English → English.
- ``mono-cross`` / ``mono-cross@en``: paper 003 Mono-Cross (Table 2): T queries → English
  sentences, and its English-query half, English queries → T sentences.
- ``multi`` / ``multi@en``: T (or English) queries → the pool of English and T sentences; both
  parallel gold sentences are relevant (paper 003 Multi, Table 1; Complete@K, Max@R, Max@R_norm
  with |R| = 2).
- ``multi-1`` / ``multi-1@en``: as Multi, with the gold sentence in the query's own language
  removed from the pool, so the one relevant document is in the other language (paper 003
  Multi-1, Fig. 3).

Paper 003 builds each Mono scenario in both query languages; we do too, so its two halves
hold the same queries, pool and qrels as ``lang-en`` / ``en-lang`` (Mono-Cross) and ``en-en``
(the English half of Mono-Same), and their values coincide with those rows by construction.
They are kept under the paper's names so that its Table 2 (NDCG@1 and MRR, English/target)
can be read off one scenario, and ``english_gaps`` gives its English-minus-target gap.
:func:`describe` gives each name's direction in words and its paper columns; the leaderboard
prints it under the tables.
"""

from __future__ import annotations

from dataclasses import dataclass

from lira.data.types import Record
from lira.data.xquad_r import XQuADR

SCENARIOS = ("en-en", "lang-en", "en-lang", "multi", "multi-1", "mono-same", "mono-cross")

DESCRIPTIONS: dict[str, tuple[str, str]] = {
    "en-en": (
        "English queries → English sentences",
        "CLEAR (000) English-English; paper 001 T(en-en); paper 003 Mono-Same, English queries",
    ),
    "lang-en": (
        "target-language queries → English sentences",
        "CLEAR (000) English-Lang (passage language named first); paper 001 T(ko-en); "
        "paper 003 Mono-Cross, target queries",
    ),
    "en-lang": (
        "English queries → target-language sentences",
        "CLEAR (000) Lang-English (passage language named first); paper 001 T(en-ko); "
        "paper 003 Mono-Cross, English queries",
    ),
    "mono-same": (
        "target-language queries → target-language sentences",
        "paper 003 Mono-Same, target queries (Table 2, right of '/'); paper 001 T(ko-ko)",
    ),
    "mono-same@en": (
        "English queries → English sentences (same data as en-en)",
        "paper 003 Mono-Same, English queries (Table 2, left of '/')",
    ),
    "mono-cross": (
        "target-language queries → English sentences (same data as lang-en)",
        "paper 003 Mono-Cross, target queries (Table 2, right of '/')",
    ),
    "mono-cross@en": (
        "English queries → target-language sentences (same data as en-lang)",
        "paper 003 Mono-Cross, English queries (Table 2, left of '/')",
    ),
    "multi": (
        "target-language queries → English + target-language sentences; both golds relevant",
        "paper 003 Multi (Table 1, Query = target language)",
    ),
    "multi@en": (
        "English queries → English + target-language sentences; both golds relevant",
        "paper 003 Multi (Table 1, Query = En)",
    ),
    "multi-1": (
        "target-language queries → English + target-language sentences without the "
        "target-language gold; the English gold is the one relevant",
        "paper 003 Multi-1 (Fig. 3, target-language query)",
    ),
    "multi-1@en": (
        "English queries → English + target-language sentences without the English gold; "
        "the target-language gold is the one relevant",
        "paper 003 Multi-1 (Fig. 3, English query)",
    ),
    "mixed": (
        "queries → a corpus in several languages (a retrieval set's whole corpus)",
        "–",
    ),
}


def pair_name(query_lang: str, doc_langs: set[str]) -> str:
    """A retrieval set's scenario for one query language: ``de→en`` (query language → the
    searched documents' languages, ``+``-joined when several: ``de→de+en``)."""
    return f"{query_lang}→{'+'.join(sorted(doc_langs))}"


def pair_direction(query_lang: str, doc_langs: set[str]) -> str:
    """The scenario a language pair is pooled under (language ``all``): ``en-en``, ``lang-en``
    (L→En), ``en-lang`` (En→L), ``mono-same`` (L→L), else ``mixed``."""
    if doc_langs == {"en"}:
        return "en-en" if query_lang == "en" else "lang-en"
    if doc_langs == {query_lang}:
        return "mono-same"
    if query_lang == "en" and len(doc_langs) == 1:
        return "en-lang"
    return "mixed"


def describe(name: str) -> tuple[str, str]:
    """(direction in words, the papers' columns) of a scenario or ``<scenario> en-gap`` row."""
    if name.endswith(" en-gap"):
        base = name[: -len(" en-gap")]
        return (
            f"{base}@en minus {base}: English-query value minus target-query value",
            f"paper 003 language gap (§5.2) of {base}",
        )
    if "→" in name:
        q, d = name.split("→", 1)
        return f"{q} queries → {d.replace('+', ' + ')} documents", "–"
    if name not in DESCRIPTIONS:
        raise KeyError(f"unknown scenario {name!r}; known: {sorted(DESCRIPTIONS)}")
    return DESCRIPTIONS[name]


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
    data = ds.retrieval(q_lang, d_langs, qids, drop_own_gold)
    return Scenario(name, lang, data.queries, data.corpus, data.qrels)


def build_scenarios(
    ds: XQuADR, names: list[str], languages: list[str], qids: list[str]
) -> list[Scenario]:
    """Every requested scenario for every target language (English itself only for en-en).

    Paper 003's scenarios (mono-same, mono-cross, multi, multi-1) come in two halves: target
    queries (``<name>``) and English queries (``<name>@en``).
    """
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        raise ValueError(f"unknown scenarios {unknown}; choose from {list(SCENARIOS)}")
    out: list[Scenario] = []
    if "en-en" in names:
        out.append(_pair(ds, "en-en", "en", "en", ["en"], qids))
    for t in [lang for lang in languages if lang != "en"]:
        for name in names:
            if name == "lang-en":
                out.append(_pair(ds, name, t, t, ["en"], qids))
            elif name == "en-lang":
                out.append(_pair(ds, name, t, "en", [t], qids))
            elif name == "mono-same":  # T -> T, and English -> English
                out.append(_pair(ds, name, t, t, [t], qids))
                out.append(_pair(ds, name + "@en", t, "en", ["en"], qids))
            elif name == "mono-cross":  # T -> English, and English -> T
                out.append(_pair(ds, name, t, t, ["en"], qids))
                out.append(_pair(ds, name + "@en", t, "en", [t], qids))
            elif name in ("multi", "multi-1"):
                for q_lang, suffix in ((t, ""), ("en", "@en")):
                    out.append(_pair(ds, name + suffix, t, q_lang, ["en", t], qids,
                                     drop_own_gold=name == "multi-1"))  # fmt: skip
    return out
