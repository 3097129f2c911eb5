"""``lira translate``: fill the translation store under the pass@k budget, then run the critic.

:func:`fill_store` is the engine (used by ``lira run`` and online by Arca); it
1. checks the sources: an empty/whitespace source is recorded as a permanent failure, a
   source longer than ``source_max_chars`` is truncated (warning + ``truncated`` flag), an
   unknown language code raises naming the code and the known codes;
2. for each active translator (``TranslationConfig.active_translators()``), asks the store
   what is missing, leases it in chunks of ``max(commit_every, batch_size)`` texts (kind=vllm:
   at least the engine's ``max_num_seqs``), generates and writes each chunk transactionally
   (a translator that fails to load or raises is recorded as failed for its texts; the others
   go on). A kind=openai translator keeps ``max_concurrency`` requests of one text in flight,
   a finished one replaced at once by the next (several chunks are leased at a time, each
   written when its last text is back); the servers of a pool are asked all at the same time
   (one thread each), the local engines one after another meanwhile;
3. cleans every LLM candidate (:mod:`lira.translation.cleanup`) and stores raw + cleaned +
   removed text;
4. scores every ok row not yet scored by the configured critic, and every row whose scoring
   failed before (request error, no valid reply after ``critic.max_retries``);
5. returns (and ``run_translate`` writes) ``translate_summary.json``.

Two or more processes may fill one store at once (``lira translate`` or one ``--shard`` twice): each
chunk is leased in the store first (:meth:`TranslationStore.claim`), so no text is generated
or scored twice; a process waits for texts leased by another one, and takes them over when
that process dies, so every process returns with the store complete.

Across nodes without a shared file system, ``lira translate CONFIG --shard i/n`` (or a
launcher's ``RANK``/``WORLD_SIZE``) translates the sources of shard i only, chosen by a stable
hash of each text, into its own store ``<store>.shard-<i>-of-<n>``; ``lira translate CONFIG
--merge [STORE …]`` then copies every shard store into the configured one
(:mod:`lira.translation.shards`, :func:`merge_shards`).

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from lira.checkpoint import write_json
from lira.config import ModelsConfig
from lira.data.splits import Splits, load_splits
from lira.data.types import Record
from lira.data.xquad_r import plain_qid
from lira.errors import LiRAError, MissingFileError, UserInputError
from lira.prompts import language_name
from lira.translation.cleanup import clean_translation
from lira.translation.config import PoolRun, TranslationConfig, TranslationRun, TranslatorConfig
from lira.translation.critic import Encode, build_critic, critic_id
from lira.translation.shards import (
    Shard,
    find_shard_stores,
    missing_shards,
    parse_shard,
    shard_from_env,
    shard_store_path,
)
from lira.translation.store import Row, TranslationStore, key_for
from lira.translation.translators import (
    Translation,
    TranslatorBackend,
    build_translator,
    in_flight,
    vllm_max_num_seqs,
)

log = logging.getLogger(__name__)

EMPTY_SOURCE = "empty or whitespace-only source text"
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


def group_sources(sources: Sources) -> dict[str, list[str]]:
    """{lang: [texts]} from Records (``.text``/``.lang``), (text, lang) pairs or a dict."""
    if isinstance(sources, dict):
        return {lang: list(texts) for lang, texts in sources.items()}
    out: dict[str, list[str]] = {}
    for s in sources:
        text, lang = (s.text, s.lang) if hasattr(s, "text") else (s[0], s[1])
        out.setdefault(lang, []).append(text)
    return out


def check_source(text: str, max_chars: int) -> tuple[str, bool]:
    """(text to translate, truncated?) — cut to ``max_chars`` at a word boundary if possible."""
    if len(text) <= max_chars:
        return text, False
    cut = text[:max_chars]
    space = cut.rfind(" ")
    return (cut[:space] if space > max_chars // 2 else cut), True


def _new_stats() -> dict[str, Any]:
    return {
        "generated": 0, "reused": 0, "by_others": 0, "failed": 0, "retryable": 0, "truncated": 0,
        "seconds": 0.0, "texts_per_s": 0.0,
    }  # fmt: skip


def _row(
    text: str,
    fed: str,
    tr: Translation | str | None,
    lang: str,
    tcfg: TranslatorConfig,
    load_error: str | None,
) -> Row:
    """The store row of one generated text: ok (cleaned) or a recorded failure.

    ``tr`` is the backend's output, an error string (the chunk raised) or None (no backend).
    """
    base: dict[str, Any] = {"truncated": len(fed) < len(text)}
    if tr is None or isinstance(tr, str):
        return Row(text, lang, tcfg, status="failed", error=tr or load_error, retry=True, **base)
    base["gen_seconds"] = tr.seconds
    if not tr.ok:
        return Row(text, lang, tcfg, status="failed", error=tr.error, retry=True, **base)
    # LLM outputs get the meta-text cleanup (App. C.3); MT outputs are taken as they are
    cleaned, removed = clean_translation(tr.raw) if tcfg.role == "llm" else (tr.raw.strip(), "")
    if not cleaned:  # greedy decoding would give the same empty text again: not retried
        return Row(text, lang, tcfg, raw=tr.raw, removed=removed, status="failed",
                   error="empty translation after cleanup", retry=tcfg.temperature > 0,
                   **base)  # fmt: skip
    return Row(text, lang, tcfg, raw=tr.raw, text=cleaned, removed=removed, **base)


def _leased(
    store: TranslationStore,
    keys: list[str],
    columns: str,
    before: dict[str, tuple],
    size: int,
    namespace: str,
    elsewhere: Callable[[int], None],
    hold: bool = False,
) -> Iterator[list[int]]:
    """Yield chunks (indices into ``keys``) this process leased and nobody changed meanwhile.

    ``before`` is the state of ``columns`` per key when the work list was made; a key whose
    state changed was done by another process and is skipped (``elsewhere`` counts it). Keys
    leased by another live process are waited for (polled every ``LEASE_POLL_S``) until they
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
                len(pending), namespace, store.path,
            )  # fmt: skip
            time.sleep(LEASE_POLL_S)


@dataclasses.dataclass
class _Work:
    """One leased chunk of a translator's texts in generation (:func:`_translate_one`)."""

    lang: str
    part: list[str]
    """The chunk's source texts."""
    keys: list[str]
    """Their store keys (leased until the chunk's rows are written)."""
    rows: list[Row] = dataclasses.field(default_factory=list)
    """Rows known without generating (empty sources)."""
    gen: list[tuple[int, str]] = dataclasses.field(default_factory=list)
    """(index in ``part``, text fed to the model) of the texts generated."""
    calls: list[Future] = dataclasses.field(default_factory=list)
    """The backend calls generating ``gen``, in order."""


def _generate(
    backend: TranslatorBackend | None, name: str, texts: list[str], lang: str
) -> list[Translation | str | None]:
    """The backend's outputs for ``texts``: None each without a backend, the error string each
    when the call raised (recorded as failures, never raised)."""
    if backend is None:
        return [None] * len(texts)
    try:
        return list(backend.translate(texts, lang))
    except Exception as e:
        log.error("%s failed on a chunk: %s", name, e)
        return [f"{type(e).__name__}: {e}"] * len(texts)


def _call(pool: ThreadPoolExecutor | None, fn: Callable[..., Any], *args: Any) -> Future:
    """``fn(*args)`` in ``pool``, or run now (no pool) as a finished future."""
    if pool is not None:
        return pool.submit(fn, *args)
    f: Future = Future()
    f.set_result(fn(*args))
    return f


_GEN_STATE = "status, created"
_CRITIC_STATE = "critic_id, critic_status, critic_raw, critic_seconds"


def _translate_one(
    store: TranslationStore,
    tcfg: TranslatorConfig,
    by_lang: dict[str, list[str]],
    tc: TranslationConfig,
    stats: dict[str, Any],
    progress: tqdm,
    cache_dir: str = "",
) -> None:
    """Generate the missing rows of one translator; failures are recorded, never raised.

    Texts are leased chunk by chunk, so several processes on one store split the work.
    ``cache_dir`` (``models.cache_dir``) is where the backend finds demo models.
    """
    keys = {
        lang: {t: key_for(t, lang, tcfg) for t in dict.fromkeys(texts)}
        for lang, texts in by_lang.items()
    }
    before = {lang: store.states(list(k.values()), _GEN_STATE) for lang, k in keys.items()}
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
            leases = _leased(
                store, text_keys, _GEN_STATE, before[lang], chunk, "gen", elsewhere, hold=True
            )
            for idx in leases:
                if not idx:  # about to wait for another process: finish ours first
                    settle(1)
                    continue
                w = _Work(lang, [texts[j] for j in idx], [text_keys[j] for j in idx])
                work.append(w)
                if not loaded:  # only a process that got work loads the model
                    loaded = True
                    try:
                        backend = build_translator(tcfg, cache_dir)
                    except Exception as e:
                        load_error = f"translator failed to load: {type(e).__name__}: {e}"
                        log.error("%s: %s", tcfg.name, load_error)
                for j, text in enumerate(w.part):
                    if not text.strip():
                        w.rows.append(Row(text, lang, tcfg, status="failed", error=EMPTY_SOURCE))
                        continue
                    fed, truncated = check_source(text, tc.source_max_chars)
                    if truncated:
                        log.warning(
                            "%s: source of %d chars truncated to %d (source_max_chars)",
                            tcfg.name, len(text), len(fed),
                        )  # fmt: skip
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


def g_encode(models: ModelsConfig) -> tuple[Encode, str]:
    """The run's g as the embedding critic's encoder (no cache): texts -> [N, d] sentence
    vectors (a token-level g: the masked mean of its token states) and g's name."""
    import torch

    from lira.models import load_encoder

    encoder = load_encoder(models)

    @torch.no_grad()
    def encode(texts: list[str]) -> torch.Tensor:
        tokens, mask = encoder(list(texts), "query")  # [N, L, d], [N, L]
        m = mask.to(tokens.dtype).unsqueeze(-1)
        return ((tokens * m).sum(1) / m.sum(1).clamp_min(1.0)).float().cpu()

    return encode, str(getattr(encoder, "name", "") or models.encoder)


def _score(
    store: TranslationStore,
    tc: TranslationConfig,
    translators: list[TranslatorConfig],
    by_lang: dict[str, list[str]],
    cache_dir: str = "",
    g: Callable[[], tuple[Encode, str]] | None = None,
) -> dict[str, Any]:
    """Run the critic on ok rows it has not scored yet, or whose scoring failed; its stats.

    ``scored``/``failed``: pairs scored / still failed in this run; ``retried``: pairs whose
    critic had failed in an earlier run (tried again here); ``corrupt``: pairs whose stored
    scores were outside 1-10 (scored again here); ``by_others``: pairs another
    process scored meanwhile. Failed pairs keep ``scores=None`` until a later run scores them.
    ``g``: builds (encode, name) of the run's g for ``critic.kind: embedding`` (called only
    when that critic has pairs to score).
    """
    stats: dict[str, Any] = {
        "kind": tc.critic.kind, "scored": 0, "failed": 0, "retried": 0, "corrupt": 0,
        "by_others": 0, "seconds": 0.0,
    }  # fmt: skip
    if tc.critic.kind == "none":
        return stats
    encode: Encode | None = None
    g_name = ""
    if tc.critic.kind == "embedding" and not tc.critic.encoder:
        if g is None:
            raise ValueError("critic kind 'embedding' with the run's g needs the run's models")
        encode, g_name = g()
    cid = critic_id(tc.critic, g_name)
    keys = [key_for(x, lang, t) for t in translators for lang, texts in by_lang.items()
            for x in dict.fromkeys(texts)]  # fmt: skip
    before = store.states(keys, _CRITIC_STATE)
    todo = [
        (lang, item)
        for t in translators
        for lang, texts in by_lang.items()
        for item in store.needs_critic(texts, lang, t, cid)
    ]
    if not todo:
        return stats
    stats["retried"] = sum(
        1 for _, it in todo if (b := before.get(it[0])) and b[0] == cid and b[1] == "failed"
    )
    # scored ok by this critic and still to do: its stored scores are outside 1-10
    stats["corrupt"] = sum(
        1 for _, it in todo if (b := before.get(it[0])) and b[0] == cid and b[1] == "ok"
    )
    if stats["corrupt"]:
        log.warning(
            "critic: %d stored score(s) are outside 1-10 (corrupt or edited rows); scoring "
            "them again", stats["corrupt"],
        )  # fmt: skip
    t0 = time.perf_counter()
    critic = None
    chunk = max(tc.commit_every, tc.critic.batch_size)
    with tqdm(total=len(todo), desc="critic", unit="pair") as bar:

        def elsewhere(n: int) -> None:
            stats["by_others"] += n
            bar.update(n)

        todo_keys = [it[0] for _, it in todo]
        for idx in _leased(store, todo_keys, _CRITIC_STATE, before, chunk, "critic", elsewhere):
            part = [todo[j] for j in idx]
            critic = critic or build_critic(tc.critic, cache_dir=cache_dir, encode=encode,
                                            g_name=g_name)  # fmt: skip
            updates = []
            for lang in dict.fromkeys(lang for lang, _ in part):
                items = [it for lg, it in part if lg == lang]
                srcs = [check_source(it[1], tc.source_max_chars)[0] for it in items]
                results = critic.score(srcs, [it[2] for it in items], lang)
                for (key, _, _), r in zip(items, results):
                    s = r.scores or (None, None, None)
                    updates.append((key, {
                        "semantic": s[0], "emotional": s[1], "pragmatic": s[2],
                        "critic_id": cid, "critic_status": "ok" if r.ok else "failed",
                        "critic_raw": r.raw if isinstance(r.raw, str) else repr(r.raw)[:2000],
                        "critic_error": r.error, "critic_seconds": r.seconds,
                    }))  # fmt: skip
                    stats["scored" if r.ok else "failed"] += 1
            store.write_scores(updates)
            bar.update(len(part))
    stats["seconds"] = round(time.perf_counter() - t0, 3)
    if stats["failed"]:
        log.warning(
            "critic: %d pair(s) have no scores (request failed or no valid reply); the next "
            "`lira translate` scores them again", stats["failed"],
        )  # fmt: skip
    return stats


def fill_store(
    cfg: PoolRun,
    sources: Sources,
    store: TranslationStore | None = None,
    g: Callable[[], tuple[Encode, str]] | None = None,
) -> dict[str, Any]:
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
    summary: dict[str, Any] = {"translators": {}, "store": str(store.path)}
    n_unique = sum(len(dict.fromkeys(t)) for t in by_lang.values())
    threads: list[TranslationStore] = []

    def generate(tcfg: TranslatorConfig, stats: dict[str, Any], st: TranslationStore) -> None:
        with tqdm(total=n_unique, desc=f"translate[{tcfg.name}]", unit="text") as bar:
            _translate_one(st, tcfg, by_lang, tc, stats, bar, cfg.models.cache_dir)

    try:
        remote: list[tuple[TranslatorConfig, dict[str, Any]]] = []
        local: list[tuple[TranslatorConfig, dict[str, Any]]] = []
        for tcfg in active:
            stats = _new_stats()
            summary["translators"][tcfg.name] = stats
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
        summary["critic"] = _score(store, tc, active, by_lang, cfg.models.cache_dir, g)
    finally:
        for st in threads:
            st.close()
        if own:
            store.close()
    summary["sources"] = n_unique
    summary["generated"] = sum(s["generated"] for s in summary["translators"].values())
    summary["reused"] = sum(s["reused"] for s in summary["translators"].values())
    summary["failed"] = sum(s["failed"] for s in summary["translators"].values())
    summary["by_others"] = sum(s["by_others"] for s in summary["translators"].values())
    summary["pending"] = sum(s.get("retryable", 0) for s in summary["translators"].values()) + (
        summary["critic"].get("failed", 0)
    )
    summary["seconds"] = round(time.perf_counter() - t0, 3)
    return summary


class NothingTranslated(LiRAError):
    """Every translator that generates failed on every text: the store gained nothing usable."""


def failure_lines(summary: dict[str, Any]) -> list[str]:
    """One line per translator with failed texts: how many of its texts failed, last error."""
    lines = []
    for name, st in summary.get("translators", {}).items():
        if st.get("failed"):
            total = st["failed"] + st.get("generated", 0) + st.get("reused", 0)
            last = f" (last error: {st['last_error']})" if st.get("last_error") else ""
            lines.append(f"{name}: {st['failed']} of {total} texts failed{last}")
    return lines


def check_translated(summary: dict[str, Any], cfg: TranslationRun, where: str | Path) -> None:
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


def merge_shards(cfg: TranslationRun, paths: list[str] | None = None) -> dict[str, Any]:
    """``lira translate CONFIG --merge [STORE …]``: copy shard stores into the configured store.

    ``paths``: the shard stores to merge; none = every ``<store>.shard-<i>-of-<n>`` file next to
    the configured store. Each store is merged in one transaction (same key -> one row, see
    :meth:`TranslationStore.merge_from`), so an interrupted merge leaves whole stores merged and
    merging again adds nothing twice. Prints a summary and writes translate_merge_summary.json.
    """
    main = store_path(cfg)
    if paths:
        shards = [Path(p) for p in paths]
        for p in shards:
            if not p.is_file():
                hint = " (put key=value overrides before --merge)" if "=" in p.name else ""
                raise MissingFileError(f"--merge: shard store {str(p)!r} does not exist{hint}")
    else:
        found = find_shard_stores(main)
        if not found:
            raise MissingFileError(
                f"--merge: no shard stores next to {main} (expected "
                f"{shard_store_path(main, Shard(0, 2)).name}, …); run `lira translate CONFIG "
                "--shard I/N` first, or list the shard stores after --merge"
            )
        for s in missing_shards([s for s, _ in found]):
            log.warning(
                "--merge: shard %s (%s) is missing; its source texts will not be in %s",
                s, shard_store_path(main, s).name, main,
            )  # fmt: skip
        shards = [p for _, p in found]
    for p in shards:
        if p.resolve() == main.resolve():
            raise UserInputError(f"--merge: {p} is the configured store itself; list shard stores")
    t0 = time.perf_counter()
    per: dict[str, dict[str, int]] = {}
    with TranslationStore(main, cfg.translation.commit_every) as store:
        for p in shards:
            with TranslationStore(p, cfg.translation.commit_every) as shard_store:
                if busy := shard_store.live_leases():
                    log.warning(
                        "--merge: %s has %d live lease(s): a process may still be filling it; "
                        "merge again when it has finished", p, busy,
                    )  # fmt: skip
                per[str(p)] = store.merge_from(shard_store)
        rows = store.count()
    total = {k: sum(s[k] for s in per.values()) for k in ("rows", "added", "duplicates",
                                                          "conflicts", "replaced")}  # fmt: skip
    summary: dict[str, Any] = {
        "store": str(main), "shards": per, **total, "store_rows": rows,
        "seconds": round(time.perf_counter() - t0, 3),
    }  # fmt: skip
    print(f"merged {len(per)} shard store(s) into {main}:")
    for p, s in per.items():
        print(f"  {p}: {s['rows']} rows, {s['added']} added, {s['duplicates']} duplicates "
              f"skipped, {s['conflicts']} conflicts ({s['replaced']} replaced)")  # fmt: skip
    print(f"total: {total['rows']} rows read, {total['added']} added, {total['duplicates']} "
          f"duplicates skipped, {total['conflicts']} conflicts ({total['replaced']} replaced); "
          f"the store has {rows} rows")  # fmt: skip
    if total["conflicts"]:
        log.warning(
            "--merge: %d key(s) differ between stores; kept one row each (ok over failed, "
            "scored over unscored, then the earlier one)", total["conflicts"],
        )  # fmt: skip
    out = Path(cfg.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "translate_merge_summary.json", summary)
    return summary


def run_translate(
    cfg: TranslationRun,
    *,
    import_file: str | None = None,
    translator: str | None = None,
    shard: str | None = None,
    merge: list[str] | None = None,
    shard_from_launcher: bool = False,
    g: Callable[[], tuple[Encode, str]] | None = None,
) -> dict[str, Any]:
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
        return merge_shards(cfg, list(merge))
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
        summary: dict[str, Any] = {
            "imported": n,
            "file": str(import_file),
            "translator": name,
            "seconds": round(time.perf_counter() - t0, 3),
        }
        print(f"imported {n} translations from {import_file} into {store_path(cfg)}")
        return summary

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
