"""The frozen-g cache (issue 51, items 5 and 6): a row whose bytes changed is recomputed, never
trained on, and a row depends on its text only, so a cold cache, a warm one and one a killed
run began to fill train the same weights bit for bit."""

from __future__ import annotations

import shutil
import sqlite3

import numpy as np
import pytest
import torch

from arca.g_cache import GEmbeddingCache, cache_key, cache_path
from pipeline.runconfig import RunConfig

from .conftest import reference_run

ENC = "sentence|g|v1|d=4|len=8|kind=query"


def _compute(calls: list[list[str]]):
    """A g whose rows depend on the batch as real kernels do (float noise per batch size)."""

    def compute(todo: list[str]) -> torch.Tensor:
        calls.append(list(todo))
        base = torch.tensor([[float(len(t)), 1.0, 2.0, 3.0] for t in todo])  # [M, 4]
        return (base + 1e-6 * len(todo)).unsqueeze(1)  # [M, 1, 4]

    return compute


def test_a_same_size_overwrite_or_swap_is_recomputed_and_logged(tmp_path, caplog):
    """The probe's ``UPDATE g_embeddings SET vec=randomblob(length(vec))``, and two rows
    swapped: same size, often finite, only the checksum tells."""
    cache = GEmbeddingCache(tmp_path / "g.sqlite")
    calls: list[list[str]] = []
    texts = [f"text {i}" * (i + 1) for i in range(6)]
    first = cache.pooled(texts, ENC, None, _compute(calls))
    with sqlite3.connect(tmp_path / "g.sqlite") as db:
        db.execute("UPDATE g_embeddings SET vec=randomblob(length(vec)) WHERE key IN (?, ?, ?, ?)",
                   [cache_key(ENC, t) for t in texts[:4]])  # fmt: skip
        a, b = (cache_key(ENC, t) for t in texts[4:])
        va, vb = (db.execute("SELECT vec FROM g_embeddings WHERE key=?", (k,)).fetchone()[0]
                  for k in (a, b))  # fmt: skip
        db.execute("UPDATE g_embeddings SET vec=? WHERE key=?", (vb, a))
        db.execute("UPDATE g_embeddings SET vec=? WHERE key=?", (va, b))
    calls.clear()
    again = cache.pooled(texts, ENC, None, _compute(calls))
    assert calls == [[t] for t in texts] and cache.damaged == 6
    assert torch.equal(again, first) and "6 damaged row(s)" in caplog.text
    calls.clear()
    cache.pooled(texts, ENC, None, _compute(calls))  # replaced: read back, nothing computed
    assert calls == []


def test_rows_of_an_older_cache_without_checksums_are_recomputed(tmp_path, caplog):
    path = tmp_path / "g.sqlite"
    with sqlite3.connect(path) as db:  # the schema LiRA wrote before issue 51
        db.execute("CREATE TABLE g_embeddings (key TEXT PRIMARY KEY, encoder TEXT NOT NULL, "
                   "rows INTEGER NOT NULL, dim INTEGER NOT NULL, vec BLOB NOT NULL, "
                   "created REAL NOT NULL)")  # fmt: skip
        vec = np.full((1, 4), 7.0, dtype=np.float32).tobytes()
        db.execute(
            "INSERT INTO g_embeddings VALUES (?, ?, 1, 4, ?, 0)", (cache_key(ENC, "a"), ENC, vec)
        )
    calls: list[list[str]] = []
    with caplog.at_level("INFO", logger="arca.g_cache"):
        out = GEmbeddingCache(path).pooled(["a"], ENC, None, _compute(calls))
    assert calls == [["a"]] and float(out[0, 0, 1]) == pytest.approx(1.0)
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert any(lvl == "INFO" and "1 row(s) written by an older LiRA" in m for lvl, m in said)
    assert not any("damaged" in m for _, m in said)  # not reported as damage


def test_a_row_depends_on_its_text_only_not_on_the_cache_history(tmp_path):
    """Cold (all texts missing at once) and warm-after-another-batch caches hold the same bytes."""
    texts = ["eins", "zwei zwei", "drei drei drei", "vier"]
    cold = GEmbeddingCache(tmp_path / "cold.sqlite").pooled(texts, ENC, None, _compute([]))
    warm = GEmbeddingCache(tmp_path / "warm.sqlite")
    warm.pooled(texts[1:3], ENC, None, _compute([]))  # what a killed run had begun to fill
    assert torch.equal(warm.pooled(texts, ENC, None, _compute([])), cold)


def _arca_run(models_config, out) -> RunConfig:
    return reference_run(models_config, out, 16, 4, train_encoder=False)


def _weights(out) -> dict[str, bytes]:
    final = out / "arca" / "final"
    return {f.name: f.read_bytes() for f in sorted(final.glob("*.safetensors"))}


@pytest.mark.slow
def test_cold_warm_and_killed_then_resumed_caches_train_the_same_weights(models_config, tmp_path):
    """Issue 51, item 6: a killed ``lira arca`` had begun to fill the cache (other texts in its
    batches); the run started again, a cold run and a fully warm run save the same bytes."""
    from arca.engine import run_arca
    from arca.model import ArcaModel
    from lira.data.splits import load_splits
    from lira.models import load_backbone, load_encoder

    cold = _arca_run(models_config, tmp_path / "cold")
    run_arca(cold, resume=False)
    warm = _arca_run(models_config, tmp_path / "warm")
    cache_path(warm.output_dir).parent.mkdir(parents=True)
    shutil.copy(cache_path(cold.output_dir), cache_path(warm.output_dir))
    run_arca(warm, resume=False)

    killed = _arca_run(models_config, tmp_path / "killed")
    model = ArcaModel.from_config(models_config, killed.arca, backbone=load_backbone(models_config),
                                  encoder=load_encoder(models_config))  # fmt: skip
    assert model.attach_g_cache(killed.output_dir)
    sources = [r.text for r in load_splits(killed.data).train_sources]
    for i in range(0, len(sources), 5):  # the killed run's batches: other texts beside each one
        model.pooled_sources(sources[i : i + 5][::-1])
    model.g_cache.close()
    run_arca(killed, resume=True)  # "no checkpoint ... starting fresh", the cache half full

    reference = _weights(tmp_path / "cold")
    assert set(reference) >= {"actor.safetensors", "adaptor.safetensors"}
    assert _weights(tmp_path / "warm") == reference
    assert _weights(tmp_path / "killed") == reference


@pytest.mark.parametrize("damage", ["garbage", "cut short"])
def test_a_damaged_cache_file_is_found_from_its_schema_without_torch(tmp_path, damage):
    """Issue 60.7's leftover: ``lira`` reads the cache's schema before the engines load
    (:func:`arca.g_cache_file.check_cache_file`), the error the opener itself would give."""
    from arca.g_cache_file import GCacheError, check_cache_file

    path = tmp_path / "g.sqlite"
    check_cache_file(path)  # no cache yet: nothing to check
    cache = GEmbeddingCache(path)
    rows = {f"k{i}": np.full((1, 384), i, dtype=np.float32) for i in range(300)}
    cache.put(rows, ENC)
    cache._conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    cache.close()
    check_cache_file(path)  # intact
    size = path.stat().st_size
    assert size > 200_000  # many pages, so cutting it leaves a valid header
    if damage == "garbage":
        path.write_bytes(np.random.default_rng(0).bytes(size))
        want = "file is not a database"
    else:
        with open(path, "r+b") as f:
            f.truncate(size // 2)
        want = "database disk image is malformed"
    with pytest.raises(GCacheError) as e:
        check_cache_file(path)
    assert str(e.value) == (
        f"frozen-g cache {path}: {want}; delete the file (it is rebuilt) or set "
        "models.encoder_cache: false"
    )
    with pytest.raises(GCacheError, match=want):  # the opener agrees
        GEmbeddingCache(path)
