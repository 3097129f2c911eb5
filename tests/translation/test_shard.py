"""``lira translate --shard i/n`` and ``--merge``: sharded stores merge into the unsharded one.

Uses the canned OpenAI-compatible server (``fake_openai.py``: deterministic "translations"
and critic scores, no model) and the demo XQuAD-R data through the real CLI, in-process.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from lira.translation.config import TranslatorConfig
from lira.translation.schema import COLUMNS as _COLUMNS
from lira.translation.shards import (
    Shard,
    find_shard_stores,
    parse_shard,
    shard_from_env,
    shard_of,
    shard_store_path,
)
from lira.translation.store import Row, TranslationStore
from pipeline.cli import main

from .fake_openai import FakeServer

VOLATILE = {"created", "gen_seconds", "critic_seconds"}


@pytest.fixture
def server():
    s = FakeServer().start()
    yield s
    s.stop()


def _config(tmp_path: Path, url: str, out: str) -> Path:
    cfg = tmp_path / f"{out}.yaml"
    cfg.write_text(
        f"output_dir: {tmp_path / out}\n"
        "data: {train_languages: [de, es], eval_languages: [de, es, ru],\n"
        "       max_train_queries: 8, max_eval_queries: 4}\n"
        "translation:\n"
        "  num_candidates: 2\n"
        "  commit_every: 4\n"
        "  mt_translators:\n"
        f"    - {{name: fake, kind: openai, role: mt, model: mt-fake, base_url: '{url}',\n"
        "       max_retries: 0, timeout_s: 10, max_concurrency: 2}\n"
        "    - {name: xquad-en, kind: reference, role: mt, train_only: true}\n"
        f"  critic: {{kind: openai, model: critic-fake, base_url: '{url}', max_retries: 0,\n"
        "           timeout_s: 10, max_concurrency: 2}\n"
    )
    return cfg


def _rows(path: Path) -> list[tuple]:
    """Every row of a store, timings aside, in key order."""
    keep = [c for c in _COLUMNS if c not in VOLATILE]
    con = sqlite3.connect(path)
    try:
        return con.execute(f"SELECT {', '.join(keep)} FROM translations ORDER BY key").fetchall()
    finally:
        con.close()


def _lira(*argv: str) -> None:
    assert main(list(argv)) == 0


# ---------------------------------------------------------------------------- shard + merge
def test_three_shards_merged_equal_one_unsharded_run(tmp_path, server, monkeypatch, capsys):
    for var in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    single = _config(tmp_path, server.url, "single")
    _lira("translate", str(single))
    expected = _rows(tmp_path / "single" / "translations.sqlite")
    assert len(expected) > 20 and {r[3] for r in expected} == {"fake", "xquad-en"}

    sharded = _config(tmp_path, server.url, "sharded")
    out = tmp_path / "sharded"
    _lira("translate", str(sharded), "--shard", "0/3")
    monkeypatch.setenv("RANK", "1")  # shard 1 from a launcher's environment (torchrun, accelerate)
    monkeypatch.setenv("WORLD_SIZE", "3")
    _lira("translate", str(sharded))
    monkeypatch.delenv("RANK")
    monkeypatch.delenv("WORLD_SIZE")
    _lira("translate", str(sharded), "--shard", "2/3")
    assert not (out / "translations.sqlite").exists()  # shards never touch the main store
    main_store = out / "translations.sqlite"
    per_shard = [_rows(shard_store_path(main_store, Shard(i, 3))) for i in range(3)]
    for i, rows in enumerate(per_shard):
        assert rows and all(shard_of(r[1], r[2], 3) == i for r in rows)  # (source, lang)
        summary = json.loads((out / f"translate_summary.shard-{i}-of-3.json").read_text())
        assert summary["shard"] == f"{i}/3" and summary["pending"] == 0
    assert sorted(r for rows in per_shard for r in rows) == expected  # a partition of the rows

    capsys.readouterr()
    _lira("translate", str(sharded), "--merge")
    printed = capsys.readouterr().out
    assert "merged 3 shard store(s)" in printed and f"{len(expected)} added" in printed
    assert _rows(main_store) == expected  # row for row

    # merging again adds nothing: every row is a duplicate
    _lira("translate", str(sharded), "--merge")
    s = json.loads((out / "translate_merge_summary.json").read_text())
    assert (s["added"], s["duplicates"], s["conflicts"]) == (0, len(expected), 0)
    assert [v["rows"] for v in s["shards"].values()] == [len(r) for r in per_shard]
    assert _rows(main_store) == expected
    # and a plain run on the merged store finds everything there
    _lira("translate", str(sharded))
    s = json.loads((out / "translate_summary.json").read_text())
    assert s["generated"] == 0 and s["critic"]["scored"] == 0


def test_merge_of_listed_stores_keeps_one_row_per_key_in_any_order(tmp_path):
    t = TranslatorConfig(name="mt", kind="transformers", role="mt", model="m")
    a, b = tmp_path / "a.sqlite", tmp_path / "b.sqlite"
    with TranslationStore(a) as s:
        s.write_rows([Row("eins", "de", t, raw="one", text="one"),
                      Row("zwei", "de", t, status="failed", error="timeout", retry=True)])  # fmt: skip
    with TranslationStore(b) as s:
        s.write_rows([Row("zwei", "de", t, raw="two", text="two"),
                      Row("drei", "de", t, raw="three", text="three")])  # fmt: skip
    results = []
    for order in ((a, b), (b, a)):
        merged = tmp_path / f"m{len(results)}.sqlite"
        with TranslationStore(merged) as m:
            stats = [m.merge_from(TranslationStore(p)) for p in order]
            again = [m.merge_from(TranslationStore(p)) for p in order]
            assert m.count() == 3
            assert m.row("zwei", "de", t)["text"] == "two"  # ok beats a failed row
        assert sum(x["conflicts"] for x in stats) == 1 and sum(x["added"] for x in stats) == 3
        assert sum(x["added"] + x["replaced"] for x in again) == 0
        results.append(_rows(merged))
    assert results[0] == results[1]


# ---------------------------------------------------------------------------- assignment
def test_shard_assignment_is_a_stable_partition():
    texts = [(f"Satz Nummer {i}.", lang) for i in range(300) for lang in ("de", "es")]
    for n in (1, 2, 3, 7):
        owners = [[i for i in range(n) if Shard(i, n).contains(t, lg)] for t, lg in texts]
        assert all(len(o) == 1 for o in owners)  # every text in exactly one shard
        sizes = [sum(o == [i] for o in owners) for i in range(n)]
        assert min(sizes) > len(texts) / n * 0.7  # and the shards are balanced
    before = {t: shard_of(*t, 4) for t in texts}
    more = [("Ein neuer Satz.", "de"), *texts[::-1], ("Otra frase.", "es")]
    assert {t: shard_of(*t, 4) for t in more if t in before} == before  # order/additions
    assert shard_of("Hallo Welt.", "de", 1000) == 79  # pinned: never reshuffle existing stores


def test_shard_from_env():
    assert shard_from_env({}) is None
    assert shard_from_env({"RANK": "2", "WORLD_SIZE": "4"}) == Shard(2, 4)
    assert shard_from_env({"RANK": "0", "WORLD_SIZE": "1"}) is None
    assert shard_from_env({"LOCAL_RANK": "1", "LOCAL_WORLD_SIZE": "2"}) == Shard(1, 2)
    assert shard_from_env({"RANK": "1"}) is None  # no world size: not a launcher
    with pytest.raises(ValueError, match=r"\$RANK='x' is not an integer"):
        shard_from_env({"RANK": "x", "WORLD_SIZE": "2"})
    with pytest.raises(ValueError, match=r"index must be in 0\.\.1"):
        shard_from_env({"RANK": "2", "WORLD_SIZE": "2"})


def test_shard_paths_and_discovery(tmp_path):
    store = tmp_path / "translations.sqlite"
    assert parse_shard(" 1 / 4 ") == Shard(1, 4)
    assert shard_store_path(store, Shard(1, 4)).name == "translations.shard-1-of-4.sqlite"
    for name in ("translations.shard-1-of-4.sqlite", "translations.shard-0-of-4.sqlite",
                 "translations.shard-0-of-4.sqlite-wal", "other.shard-2-of-4.sqlite",
                 "translations.shard-5-of-4.sqlite"):  # fmt: skip
        (tmp_path / name).write_bytes(b"")
    assert [str(s) for s, _ in find_shard_stores(store)] == ["0/4", "1/4"]


# ---------------------------------------------------------------------------- CLI errors
@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--shard", "0/0"], "--shard '0/0': the number of shards must be >= 1"),
        (["--shard", "3/2"], "--shard '3/2': the shard index must be in 0..1"),
        (["--shard", "x"], "--shard 'x': expected I/N"),
        (["--merge"], "--merge: no shard stores next to"),
        (["--merge", "nope.sqlite"], "shard store 'nope.sqlite' does not exist"),
        (["--merge", "--shard", "0/2"], "--merge cannot be combined with --shard"),
    ],
)
def test_bad_shard_options_are_one_line_errors(tmp_path, argv, message, capsys):
    cfg = _config(tmp_path, "http://127.0.0.1:9/v1", "bad")
    code = main(["translate", str(cfg), *argv])
    err = capsys.readouterr().err
    assert code != 0
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    assert last.startswith("lira: ") and message in last, err
    assert not (tmp_path / "bad" / "translations.sqlite").exists()
