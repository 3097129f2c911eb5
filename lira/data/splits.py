"""Train / held-out splits of the configured dataset, in the form every stage consumes.

XQuAD-R (the default): question ids are split once (``eval_fraction``, ``split_seed``), the
same ids in every language, so no held-out question is seen in any language during training.
- ``train_sources`` / ``eval_sources``: questions in the non-English train / eval languages;
  these are what gets translated (store) and anchored (Arca).
- ``train`` / ``eval`` (aliases ``train_retrieval`` / ``eval_retrieval``): retrieval data, target-language questions -> the full English
  sentence pool (the Lang->En setting; the gold sentence is the positive).
- ``train_parallel``: the training questions in English and every train language (baselines).
- ``dataset``: the XQuADR object, for the evaluation scenarios (En-En, Multi, ...).

LazRetrieval uses its released train/test split when the folder has one (``train/`` + ``test/``,
or one such pair per country: :func:`lira.data.lazretrieval.split_folders`): the query ids of
each split are exactly those of its files. Only a dataset that ships no split — LazRetrieval as
one unsplit folder, BEIR, a ``datasets`` folder — is split by query id at random
(``eval_fraction``, ``split_seed``); that is logged as a warning and recorded in
``Splits.split_note``, which ``lira eval`` / ``lira compare`` print with their results.
Non-English documents are added to the sources to translate (``train_sources``, and for a
released test split its own items to ``eval_sources``) because LiRA encodes documents through
the same translate-and-anchor path. An STS file (``data.sts_path``, or ``format: sts``) is split
by pair index into ``train_pairs`` / ``eval_pairs`` for the rank task.
"""

from __future__ import annotations

import itertools
import logging
import random
from dataclasses import dataclass, field
from pathlib import Path

from lira.config import DataConfig
from lira.data import demo_path
from lira.data.beir import hf_qrel_splits, load_beir_splits, load_hf_retrieval
from lira.data.errors import DataError
from lira.data.lazretrieval import load_lazretrieval, load_lazretrieval_split, split_folders
from lira.data.sts import load_sts
from lira.data.types import PairData, ParallelData, Record, RetrievalData
from lira.data.xquad_r import XQuADR, load_xquad_r
from lira.logs import warn_once

log = logging.getLogger(__name__)


@dataclass
class Splits:
    """Everything the pipeline reads from the data section."""

    train_sources: list[Record] = field(default_factory=list)
    eval_sources: list[Record] = field(default_factory=list)
    train: RetrievalData | None = None
    eval: RetrievalData | None = None
    train_parallel: ParallelData | None = None
    train_pairs: PairData | None = None
    eval_pairs: PairData | None = None
    dataset: XQuADR | None = None
    train_ids: list[str] = field(default_factory=list)
    eval_ids: list[str] = field(default_factory=list)
    dev: RetrievalData | None = None
    """The validation split (``data.dev_fraction``): queries -> English corpus on ids carved
    out of the training ids, in the train and ``dev_languages`` (where choices are made)."""
    dev_sources: list[Record] = field(default_factory=list)
    """Non-English validation questions (translated like the held-out ones)."""
    dev_ids: list[str] = field(default_factory=list)
    split_note: str = ""
    """How train and held-out data were separated (released split files, or a random split)."""

    @property
    def train_retrieval(self) -> RetrievalData | None:
        """Alias of ``train``: training-language queries -> English sentence corpus."""
        return self.train

    @property
    def eval_retrieval(self) -> RetrievalData | None:
        """Alias of ``eval``: held-out queries -> English sentence corpus."""
        return self.eval


def validation_pools(splits: Splits) -> dict[str, RetrievalData]:
    """The validation split's retrieval pools, by ``scenario:lang`` (evaluators' scenario names):
    for XQuAD-R, En-En and per validation language L→En, En→L and the mixed-language pools
    Multi and Multi-1 in both directions (paper 003), on the validation question ids; for
    other data the validation split as it is (``dev``); {} without one."""
    ds, ids = splits.dataset, splits.dev_ids
    if ds is None or not ids:
        return {"dev": splits.dev} if splits.dev is not None else {}
    langs = list(dict.fromkeys(q.lang for q in splits.dev_sources))
    pools = {"en-en": ds.retrieval("en", ["en"], ids)}
    for t in langs:
        pools[f"lang-en:{t}"] = ds.retrieval(t, ["en"], ids)
        pools[f"en-lang:{t}"] = ds.retrieval("en", [t], ids)
        for q_lang, suffix in ((t, ""), ("en", "@en")):
            pools[f"multi{suffix}:{t}"] = ds.retrieval(q_lang, ["en", t], ids)
            pools[f"multi-1{suffix}:{t}"] = ds.retrieval(q_lang, ["en", t], ids, True)
    return pools


def _merge(parts: list[RetrievalData], name: str) -> RetrievalData:
    corpus: dict[str, Record] = {}
    for p in parts:
        corpus.update({d.id: d for d in p.corpus})
    qrels = {q: rel for p in parts for q, rel in p.qrels.items()}
    return RetrievalData(
        [q for p in parts for q in p.queries], list(corpus.values()), qrels, name=name
    )


def _xquad_splits(cfg: DataConfig) -> Splits:
    folder = demo_path() if cfg.path == "demo" else Path(cfg.path)
    langs = list(
        dict.fromkeys(["en", *cfg.train_languages, *cfg.eval_languages, *cfg.dev_languages])
    )
    ds = load_xquad_r(folder, langs, drop_malformed=cfg.drop_malformed)
    if not ds.question_ids:
        counts = {lang: len(x.questions) for lang, x in ds.langs.items()}
        raise DataError(
            folder,
            None,
            "<data>",
            f"no question is usable in every language {langs} (usable questions per language: "
            f"{counts}; {ds.dropped} malformed record(s) dropped)",
            "check the files, or data.train_languages / data.eval_languages",
        )
    train_ids, eval_ids = ds.split(cfg.eval_fraction, cfg.split_seed)  # both in drawn order
    _check_train(folder, len(ds.question_ids), len(train_ids), cfg)
    dev_ids, train_ids = _carve_dev(train_ids, cfg)
    _check_train(folder, len(ds.question_ids), len(train_ids), cfg)
    dev_ids = sorted(_cap(dev_ids, cfg.max_dev_queries))
    train_ids = sorted(_cap(train_ids, cfg.max_train_queries))
    eval_ids = sorted(_cap(eval_ids, cfg.max_eval_queries))
    train_langs = [lang for lang in cfg.train_languages if lang != "en"]
    eval_langs = [lang for lang in cfg.eval_languages if lang != "en"]
    dev_all = list(dict.fromkeys([*cfg.train_languages, *cfg.dev_languages]))
    dev = None
    if dev_ids:
        dev = _merge([ds.retrieval(lang, ["en"], dev_ids) for lang in dev_all], "dev")
    return Splits(
        train_sources=[ds.question(lang, q) for lang in train_langs for q in train_ids],
        eval_sources=[ds.question(lang, q) for lang in eval_langs for q in eval_ids],
        train=_merge(
            [ds.retrieval(lang, ["en"], train_ids) for lang in cfg.train_languages], "train"
        ),
        eval=_merge([ds.retrieval(lang, ["en"], eval_ids) for lang in cfg.eval_languages], "eval"),
        train_parallel=ds.parallel_questions(
            list(dict.fromkeys(["en", *cfg.train_languages])), train_ids
        ),
        dataset=ds,
        train_ids=train_ids,
        eval_ids=eval_ids,
        dev=dev,
        dev_sources=[ds.question(lang, q) for lang in dev_all if lang != "en" for q in dev_ids],
        dev_ids=dev_ids,
        split_note=(
            f"XQuAD-R question ids split at random (eval_fraction={cfg.eval_fraction}, "
            f"split_seed={cfg.split_seed}), the same ids in every language"
            + (
                f"; validation: {len(dev_ids)} of the training ids (dev_fraction="
                f"{cfg.dev_fraction}) in {dev_all}"
                if dev_ids
                else ""
            )
        ),
    )


def _check_train(where: str | Path, n: int, n_train: int, cfg: DataConfig) -> None:
    """A split that leaves no training item is an error naming the data and the fix."""
    if n_train == 0:
        raise DataError(
            where,
            None,
            "<data>",
            f"only {n} usable item(s): data.eval_fraction={cfg.eval_fraction} leaves none for "
            "training",
            "add data or lower data.eval_fraction",
        )


def _draw(ids: list[str], seed: int) -> list[str]:
    """The distinct ``ids`` in an order drawn with ``seed`` (sorted first, so file order does
    not matter): validation ids and capped ids are taken from its front."""
    order = sorted(set(ids))
    random.Random(seed).shuffle(order)
    return order


def _cap(drawn: list[str], cap: int) -> list[str]:
    """The first ``cap`` of ids in drawn order, a seeded random sample (0 = all)."""
    return drawn[:cap] if cap else list(drawn)


def _carve_dev(drawn: list[str], cfg: DataConfig) -> tuple[list[str], list[str]]:
    """(validation ids, training ids) of training ids in drawn order: the first
    ``data.dev_fraction`` of them and the rest, both in drawn order; ([], ids) when
    dev_fraction is 0."""
    if not cfg.dev_fraction:
        return [], list(drawn)
    n_dev = max(1, round(len(drawn) * cfg.dev_fraction))
    return drawn[:n_dev], drawn[n_dev:]


def _subset(data: RetrievalData, drawn: list[str], cap: int, name: str) -> RetrievalData:
    """The queries of ``data`` whose id is in ``drawn``: per language the ``cap`` that come
    first in ``drawn`` (0 = all), in file order, with the whole corpus."""
    rank = {q: i for i, q in enumerate(drawn)}
    kept = [q for q in data.queries if q.id in rank]
    if cap:
        count: dict[str, int] = {}
        chosen: set[str] = set()
        for q in sorted(kept, key=lambda q: rank[q.id]):
            count[q.lang] = count.get(q.lang, 0) + 1
            if count[q.lang] <= cap:
                chosen.add(q.id)
        kept = [q for q in kept if q.id in chosen]
    qrels = {q.id: data.qrels[q.id] for q in kept}
    return RetrievalData(kept, data.corpus, qrels, name=name, dropped=data.dropped)


def _retrieval_splits(
    train: RetrievalData,
    held: RetrievalData,
    dev: RetrievalData | None,
    cfg: DataConfig,
    note: str,
    name: str,
) -> Splits:
    """Splits from given train / held-out (/ validation) judgements: the validation split is
    ``dev`` when given, else ``data.dev_fraction`` of the training ids; caps per language.
    Non-English queries and documents are the sources to translate, English ones never."""
    for what, part in (("training", train), ("held-out", held)):
        if not part.corpus or not part.queries:
            raise DataError(
                cfg.path,
                None,
                "<data>",
                f"the {what} split has {len(part.queries)} judged queries and "
                f"{len(part.corpus)} documents ({part.dropped} malformed record(s) dropped)",
                "check the files (for LazRetrieval: the split's query.json, item.json and "
                "pairs_info.json) and data.format",
            )
    parts = {"train": train, "test": held, **({"dev": dev} if dev is not None else {})}
    for (n1, p1), (n2, p2) in itertools.combinations(parts.items(), 2):
        both = sorted({q.id for q in p1.queries} & {q.id for q in p2.queries})
        if both:
            raise DataError(
                cfg.path,
                None,
                "query-id",
                f"{len(both)} query id(s) are judged in both {n1} and {n2} (e.g. {both[:3]})",
                "judge each query in one split only",
            )
    train_ids = _draw([q.id for q in train.queries], cfg.split_seed)
    if dev is None:
        dev_ids, train_ids = _carve_dev(train_ids, cfg)
        if dev_ids:
            dev = train
            note += (
                f"; validation: {len(set(dev_ids))} of the training query ids "
                f"(dev_fraction={cfg.dev_fraction})"
            )
    else:
        dev_ids = _draw([q.id for q in dev.queries], cfg.split_seed)
        note += f"; validation: {len(set(dev_ids))} queries as given"
    _check_train(cfg.path, len(set(train_ids)) + len(set(dev_ids)), len(train_ids), cfg)
    train = _subset(train, train_ids, cfg.max_train_queries, f"{name} train")
    held_ids = _draw([q.id for q in held.queries], cfg.split_seed)
    held = _subset(held, held_ids, cfg.max_eval_queries, f"{name} eval")
    if dev is not None:
        dev = _subset(dev, dev_ids, cfg.max_dev_queries, f"{name} dev")
    seen: set[tuple[str, str]] = set()

    def docs(part: RetrievalData | None) -> list[Record]:
        """The part's non-English documents not listed before (each text translated once)."""
        out = []
        for d in part.corpus if part is not None else []:
            if d.lang != "en" and (d.text, d.lang) not in seen:
                seen.add((d.text, d.lang))
                out.append(d)
        return out

    def foreign(part: RetrievalData | None) -> list[Record]:
        return [q for q in (part.queries if part is not None else []) if q.lang != "en"]

    return Splits(
        train_sources=foreign(train) + docs(train),
        dev_sources=foreign(dev) + docs(dev),
        eval_sources=foreign(held) + docs(held),
        train=train,
        eval=held,
        dev=dev,
        train_ids=[q.id for q in train.queries],
        eval_ids=[q.id for q in held.queries],
        dev_ids=[q.id for q in dev.queries] if dev is not None else [],
        split_note=note,
    )


def _split_retrieval(
    data: RetrievalData, cfg: DataConfig, dev: RetrievalData | None = None, source: str = ""
) -> Splits:
    """A random split by query id (``eval_fraction``, ``split_seed``) of data that ships no
    train/test split; said once per run as a warning."""
    if not data.corpus or not data.queries:
        what = "no document" if not data.corpus else "no query with a positive judgement"
        raise DataError(
            cfg.path,
            None,
            "<data>",
            f"{what} ({len(data.corpus)} documents, {len(data.queries)} judged queries, "
            f"{data.dropped} malformed record(s) dropped)",
            "check the files and data.format",
        )
    ids = sorted(q.id for q in data.queries)
    random.Random(cfg.split_seed).shuffle(ids)
    n_eval = max(1, round(len(ids) * cfg.eval_fraction))
    eval_ids, train_ids = set(ids[:n_eval]), set(ids[n_eval:])
    _check_train(cfg.path, len(ids), len(train_ids), cfg)
    name = data.name
    note = (
        f"{name or cfg.path} ships no train/test split{source}: query ids re-split at random "
        f"(eval_fraction={cfg.eval_fraction}, split_seed={cfg.split_seed})"
    )
    warn_once(log, "%s", note)
    train = _subset(data, sorted(train_ids), 0, f"{name} train")
    held = _subset(data, sorted(eval_ids), 0, f"{name} eval")
    return _retrieval_splits(train, held, dev, cfg, note, name)


def _given_retrieval(parts: dict[str, RetrievalData], cfg: DataConfig, where: str) -> Splits:
    """Splits of a folder's qrels as given (``train`` / ``dev`` / ``test``): train and test
    kept exactly when both are there, else the one there is split at random."""
    dev = parts.get("dev")
    if "train" in parts and "test" in parts:
        train, test = parts["train"], parts["test"]
        note = (
            f"{where}: qrels as given: {len(train.queries)} train / {len(test.queries)} "
            "test queries"
        )
        log.info("%s", note)
        return _retrieval_splits(train, test, dev, cfg, note, train.name)
    if "train" not in parts and "test" not in parts:
        raise DataError(
            where,
            None,
            "<data>",
            "only dev judgements: nothing to train or test on",
            "add qrels/train.tsv or qrels/test.tsv",
        )
    only = "train" if "train" in parts else "test"
    return _split_retrieval(parts[only], cfg, dev, f" (only {only} judgements)")


def _released_retrieval(
    train: RetrievalData, test: RetrievalData, cfg: DataConfig, note: str
) -> Splits:
    """Splits that keep a released train/test split exactly (a cap keeps a seeded sample of
    each language); the validation split is carved from the training ids."""
    log.info("%s", note)  # empty splits and ids in both: checked by _retrieval_splits
    return _retrieval_splits(train, test, None, cfg, note, "lazretrieval")


def _lazretrieval_splits(cfg: DataConfig) -> Splits:
    """The released train/test split when the folder has one, else a random split by query id."""

    folders = split_folders(cfg.path)
    if folders is None:
        return _split_retrieval(load_lazretrieval(cfg.path, drop_malformed=cfg.drop_malformed), cfg)
    train = load_lazretrieval_split(folders["train"], drop_malformed=cfg.drop_malformed)
    test = load_lazretrieval_split(folders["test"], drop_malformed=cfg.drop_malformed)
    where = ", ".join(str(p) for p in folders["test"][:3])
    note = (
        f"LazRetrieval released split: {len(train.queries)} train / {len(test.queries)} test "
        f"queries, ids as in the split files ({where}{' …' if len(folders['test']) > 3 else ''})"
    )
    return _released_retrieval(train, test, cfg, note)


def _split_pairs(pairs: PairData, cfg: DataConfig) -> tuple[PairData, PairData]:
    idx = list(range(len(pairs.scores)))
    random.Random(cfg.split_seed).shuffle(idx)
    n_eval = max(1, round(len(idx) * cfg.eval_fraction))

    def take(sel: list[int], name: str) -> PairData:
        sel = sorted(sel)
        return PairData(
            [pairs.sentence1[i] for i in sel],
            [pairs.sentence2[i] for i in sel],
            [pairs.scores[i] for i in sel],
            [pairs.lang1[i] for i in sel],
            [pairs.lang2[i] for i in sel],
            name=name,
            dropped=pairs.dropped,
        )

    return take(idx[n_eval:], f"{pairs.name} train"), take(idx[:n_eval], f"{pairs.name} eval")


def _pair_sources(pairs: PairData, tag: str) -> list[Record]:
    """The distinct non-English sentences of STS pairs (what must be translated)."""
    seen: dict[tuple[str, str], Record] = {}
    for i, (a, b, la, lb) in enumerate(
        zip(pairs.sentence1, pairs.sentence2, pairs.lang1, pairs.lang2)
    ):
        for k, text, lang in ((1, a, la), (2, b, lb)):
            if lang != "en" and (text, lang) not in seen:
                seen[(text, lang)] = Record(f"sts-{tag}:{i}:{k}", text, lang)
    return list(seen.values())


EARLY: dict[str, Splits] = {}
"""Splits read by :func:`load_splits_early`, by ``repr`` of their config, until a
:func:`load_splits` of that config takes them."""


def load_splits_early(cfg: DataConfig) -> None:
    """Read and check the configured data now, before torch and the models load (the CLI: a bad
    record is reported in a fraction of a second, issue 60 item 7); the next :func:`load_splits`
    of an equal config returns these splits rather than reading the files again."""
    EARLY[repr(cfg)] = read_splits(cfg)


def load_splits(cfg: DataConfig) -> Splits:
    """The configured dataset, split (deterministic for a given config): the splits
    :func:`load_splits_early` read for this config, else read now (:func:`read_splits`)."""
    early = EARLY.pop(repr(cfg), None)
    return early if early is not None else read_splits(cfg)


def read_splits(cfg: DataConfig) -> Splits:
    """Load the configured dataset and split it (deterministic for a given config)."""
    lang = cfg.train_languages[0]
    query_lang, corpus_lang = cfg.query_language or lang, cfg.corpus_language or lang
    if cfg.format == "xquad_r":
        splits = _xquad_splits(cfg)
    elif cfg.format == "lazretrieval":
        splits = _lazretrieval_splits(cfg)
    elif cfg.format == "beir":
        parts = load_beir_splits(cfg.path, query_lang, corpus_lang, cfg.drop_malformed)
        splits = _given_retrieval(parts, cfg, f"BEIR {cfg.path}")
    elif cfg.format == "hf":
        parts = {
            split: load_hf_retrieval(cfg.path, query_lang, cfg.drop_malformed, split, corpus_lang)
            for split in hf_qrel_splits(cfg.path)
        }
        splits = _given_retrieval(parts, cfg, f"datasets {cfg.path}")
    else:  # sts
        splits = Splits()
        if cfg.dev_fraction:
            raise DataError(
                cfg.path,
                None,
                "<data>",
                f"data.dev_fraction={cfg.dev_fraction}: an STS file trains the rank task, which "
                "selects nothing on a validation split",
                "set data.dev_fraction: 0",
            )
    sts = cfg.path if cfg.format == "sts" else cfg.sts_path
    if sts:
        pairs = load_sts(sts, lang=lang, drop_malformed=cfg.drop_malformed)
        if not pairs.scores:
            raise DataError(
                sts,
                None,
                "<data>",
                f"no usable sentence pair ({pairs.dropped} malformed record(s) dropped)",
                "check the file (sentence1, sentence2, score per record)",
            )
        splits.train_pairs, splits.eval_pairs = _split_pairs(pairs, cfg)
        _check_train(sts, len(pairs.scores), len(splits.train_pairs.scores), cfg)
        splits.train_sources += _pair_sources(splits.train_pairs, "train")
        splits.eval_sources += _pair_sources(splits.eval_pairs, "eval")
    return splits
