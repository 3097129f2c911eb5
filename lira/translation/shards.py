"""``lira translate --shard i/n`` and ``--merge``: one translation store per node, merged later.

A source text belongs to shard ``int(sha256([text, lang])[:16 hex]) % n`` (:func:`shard_of`):
the assignment depends on the text alone, never on its position, so adding or removing sources
moves no other text to another shard, and identical texts (which share store rows) always land
in the same shard. Shard ``i`` of ``n`` fills its own store next to the configured one,
``<store stem>.shard-<i>-of-<n><suffix>`` (:func:`shard_store_path`), so nodes need no shared
file system; ``--merge`` copies the rows of every shard store into the configured store
(:func:`merge_shards`, :meth:`~lira.translation.store.TranslationStore.merge_from`).

With no ``--shard``, ``lira translate`` takes the shard from a launcher's environment
(:func:`shard_from_env`: ``RANK``/``WORLD_SIZE`` as set by torchrun and ``accelerate launch``,
else ``LOCAL_RANK``/``LOCAL_WORLD_SIZE``); ``--shard 0/1`` turns that off.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from lira.errors import MissingFileError, UserInputError
from lira.jsonio import write_json
from lira.translation.config import TranslationRun
from lira.translation.store import TranslationStore

log = logging.getLogger(__name__)

ENV_RANKS = (("RANK", "WORLD_SIZE"), ("LOCAL_RANK", "LOCAL_WORLD_SIZE"))
"""(rank, world size) environment variables read when no ``--shard`` is given, first match wins."""


@dataclass(frozen=True)
class Shard:
    """Shard ``index`` (0-based) of ``count``."""

    index: int
    count: int

    def __str__(self) -> str:
        return f"{self.index}/{self.count}"

    def contains(self, text: str, lang: str) -> bool:
        """True when source ``text`` (language ``lang``) belongs to this shard."""
        return shard_of(text, lang, self.count) == self.index


def shard_of(text: str, lang: str, count: int) -> int:
    """The shard (0 … count-1) of one source text: a stable hash of (text, lang)."""
    blob = json.dumps([text, lang], ensure_ascii=False).encode("utf-8")
    return int(hashlib.sha256(blob).hexdigest()[:16], 16) % count


def _shard(index: int, count: int, what: str) -> Shard:
    if count < 1:
        raise UserInputError(f"{what}: the number of shards must be >= 1")
    if not 0 <= index < count:
        raise UserInputError(
            f"{what}: the shard index must be in 0..{count - 1} (0-based: "
            f"--shard 0/{count} … --shard {count - 1}/{count})"
        )
    return Shard(index, count)


def parse_shard(spec: str) -> Shard:
    """``'i/n'`` -> Shard(i, n); a malformed or impossible value raises UserInputError."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(spec))
    if m is None:
        raise UserInputError(
            f"--shard {spec!r}: expected I/N, the 0-based shard index and the number of shards "
            "(e.g. --shard 0/4)"
        )
    return _shard(int(m[1]), int(m[2]), f"--shard {spec!r}")


def shard_from_env(environ: Mapping[str, str] | None = None) -> Shard | None:
    """The shard a launcher's rank variables give (:data:`ENV_RANKS`), or None.

    None when no pair is set or its world size is 1; a set but unusable value raises
    UserInputError naming the variable.
    """
    env = os.environ if environ is None else environ
    for rank_var, size_var in ENV_RANKS:
        if rank_var not in env or size_var not in env:
            continue
        values = []
        for var in (rank_var, size_var):
            try:
                values.append(int(env[var]))
            except ValueError:
                raise UserInputError(
                    f"${var}={env[var]!r} is not an integer; fix the launcher's environment or "
                    "pass --shard I/N"
                ) from None
        shard = _shard(values[0], values[1], f"${rank_var}={values[0]} ${size_var}={values[1]}")
        return shard if shard.count > 1 else None
    return None


def shard_store_path(store: Path, shard: Shard) -> Path:
    """``dir/translations.sqlite`` -> ``dir/translations.shard-<i>-of-<n>.sqlite``."""
    return store.with_name(f"{store.stem}.shard-{shard.index}-of-{shard.count}{store.suffix}")


def find_shard_stores(store: Path) -> list[tuple[Shard, Path]]:
    """The shard stores next to ``store`` (by shard count, then index)."""
    pattern = re.compile(rf"{re.escape(store.stem)}\.shard-(\d+)-of-(\d+){re.escape(store.suffix)}")
    found = []
    if store.parent.is_dir():
        for p in store.parent.iterdir():
            m = pattern.fullmatch(p.name)
            if m and p.is_file() and int(m[1]) < int(m[2]):
                found.append((Shard(int(m[1]), int(m[2])), p))
    return sorted(found, key=lambda sp: (sp[0].count, sp[0].index))


def missing_shards(found: list[Shard]) -> list[Shard]:
    """The shards of each count in ``found`` that are absent (their texts would be missing)."""
    out = []
    for n in sorted({s.count for s in found}):
        have = {s.index for s in found if s.count == n}
        out += [Shard(i, n) for i in range(n) if i not in have]
    return out


def merge_shards(
    cfg: TranslationRun, main: Path, paths: list[str] | None = None
) -> dict[str, object]:
    """``lira translate CONFIG --merge [STORE …]``: copy shard stores into the configured store
    ``main``.

    ``paths``: the shard stores to merge; none = every ``<store>.shard-<i>-of-<n>`` file next to
    the configured store. Each store is merged in one transaction (same key -> one row, see
    :meth:`TranslationStore.merge_from`), so an interrupted merge leaves whole stores merged and
    merging again adds nothing twice. Prints a summary and writes translate_merge_summary.json.
    """
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
    summary: dict[str, object] = {
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
