"""``lira translate``: fill the translation store under the pass@k budget, then run the critic.

:func:`fill_store` is the engine (used by ``lira run`` and online by Arca); it
1. checks the sources: an empty/whitespace source is recorded as a permanent failure, a
   source longer than ``source_max_chars`` is truncated (warning + ``truncated`` flag), an
   unknown language code raises naming the code and the known codes;
2. for each active translator (``TranslationConfig.active_translators()``), generates what
   the store is missing in leased chunks (:func:`lira.translation.scheduling.translate_one`: a
   translator that fails to load or raises is recorded as failed for its texts; the others go
   on); the servers of a pool are asked all at the same time (one thread each), the local
   engines one after another meanwhile;
3. cleans every LLM candidate (:mod:`lira.translation.cleanup`) and stores raw + cleaned +
   removed text;
4. scores every ok row not yet scored by the configured critic, and every row whose scoring
   failed before (request error, no valid reply after ``critic.max_retries``;
   :func:`lira.translation.scoring.score_candidates`);
5. returns (and ``run_translate`` writes) ``translate_summary.json``.

Two or more processes may fill one store at once (``lira translate`` or one ``--shard`` twice): each
chunk is leased in the store first (:meth:`TranslationStore.claim`), so no text is generated
or scored twice; a process waits for texts leased by another one, and takes them over when
that process dies, so every process returns with the store complete.

Across nodes without a shared file system, ``lira translate CONFIG --shard i/n`` (or a
launcher's ``RANK``/``WORLD_SIZE``) translates the sources of shard i only, chosen by a stable
hash of each text, into its own store ``<store>.shard-<i>-of-<n>``; ``lira translate CONFIG
--merge [STORE …]`` then copies every shard store into the configured one
(:func:`lira.translation.shards.merge_shards`).

Summary (per translator): ``generated``/``failed`` by this process (``retryable``: failures
tried again on the next run), ``reused`` (already in the store), ``by_others`` (done by another
process meanwhile), ``truncated``. ``pending``: retryable failures + critic failures of this
run; ``lira run`` re-runs the translate stage while it is not 0. Critic: ``scored``,
``failed`` (pairs left without scores: training sees ``scores=None`` for them, and the next
``lira translate`` scores them again), ``retried`` (pairs that had failed in an earlier run),
``by_others``.

``reference`` translators are never generated; their rows come from ``--import``.
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TypedDict

from tqdm.auto import tqdm

from lira.data.splits import Splits, load_splits
from lira.data.types import Record
from lira.data.xquad_r import plain_qid
from lira.errors import LiRAError, MissingFileError, UserInputError
from lira.jsonio import write_json
from lira.prompts import language_name
from lira.translation.config import PoolRun, TranslationRun, TranslatorConfig
from lira.translation.critic import Encode
from lira.translation.scheduling import TranslatorStats, new_stats, translate_one
from lira.translation.scoring import CriticStats, g_encode, score_candidates
from lira.translation.shards import (
    Shard,
    merge_shards,
    parse_shard,
    shard_from_env,
    shard_store_path,
)
from lira.translation.store import TranslationStore
from lira.translation.translators import build_translator

log = logging.getLogger(__name__)

LEASE_POLL_S = 0.5
"""How often a process re-checks texts another process has leased."""


_ANNOUNCED_STORES: set[str] = set()
"""Absolute store paths already logged (each once per process)."""


def store_path(cfg: PoolRun) -> Path:
    """The store file: ``translation.store``, relative paths inside ``output_dir`` (the config
    refuses one that leaves it); an absolute path is used as given and logged once."""
    p = Path(cfg.translation.store).expanduser()
    if not p.is_absolute():
        return Path(cfg.output_dir) / p
    if str(p) not in _ANNOUNCED_STORES:
        _ANNOUNCED_STORES.add(str(p))
        log.info("translation.store %s is an absolute path: used as given, wherever it is "
                 "(relative paths are inside output_dir %s)", p, cfg.output_dir)  # fmt: skip
    return p


Sources = Mapping[str, Sequence[str]] | Iterable[Record] | Iterable[tuple[str, str]]
"""Texts to translate: Records (``.text``/``.lang``), (text, lang) pairs or {lang: [texts]}."""


class TranslateSummary(TypedDict, total=False):
    """What :func:`fill_store` returns and ``lira translate`` writes to
    ``translate_summary.json`` (see the module docstring)."""

    translators: dict[str, TranslatorStats]
    store: str
    critic: CriticStats
    sources: int
    generated: int
    reused: int
    failed: int
    by_others: int
    pending: int
    seconds: float
    shard: str


def group_sources(sources: Sources) -> dict[str, list[str]]:
    """{lang: [texts]} from Records (``.text``/``.lang``), (text, lang) pairs or a dict."""
    if isinstance(sources, dict):
        return {lang: list(texts) for lang, texts in sources.items()}
    out: dict[str, list[str]] = {}
    for s in sources:
        text, lang = (s.text, s.lang) if hasattr(s, "text") else (s[0], s[1])
        out.setdefault(lang, []).append(text)
    return out


def fill_store(
    cfg: PoolRun,
    sources: Sources,
    store: TranslationStore | None = None,
    g: Callable[[], tuple[Encode, str]] | None = None,
) -> TranslateSummary:
    """Make sure every source has its pass@k candidates and critic scores; returns a summary.

    ``sources``: Records (``.text``, ``.lang``), (text, lang) pairs or {lang: [texts]}. ``g``:
    the embedding critic's (encode, name) factory for the run's g (default :func:`g_encode`,
    uncached; ``lira translate`` in a run passes g's embedding cache).
    """
    tc = cfg.translation
    by_lang = group_sources(sources)
    for lang in by_lang:
        try:
            language_name(lang)  # unknown code -> clear error before any work
        except ValueError as e:
            raise UserInputError(str(e)) from None
    own = store is None
    store = store or TranslationStore(store_path(cfg), commit_every=tc.commit_every)
    t0 = time.perf_counter()
    active = tc.active_translators()
    per: dict[str, TranslatorStats] = {}
    summary: TranslateSummary = {"translators": per, "store": str(store.path)}
    n_unique = sum(len(dict.fromkeys(t)) for t in by_lang.values())
    threads: list[TranslationStore] = []

    def generate(tcfg: TranslatorConfig, stats: TranslatorStats, st: TranslationStore) -> None:
        with tqdm(total=n_unique, desc=f"translate[{tcfg.name}]", unit="text") as bar:
            translate_one(
                st,
                tcfg,
                by_lang,
                tc,
                stats,
                bar,
                build_translator,
                LEASE_POLL_S,
                cfg.models.cache_dir,
            )

    try:
        remote: list[tuple[TranslatorConfig, TranslatorStats]] = []
        local: list[tuple[TranslatorConfig, TranslatorStats]] = []
        for tcfg in active:
            stats = new_stats()
            per[tcfg.name] = stats
            if tcfg.engine_reason:
                log.info("translator %r runs on %s: %s", tcfg.name, tcfg.kind, tcfg.engine_reason)
            if tcfg.kind == "reference":
                miss = sum(len(store.missing(t, lg, tcfg)) for lg, t in by_lang.items())
                stats.update(reused=n_unique - miss, missing=miss)
                if miss:
                    log.info(
                        "%d sources have no %r translation (expected for held-out sources; "
                        "import others with `lira translate CONFIG --import FILE --translator %s`)",
                        miss, tcfg.name, tcfg.name,
                    )  # fmt: skip
                continue
            (remote if tcfg.kind == "openai" else local).append((tcfg, stats))
        # servers all at once (one thread each); local engines one after another meanwhile,
        # so no two local models share the GPU's memory
        with ThreadPoolExecutor(max(len(remote), 1), "translators") as pool:
            # each thread its own connection on the same file, closed at the end: closing one
            # earlier lost the main connection's critic leases to the other processes
            # (tests/translation/test_reliability.py, two processes on one store)
            threads += [
                TranslationStore(store.path, tc.commit_every, any_thread=True) for _ in remote
            ]
            futures = [
                pool.submit(generate, t, stats, st) for (t, stats), st in zip(remote, threads)
            ]
            try:
                for t, stats in local:
                    generate(t, stats, store)
            finally:
                for f in futures:
                    f.result()
        g = g or (lambda: g_encode(cfg.models))
        critic = score_candidates(store, tc, active, by_lang, LEASE_POLL_S, cfg.models.cache_dir, g)
        summary["critic"] = critic
    finally:
        for st in threads:
            st.close()
        if own:
            store.close()
    summary["sources"] = n_unique
    summary["generated"] = sum(s["generated"] for s in per.values())
    summary["reused"] = sum(s["reused"] for s in per.values())
    summary["failed"] = sum(s["failed"] for s in per.values())
    summary["by_others"] = sum(s["by_others"] for s in per.values())
    summary["pending"] = sum(s.get("retryable", 0) for s in per.values()) + critic["failed"]
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    return summary


class NothingTranslated(LiRAError):
    """Every translator that generates failed on every text: the store gained nothing usable."""


def failure_lines(summary: TranslateSummary) -> list[str]:
    """One line per translator with failed texts: how many of its texts failed, last error."""
    lines = []
    for name, st in summary.get("translators", {}).items():
        if st.get("failed"):
            total = st["failed"] + st.get("generated", 0) + st.get("reused", 0)
            last = f" (last error: {st['last_error']})" if st.get("last_error") else ""
            lines.append(f"{name}: {st['failed']} of {total} texts failed{last}")
    return lines


def check_translated(summary: TranslateSummary, cfg: TranslationRun, where: str | Path) -> None:
    """Print the per-translator failures; :class:`NothingTranslated` (one line, exit 1) when
    no translator that generates produced or had a single usable candidate."""
    lines = failure_lines(summary)
    if lines:
        print("translation failures per translator:\n  " + "\n  ".join(lines))
    gen = [t.name for t in cfg.translation.active_translators() if t.kind != "reference"]
    stats = [summary["translators"][n] for n in gen if n in summary.get("translators", {})]
    usable = sum(st["generated"] + st["reused"] + st["by_others"] for st in stats)
    if stats and usable == 0 and sum(st["failed"] for st in stats):
        raise NothingTranslated(
            f"nothing could be translated ({'; '.join(lines)}); check each translator's "
            f"base_url, model and API key, then run `lira translate` again (summary: {where})"
        )


def xquad_references(splits: Splits) -> list[tuple[str, str, str, str]]:
    """(source, lang, English original, id) of XQuAD-R *training* questions.

    XQuAD-R questions are human translations of the same English questions, so the English
    original is a gold "translation". Only training sources get one: held-out queries must
    never see their English original.
    """

    ds = getattr(splits, "dataset", None)
    if ds is None or "en" not in ds.languages:
        return []
    out = []
    for rec in splits.train_sources:
        qid = plain_qid(rec.id)
        try:
            out.append((rec.text, rec.lang, ds.question("en", qid).text, rec.id))
        except KeyError:
            continue
    return out


def _fill_references(cfg: TranslationRun, splits: Splits, shard: Shard | None = None) -> int:
    """Give every active ``reference`` translator XQuAD-R's English originals where missing
    (those of ``shard``'s sources only, when given)."""
    refs = [t for t in cfg.translation.active_translators() if t.kind == "reference"]
    items = xquad_references(splits) if refs else []
    if shard is not None:
        items = [it for it in items if shard.contains(it[0], it[1])]
    if not items:
        return 0
    n = 0
    with TranslationStore(store_path(cfg), cfg.translation.commit_every) as store:
        for t in refs:
            todo = []
            for lang in dict.fromkeys(it[1] for it in items):
                miss = set(store.missing([it[0] for it in items if it[1] == lang], lang, t))
                todo += [it for it in items if it[1] == lang and it[0] in miss]
            n += store.add_reference(t, todo)
            log.info(
                "%s: stored %d XQuAD-R English originals (train sources only)", t.name, len(todo)
            )
    return n


def _shard_of_run(spec: str | None, from_launcher: bool) -> Shard | None:
    """``--shard i/n``; else, when ``from_launcher`` (``lira translate`` only), a launcher's
    rank (RANK/WORLD_SIZE).

    ``lira run`` never shards from the environment: its later stages read the main store.
    """
    if spec is not None:
        shard = parse_shard(spec)
    elif from_launcher:
        shard = shard_from_env()
        if shard is not None:
            log.info("translating shard %s (from the launcher's rank; --shard overrides)", shard)
    else:
        return None
    return shard if shard is not None and shard.count > 1 else None


def run_translate(
    cfg: TranslationRun,
    *,
    import_file: str | None = None,
    translator: str | None = None,
    shard: str | None = None,
    merge: list[str] | None = None,
    shard_from_launcher: bool = False,
    g: Callable[[], tuple[Encode, str]] | None = None,
) -> Mapping[str, object]:
    """``lira translate CONFIG [--import FILE --translator NAME | --shard I/N | --merge [STORE …]]``;
    writes translate_summary.json (``translate_summary.shard-<i>-of-<n>.json`` for a shard).
    ``shard_from_launcher``: without ``shard``, translate the launcher's rank's shard
    (``lira translate`` under ``accelerate launch``/``torchrun``; ``lira run`` never does).
    ``g``: the embedding critic's encoder factory (:func:`fill_store`)."""
    out = Path(cfg.output_dir)
    if merge is not None and (import_file or shard is not None):
        raise UserInputError("--merge cannot be combined with --shard or --import; run it alone")
    if import_file and shard is not None:
        raise UserInputError("--import cannot be combined with --shard; import into one store")
    part = None if (merge is not None or import_file) else _shard_of_run(shard, shard_from_launcher)
    out.mkdir(parents=True, exist_ok=True)
    if merge is not None:
        return merge_shards(cfg, store_path(cfg), list(merge))
    if import_file:
        name = translator
        if not Path(import_file).is_file():
            raise MissingFileError(f"--import file {import_file!r} does not exist")
        refs = [t.name for t in cfg.translation.active_translators() if t.kind == "reference"]
        if name and name not in refs:
            log.warning(
                "translator %r is not an active `kind: reference` translator of this config "
                "(those are %s); its candidates will not be used until it is added",
                name, refs,
            )  # fmt: skip
        t0 = time.perf_counter()
        with TranslationStore(store_path(cfg), cfg.translation.commit_every) as store:
            n = store.import_jsonl(import_file, name)
        imported: dict[str, object] = {
            "imported": n,
            "file": str(import_file),
            "translator": name,
            "seconds": round(time.perf_counter() - t0, 3),
        }
        print(f"imported {n} translations from {import_file} into {store_path(cfg)}")
        return imported

    splits = load_splits(cfg.data)
    sources = [*splits.train_sources, *splits.dev_sources, *splits.eval_sources]
    name = "translate_summary.json"
    if part is not None:
        path = shard_store_path(store_path(cfg), part)
        tc = dataclasses.replace(cfg.translation, store=str(path))
        cfg = dataclasses.replace(cfg, translation=tc)
        n_all = len(sources)
        sources = [s for s in sources if part.contains(s.text, s.lang)]
        name = f"translate_summary.shard-{part.index}-of-{part.count}.json"
        log.info("shard %s: %d of %d source texts -> %s", part, len(sources), n_all, path)
    _fill_references(cfg, splits, part)
    summary = fill_store(cfg, sources, g=g)
    if part is not None:
        summary["shard"] = str(part)
    write_json(out / name, summary)
    log.info(
        "translate: %d generated, %d reused, %d failed in %.1fs",
        summary["generated"], summary["reused"], summary["failed"], summary["seconds"],
    )  # fmt: skip
    check_translated(summary, cfg, out / name)
    return summary
