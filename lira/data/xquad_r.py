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

from lira.data.errors import DataError, Dropper, Unique
from lira.data.io import JSON_FIX, data_folder, parse_json, read_text
from lira.data.types import ParallelData, Record, RetrievalData
from lira.errors import MissingFileError


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


def _is_int(v: object) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _breaks_ok(breaks: list) -> bool:
    return all(
        isinstance(b, list) and len(b) == 2 and _is_int(b[0]) and _is_int(b[1]) for b in breaks
    )


def _paragraph_problem(para: object) -> tuple[str, str] | None:
    """(field, message) of what makes a paragraph unusable; None for a well-formed one."""
    if not isinstance(para, dict):
        return "<paragraph>", "expected a JSON object"
    sents, breaks = para.get("sentences"), para.get("sentence_breaks")
    if not isinstance(sents, list) or not isinstance(breaks, list):
        return "sentences", "missing sentences/sentence_breaks"
    if len(sents) != len(breaks):
        return "sentence_breaks", "length differs from sentences"
    if not _breaks_ok(breaks):
        return "sentence_breaks", "expected [start, end] integers"
    bad = next((i for i, text in enumerate(sents) if not isinstance(text, str)), None)
    if bad is not None:
        got = json.dumps(sents[bad])[:40]
        return f"sentences[{bad}]", f"expected the sentence's text (a string), got {got}"
    if not isinstance(para.get("qas", []), list):
        return "qas", "expected a list of questions"
    return None


def load_language(path: Path, lang: str, drop: Dropper) -> XQuADLanguage:
    """Parse one XQuAD-R language file (malformed records raise or are dropped and counted)."""
    data = parse_json(read_text(path), path)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(path, None, "data", "expected {'data': [articles]}", JSON_FIX)
    out = XQuADLanguage(lang)
    seen = Unique(path, "id")
    for a, article in enumerate(data["data"]):
        paras = article.get("paragraphs") if isinstance(article, dict) else None
        if not isinstance(paras, list):
            drop(DataError(path, f"article {a}", "paragraphs", "expected a list of paragraphs"))
            continue
        for p, para in enumerate(paras):
            where = f"article {a} paragraph {p}"
            problem = _paragraph_problem(para)
            if problem is not None:
                drop(DataError(path, where, *problem))
                continue
            sents, breaks, qas = para["sentences"], para["sentence_breaks"], para.get("qas", [])
            ids = [f"{lang}:{a}:{p}:{s}" for s in range(len(sents))]
            for sid, text in zip(ids, sents):
                if isinstance(text, str) and text.strip():
                    out.sentences.append(Record(sid, text, lang))
            for q, qa in enumerate(qas):
                rec = f"{where} question {q}"
                if not isinstance(qa, dict):
                    drop(DataError(path, rec, "<question>", "expected a JSON object"))
                    continue
                qid, question = qa.get("id"), qa.get("question")
                if not qid or not isinstance(qid, str):
                    drop(DataError(path, rec, "id", "missing" if not qid else "expected a string"))
                    continue
                if not isinstance(question, str):
                    got = json.dumps(question)[:40]
                    drop(DataError(path, rec, "question", f"expected a string, got {got} ({qid})"))
                    continue
                if not question.strip():
                    drop(DataError(path, rec, "question", f"empty question (id {qid})"))
                    continue
                answers = qa.get("answers")
                first = answers[0] if isinstance(answers, list) and answers else None
                if not isinstance(first, dict) or "answer_start" not in first:
                    drop(DataError(path, rec, "answers", f"no answer_start (id {qid})"))
                    continue
                start = first["answer_start"]
                if not _is_int(start):
                    drop(DataError(path, rec, "answer_start", f"not an integer: {start!r} ({qid})"))
                    continue
                idx = _gold_index(breaks, start)
                if idx is None:
                    drop(DataError(path, rec, "answer_start", f"outside every sentence ({qid})"))
                    continue
                if not sents[idx].strip():
                    why = f"{start} falls in sentence {idx}, which is empty ({qid})"
                    drop(DataError(path, rec, "answer_start", why))
                    continue
                try:
                    seen.check(qid, rec)
                except DataError as e:
                    drop(e)
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
        """(train ids, eval ids): a seeded split of question ids, the same in every language,
        each in drawn order (so a prefix of either is a seeded random sample)."""
        ids = list(self.question_ids)
        random.Random(seed).shuffle(ids)
        n_eval = max(1, round(len(ids) * eval_fraction))
        return ids[n_eval:], ids[:n_eval]

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
        self,
        query_lang: str,
        doc_langs: list[str],
        qids: list[str] | None = None,
        drop_own_gold: bool = False,
    ) -> RetrievalData:
        """Queries in ``query_lang`` against all sentences of ``doc_langs`` (gold in each).
        ``drop_own_gold`` (paper 003's Multi-1): the queries' gold sentences in ``query_lang``
        leave the pool, so the relevant documents are in the other languages."""
        qids = self.question_ids if qids is None else qids
        corpus = [r for lang in doc_langs for r in self.sentences(lang)]
        queries = [self.question(query_lang, q) for q in qids]
        qrels = {
            query_id(q, query_lang): {self._lang(d).gold[q]: 1 for d in doc_langs} for q in qids
        }
        if drop_own_gold:
            own = {self._lang(query_lang).gold[q] for q in qids}
            corpus = [r for r in corpus if r.id not in own]
            qrels = {q: {d: v for d, v in rel.items() if d not in own} for q, rel in qrels.items()}
        name = f"xquad-r {query_lang}->{'+'.join(doc_langs)}"
        return RetrievalData(queries, corpus, qrels, name=name, dropped=self.dropped)

    def parallel_questions(self, langs: list[str], qids: list[str] | None = None) -> ParallelData:
        """The questions of ``qids`` in every language of ``langs``, aligned by position."""
        qids = self.question_ids if qids is None else qids
        texts = {lang: [self._lang(lang).questions[q] for q in qids] for lang in langs}
        return ParallelData(list(qids), texts, name="xquad-r questions")


def load_xquad_r(folder: str | Path, languages: list[str], drop_malformed: bool = False) -> XQuADR:
    """Load ``<folder>/<lang>.json`` for each language."""
    folder = data_folder(folder, "XQuAD-R", "<lang>.json files")
    available = sorted(p.stem for p in folder.glob("*.json"))
    missing = [lang for lang in languages if lang not in available]
    if missing:
        raise MissingFileError(
            f"XQuAD-R folder {folder} has no file for {missing}; available: {available}"
        )
    drop = Dropper(drop_malformed)
    langs = {lang: load_language(folder / f"{lang}.json", lang, drop) for lang in languages}
    return XQuADR(langs, dropped=drop.report(f"XQuAD-R {folder}"))
