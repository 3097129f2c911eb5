"""Scheduling a translate pass: leased chunks of work, and one translator's requests in flight.

:func:`leased_chunks` hands out the chunks of a work list that this process leased in the
store and nobody changed meanwhile, waiting for texts another live process holds, so several
processes on one store split the work and each returns with the store complete (used by
:func:`translate_one` and by the critic pass of :func:`lira.translation.engine.fill_store`).

:func:`translate_one` generates the missing rows of one translator: it asks the store what is
missing, leases it in chunks of ``max(commit_every, batch_size)`` texts (kind=vllm: at least
the engine's ``max_num_seqs``), generates and writes each chunk transactionally (a translator
that fails to load or raises is recorded as failed for its texts). A kind=openai translator
keeps ``max_concurrency`` requests of one text in flight in a thread pool, a finished one
replaced at once by the next (several chunks are leased at a time, each written when its last
text is back). An empty/whitespace source is recorded as a permanent failure
(:data:`EMPTY_SOURCE`), a source longer than ``source_max_chars`` is truncated
(:func:`check_source`); every LLM candidate is cleaned (:mod:`lira.translation.cleanup`).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from contextlib import closing
from typing import ParamSpec, TypedDict, TypeVar

from tqdm.auto import tqdm

from lira.translation.cleanup import clean_translation
from lira.translation.config import TranslationConfig, TranslatorConfig
from lira.translation.schema import SQLValue
from lira.translation.store import Row, TranslationStore, key_for
from lira.translation.translators import (
    Translation,
    TranslatorBackend,
    in_flight,
    vllm_max_num_seqs,
)

log = logging.getLogger(__name__)

P = ParamSpec("P")
R = TypeVar("R")

EMPTY_SOURCE = "empty or whitespace-only source text"
GEN_STATE = "status, created"
"""The store columns whose change tells that another process generated a row meanwhile."""
CRITIC_STATE = "critic_id, critic_status, critic_raw, critic_seconds"
"""The store columns whose change tells that another process scored a row meanwhile."""

Output = Translation | str | None
"""A backend's output for one text: a :class:`Translation`, the error string of a chunk that
raised, or None (no backend: it failed to load)."""


class TranslatorStats(TypedDict, total=False):
    """One translator's entry in ``translate_summary.json`` (:mod:`lira.translation.engine`)."""

    generated: int
    reused: int
    by_others: int
    failed: int
    retryable: int
    truncated: int
    seconds: float
    texts_per_s: float
    last_error: str
    """The last failure's error, on one line (only when a text failed)."""
    missing: int
    """A ``reference`` translator's sources without a stored translation."""


def new_stats() -> TranslatorStats:
    """A translator's counters before its pass."""
    return {
        "generated": 0,
        "reused": 0,
        "by_others": 0,
        "failed": 0,
        "retryable": 0,
        "truncated": 0,
        "seconds": 0.0,
        "texts_per_s": 0.0,
    }


def check_source(text: str, max_chars: int) -> tuple[str, bool]:
    """(text to translate, truncated?) — cut to ``max_chars`` at a word boundary if possible."""
    if len(text) <= max_chars:
        return text, False
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut), True


def _row(
    text: str,
    fed: str,
    tr: Output,
    lang: str,
    tcfg: TranslatorConfig,
    load_error: str | None,
) -> Row:
    """The store row of one generated text: ok (cleaned) or a recorded failure.

    ``tr`` is the backend's output, an error string (the chunk raised) or None (no backend).
    """
    truncated = len(fed) < len(text)
    if tr is None or isinstance(tr, str):
        return Row(
            text,
            lang,
            tcfg,
            status="failed",
            error=tr or load_error,
            retry=True,
            truncated=truncated,
        )
    if not tr.ok:
        return Row(
            text,
            lang,
            tcfg,
            status="failed",
            error=tr.error,
            retry=True,
            truncated=truncated,
            gen_seconds=tr.seconds,
        )
    # LLM outputs get the meta-text cleanup (App. C.3); MT outputs are taken as they are
    cleaned, removed = clean_translation(tr.raw) if tcfg.role == "llm" else (tr.raw.strip(), "")
    if not cleaned:  # greedy decoding would give the same empty text again: not retried
        return Row(
            text,
            lang,
            tcfg,
            raw=tr.raw,
            removed=removed,
            status="failed",
            error="empty translation after cleanup",
            retry=tcfg.temperature > 0,
            truncated=truncated,
            gen_seconds=tr.seconds,
        )
    return Row(
        text,
        lang,
        tcfg,
        raw=tr.raw,
        text=cleaned,
        removed=removed,
        truncated=truncated,
        gen_seconds=tr.seconds,
    )


def leased_chunks(
    store: TranslationStore,
    keys: list[str],
    columns: str,
    before: Mapping[str, tuple[SQLValue, ...]],
    size: int,
    namespace: str,
    elsewhere: Callable[[int], None],
    poll_s: float,
    hold: bool = False,
) -> Iterator[list[int]]:
    """Yield chunks (indices into ``keys``) this process leased and nobody changed meanwhile.

    ``before`` is the state of ``columns`` per key when the work list was made; a key whose
    state changed was done by another process and is skipped (``elsewhere`` counts it). Keys
    leased by another live process are waited for (polled every ``poll_s`` seconds) until they
    are written or their lease goes stale, so the store is complete when this returns.
    A chunk's lease ends when the next one is asked for, or (``hold``) is the caller's to end
    (``store.release``) once its rows are written, so several chunks can be in work at once;
    then an empty chunk asks the caller to finish what it holds before this process waits for
    another's leases (two processes waiting on each other's held chunks would never end).
    """
    pending = list(range(len(keys)))
    while pending:
        waiting: list[int] = []
        for i in range(0, len(pending), size):
            part = pending[i : i + size]
            got = set(store.claim([keys[j] for j in part], namespace))
            mine = [j for j in part if keys[j] in got]
            waiting += [j for j in part if keys[j] not in got]
            if not mine:
                continue
            kept: list[int] = []
            try:
                now = store.states([keys[j] for j in mine], columns)
                fresh = [j for j in mine if now.get(keys[j]) == before.get(keys[j])]
                if len(fresh) < len(mine):
                    elsewhere(len(mine) - len(fresh))
                if fresh:
                    kept = fresh if hold else []
                    yield fresh
            finally:
                store.release([keys[j] for j in mine if j not in kept], namespace)
        if not waiting:
            return
        if hold:  # the caller writes (and releases) what it holds before this process waits
            yield []
        now = store.states([keys[j] for j in waiting], columns)
        pending = [j for j in waiting if now.get(keys[j]) == before.get(keys[j])]
        if len(pending) < len(waiting):
            elsewhere(len(waiting) - len(pending))
        held = store.leased_elsewhere([keys[j] for j in pending], namespace) if pending else []
        if pending and len(held) == len(pending):
            log.info(
                "%d %s item(s) are leased by another process on %s; waiting for them",
                len(pending),
                namespace,
                store.path,
            )
            time.sleep(poll_s)


@dataclasses.dataclass
class _Work:
    """One leased chunk of a translator's texts in generation (:func:`translate_one`)."""

    lang: str
    part: list[str]
    """The chunk's source texts."""
    keys: list[str]
    """Their store keys (leased until the chunk's rows are written)."""
    rows: list[Row] = dataclasses.field(default_factory=list)
    """Rows known without generating (empty sources)."""
    gen: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    """(index in ``part``, text fed to the model) of the texts generated."""
    calls: list[Future[list[Output]]] = dataclasses.field(default_factory=list)
    """The backend calls generating ``gen``, in order."""


def _generate(
    backend: TranslatorBackend | None, name: str, texts: list[str], lang: str
) -> list[Output]:
    """The backend's outputs for ``texts``: None each without a backend, the error string each
    when the call raised (recorded as failures, never raised)."""
    if backend is None:
        return [None] * len(texts)
    try:
        return list(backend.translate(texts, lang))
    except Exception as e:
        log.error("%s failed on a chunk: %s", name, e)
        return [f"{type(e).__name__}: {e}"] * len(texts)


def _call(
    pool: ThreadPoolExecutor | None, fn: Callable[P, R], *args: P.args, **kwargs: P.kwargs
) -> Future[R]:
    """``fn(*args)`` in ``pool``, or run now (no pool) as a finished future."""
    if pool is not None:
        return pool.submit(fn, *args, **kwargs)
    f: Future[R] = Future()
    f.set_result(fn(*args, **kwargs))
    return f


def translate_one(
    store: TranslationStore,
    tcfg: TranslatorConfig,
    by_lang: dict[str, list[str]],
    tc: TranslationConfig,
    stats: TranslatorStats,
    progress: tqdm,
    build: Callable[[TranslatorConfig, str], TranslatorBackend],
    poll_s: float,
    cache_dir: str = "",
) -> None:
    """Generate the missing rows of one translator; failures are recorded, never raised.

    Texts are leased chunk by chunk, so several processes on one store split the work
    (:func:`leased_chunks`, polling every ``poll_s`` seconds for texts another process holds).
    ``build`` makes the backend (once this process got work); ``cache_dir``
    (``models.cache_dir``) is where it finds demo models.
    """
    keys = {
        lang: {t: key_for(t, lang, tcfg) for t in dict.fromkeys(texts)}
        for lang, texts in by_lang.items()
    }
    before = {lang: store.states(list(k.values()), GEN_STATE) for lang, k in keys.items()}
    todo = {lang: store.missing(texts, lang, tcfg) for lang, texts in by_lang.items()}
    total_unique = sum(len(k) for k in keys.values())
    n_todo = sum(len(v) for v in todo.values())
    stats["reused"] = total_unique - n_todo
    progress.update(stats["reused"])
    if n_todo == 0:
        return
    t0 = time.perf_counter()
    backend: TranslatorBackend | None = None
    load_error: str | None = None
    loaded = False

    def elsewhere(n: int) -> None:
        stats["by_others"] += n
        progress.update(n)

    # rows per lease and store commit; vLLM: enough texts to fill the engine's sequences
    chunk = max(tc.commit_every, tcfg.batch_size, vllm_max_num_seqs(tcfg))
    workers = in_flight(tcfg)
    per_call = 1 if workers > 1 else chunk  # many requests of one text, or one batched call
    work: list[_Work] = []  # leased chunks in generation, in lease order

    def commit(w: _Work) -> None:
        outs = [tr for f in w.calls for tr in f.result()]
        rows = w.rows + [
            _row(w.part[j], fed, tr, w.lang, tcfg, load_error) for (j, fed), tr in zip(w.gen, outs)
        ]
        store.write_rows(rows)
        store.release(w.keys, "gen")
        errors = [r.error for r in rows if r.status == "failed" and r.error]
        if errors:
            stats["last_error"] = " ".join(str(errors[-1]).split())[:200]
        stats["failed"] += sum(r.status == "failed" for r in rows)
        stats["retryable"] += sum(r.status == "failed" and r.retry for r in rows)
        stats["generated"] += sum(r.status == "ok" for r in rows)
        stats["truncated"] += sum(r.truncated for r in rows)
        progress.update(len(w.part))

    def settle(limit: int) -> None:
        """Commit every finished chunk; block until fewer than ``limit`` calls are running."""
        while True:
            for w in [w for w in work if all(f.done() for f in w.calls)]:
                work.remove(w)
                commit(w)
            busy = [f for w in work for f in w.calls if not f.done()]
            if len(busy) < limit:
                return
            wait(busy, return_when=FIRST_COMPLETED)

    pool = ThreadPoolExecutor(workers, f"translate-{tcfg.name}") if workers > 1 else None
    try:
        for lang, texts in todo.items():
            text_keys = [keys[lang][t] for t in texts]
            leases = leased_chunks(
                store, text_keys, GEN_STATE, before[lang], chunk, "gen", elsewhere, poll_s, True
            )
            with closing(leases):  # on an error, closed now: not after the store is closed
                for idx in leases:
                    if not idx:  # about to wait for another process: finish ours first
                        settle(1)
                        continue
                    w = _Work(lang, [texts[j] for j in idx], [text_keys[j] for j in idx])
                    work.append(w)
                    if not loaded:  # only a process that got work loads the model
                        loaded = True
                        try:
                            backend = build(tcfg, cache_dir)
                        except Exception as e:
                            load_error = f"translator failed to load: {type(e).__name__}: {e}"
                            log.error("%s: %s", tcfg.name, load_error)
                    for j, text in enumerate(w.part):
                        if not text.strip():
                            w.rows.append(
                                Row(text, lang, tcfg, status="failed", error=EMPTY_SOURCE)
                            )
                            continue
                        fed, truncated = check_source(text, tc.source_max_chars)
                        if truncated:
                            log.warning(
                                "%s: source of %d chars truncated to %d (source_max_chars)",
                                tcfg.name,
                                len(text),
                                len(fed),
                            )
                        w.gen.append((j, fed))
                    fed_texts = [g[1] for g in w.gen]
                    for i in range(0, len(fed_texts), per_call):
                        part = fed_texts[i : i + per_call]
                        w.calls.append(_call(pool, _generate, backend, tcfg.name, part, lang))
                    settle(workers)
        settle(1)
    finally:
        if pool is not None:
            pool.shutdown(wait=True, cancel_futures=True)
        for w in work:  # not written (an error): another process may take them at once
            store.release(w.keys, "gen")
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    done = stats["generated"] + stats["failed"]
    stats["texts_per_s"] = round(done / max(stats["seconds"], 1e-9), 3)
