"""XQuAD-R / LAReQA: parallel question answering recast as sentence retrieval.

Each language file holds the same articles, paragraphs and question ids; a question's
candidates are the sentences of every paragraph. The sentence lists are NOT aligned across
languages (en has 1180 sentences, de 1276), so the gold sentence of a question is found in
each language's own file: the sentence whose ``sentence_breaks`` span holds the answer's
``answer_start`` (the last sentence starting at or before it). Languages are aligned only
through question ids, never through sentence positions.

Ids: a question is ``<qid>@<lang>`` in retrieval data (so one query set can mix languages);
a sentence is ``<lang>:<article>:<paragraph>:<sentence>``.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from pathlib import Path

from lira.data.errors import DataError, Dropper
from lira.data.io import read_text
from lira.data.types import ParallelData, Record, RetrievalData


def query_id(qid: str, lang: str) -> str:
    """The retrieval id of question ``qid`` asked in ``lang``."""
    return f"{qid}@{lang}"


def plain_qid(query: str) -> str:
    """The language-independent question id of a retrieval query id."""
    return query.rsplit("@", 1)[0]


@dataclass
class XQuADLanguage:
    """One language file: questions, candidate sentences and each question's gold sentence."""

    lang: str
    questions: dict[str, str] = field(default_factory=dict)
    sentences: list[Record] = field(default_factory=list)
    gold: dict[str, str] = field(default_factory=dict)
    """question id -> sentence id."""


def _gold_index(breaks: list[list[int]], answer_start: int) -> int | None:
    starts = [b[0] for b in breaks]
    candidates = [i for i, s in enumerate(starts) if s <= answer_start]
    if not candidates:
        return None
    i = candidates[-1]
    return i if answer_start <= breaks[i][1] + 1 else None


def load_language(path: Path, lang: str, drop: Dropper) -> XQuADLanguage:
    """Parse one XQuAD-R language file."""
    try:
        data = json.loads(read_text(path))
    except json.JSONDecodeError as e:
        raise DataError(path, f"line {e.lineno}", "<json>", e.msg) from None
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(path, 0, "data", "expected {'data': [articles]}")
    out = XQuADLanguage(lang)
    for a, article in enumerate(data["data"]):
        for p, para in enumerate(article.get("paragraphs", [])):
            where = f"article {a} paragraph {p}"
            sents, breaks = para.get("sentences"), para.get("sentence_breaks")
            if not isinstance(sents, list) or not isinstance(breaks, list):
                drop(DataError(path, where, "sentences", "missing sentences/sentence_breaks"))
                continue
            if len(sents) != len(breaks):
                drop(DataError(path, where, "sentence_breaks", "length differs from sentences"))
                continue
            ids = [f"{lang}:{a}:{p}:{s}" for s in range(len(sents))]
            for sid, text in zip(ids, sents):
                if isinstance(text, str) and text.strip():
                    out.sentences.append(Record(sid, text, lang))
            for q, qa in enumerate(para.get("qas", [])):
                rec = f"{where} question {q}"
                qid, question = qa.get("id"), qa.get("question")
                if not qid:
                    drop(DataError(path, rec, "id", "missing"))
                    continue
                if not isinstance(question, str) or not question.strip():
                    drop(DataError(path, rec, "question", f"empty question (id {qid})"))
                    continue
                answers = qa.get("answers") or []
                if not answers or "answer_start" not in answers[0]:
                    drop(DataError(path, rec, "answers", f"no answer_start (id {qid})"))
                    continue
                idx = _gold_index(breaks, int(answers[0]["answer_start"]))
                if idx is None or not str(sents[idx]).strip():
                    drop(DataError(path, rec, "answer_start", f"outside every sentence ({qid})"))
                    continue
                out.questions[qid] = question
                out.gold[qid] = ids[idx]
    return out


class XQuADR:
    """Several XQuAD-R languages loaded together, aligned through question ids."""

    def __init__(self, langs: dict[str, XQuADLanguage], dropped: int = 0) -> None:
        self.langs = langs
        self.dropped = dropped
        first = next(iter(langs.values()))
        common = set.intersection(*(set(x.questions) for x in langs.values()))
        self.question_ids = [q for q in first.questions if q in common]
        self._sent_by_id = {r.id: r for x in langs.values() for r in x.sentences}

    @property
    def languages(self) -> list[str]:
        """The loaded language codes."""
        return list(self.langs)

    def _lang(self, lang: str) -> XQuADLanguage:
        if lang not in self.langs:
            raise KeyError(f"language {lang!r} not loaded; loaded: {self.languages}")
        return self.langs[lang]

    def split(self, eval_fraction: float, seed: int) -> tuple[list[str], list[str]]:
        """(train ids, eval ids): a seeded split of question ids, the same in every language."""
        ids = list(self.question_ids)
        random.Random(seed).shuffle(ids)
        n_eval = max(1, round(len(ids) * eval_fraction))
        return sorted(ids[n_eval:]), sorted(ids[:n_eval])

    def question(self, lang: str, qid: str) -> Record:
        """Question ``qid`` in ``lang`` as a Record with id ``qid@lang``."""
        return Record(query_id(qid, lang), self._lang(lang).questions[qid], lang)

    def sentences(self, lang: str) -> list[Record]:
        """All candidate sentences of ``lang``."""
        return list(self._lang(lang).sentences)

    def gold_sentence(self, lang: str, qid: str) -> Record:
        """The sentence of ``lang`` that holds the answer of question ``qid``."""
        return self._sent_by_id[self._lang(lang).gold[qid]]

    def retrieval(
        self, query_lang: str, doc_langs: list[str], qids: list[str] | None = None
    ) -> RetrievalData:
        """Queries in ``query_lang`` against all sentences of ``doc_langs`` (gold in each)."""
        qids = self.question_ids if qids is None else qids
        corpus = [r for lang in doc_langs for r in self.sentences(lang)]
        queries = [self.question(query_lang, q) for q in qids]
        qrels = {
            query_id(q, query_lang): {self._lang(d).gold[q]: 1 for d in doc_langs} for q in qids
        }
        name = f"xquad-r {query_lang}->{'+'.join(doc_langs)}"
        return RetrievalData(queries, corpus, qrels, name=name, dropped=self.dropped)

    def parallel_questions(self, langs: list[str], qids: list[str] | None = None) -> ParallelData:
        """The questions of ``qids`` in every language of ``langs``, aligned by position."""
        qids = self.question_ids if qids is None else qids
        texts = {lang: [self._lang(lang).questions[q] for q in qids] for lang in langs}
        return ParallelData(list(qids), texts, name="xquad-r questions")


def load_xquad_r(folder: str | Path, languages: list[str], drop_malformed: bool = False) -> XQuADR:
    """Load ``<folder>/<lang>.json`` for each language."""
    folder = Path(folder)
    available = sorted(p.stem for p in folder.glob("*.json"))
    missing = [lang for lang in languages if lang not in available]
    if missing:
        raise FileNotFoundError(
            f"XQuAD-R folder {folder} has no file for {missing}; available: {available}"
        )
    drop = Dropper(drop_malformed)
    langs = {lang: load_language(folder / f"{lang}.json", lang, drop) for lang in languages}
    return XQuADR(langs, dropped=drop.report(f"XQuAD-R {folder}"))
