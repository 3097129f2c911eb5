"""Store reliability: leases between processes, critic failures retried, bad store files, keys.

Uses a canned OpenAI-compatible server (``fake_openai.py``): fast, no model, and it logs every
request, so duplicated work between processes is counted, not guessed.
"""

from __future__ import annotations

import hashlib
import logging
import multiprocessing
import socket
import sqlite3
import subprocess
import sys
from collections import Counter

import pytest

from lira.translation import engine as runner
from lira.translation.config import CriticConfig, TranslatorConfig
from lira.translation.critic import build_critic
from lira.translation.engine import fill_store, store_path
from lira.translation.schema import SCHEMA_VERSION, StoreError
from lira.translation.store import Row, TranslationStore, key_for
from lira.translation.translators import ChatClient, api_key, is_loopback

from .fake_openai import FakeServer, fill_worker, run_config

MT = TranslatorConfig(name="mt", kind="transformers", role="mt", model="some/model")


@pytest.fixture
def server():
    s = FakeServer().start()
    yield s
    s.stop()


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


# ---------------------------------------------------------------------------------- leases
def test_leases_exclude_other_processes_until_released_or_stale(tmp_path):
    path = tmp_path / "s.sqlite"
    a, b = TranslationStore(path), TranslationStore(path, lease_ttl_s=0.2)
    b.owner = "otherhost:1:x"  # another machine: only expiry frees its leases
    assert a.claim(["k1", "k2"]) == ["k1", "k2"]
    assert b.claim(["k1", "k2", "k3"]) == ["k3"]  # k1, k2 are a's
    assert a.claim(["k1"]) == ["k1"]  # renewing one's own lease is fine
    assert sorted(b.leased_elsewhere(["k1", "k2", "k3"])) == ["k1", "k2"]
    assert a.claim(["k1"], namespace="critic") == ["k1"]  # another kind of work on the row
    a.release(["k1"])
    assert b.claim(["k1", "k2"]) == ["k1"]
    # b renews its leases while it runs (heartbeat), so they outlive the 0.2 s ttl ...
    import time

    time.sleep(0.5)
    assert a.claim(["k3"]) == []
    # ... and once b is gone (closed, or its host killed), they expire after the ttl
    b.close()
    time.sleep(0.25)
    assert a.claim(["k3"]) == ["k3"]
    # a lease of a process of this host that no longer runs (kill -9) is free at once
    a.conn.execute(
        "INSERT OR REPLACE INTO leases VALUES ('gen:k9', ?, 1e18)",
        (f"{socket.gethostname()}:{_dead_pid()}:zz",),
    )
    assert a.claim(["k9"]) == ["k9"]
    a.close()


def test_two_processes_split_the_work_without_duplicates(tmp_path):
    server = FakeServer(delay_s=0.03).start()
    try:
        texts = [f"Das ist der Satz Nummer {i}." for i in range(48)]
        texts += texts[:5]  # duplicates within one run are translated once
        ctx = multiprocessing.get_context("spawn")
        barrier, results = ctx.Barrier(2), ctx.Queue()
        procs = [
            ctx.Process(
                target=fill_worker, args=(str(tmp_path), server.url, texts, barrier, results)
            )
            for _ in range(2)
        ]
        for p in procs:
            p.start()
        for p in procs:
            p.join(timeout=180)
            assert p.exitcode == 0, "a process failed (see its traceback above)"
        summaries = [results.get(timeout=10) for _ in procs]
    finally:
        server.stop()
    n = 48
    gen = Counter(server.prompts("mt-fake"))
    crit = Counter(server.prompts("critic-fake"))
    assert len(gen) == n and max(gen.values()) == 1, "a text was translated twice"
    assert len(crit) == n and max(crit.values()) == 1, "a pair was scored twice"
    generated = [s["translators"]["fake"]["generated"] for s in summaries]
    assert sum(generated) == n and all(g > 0 for g in generated), generated  # both worked
    for s in summaries:
        t = s["translators"]["fake"]
        assert t["generated"] + t["failed"] + t["reused"] + t["by_others"] == n
        assert s["pending"] == 0
    assert sum(s["critic"]["scored"] for s in summaries) == n
    con = sqlite3.connect(tmp_path / "translations.sqlite")
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert con.execute("SELECT COUNT(*) FROM translations").fetchone()[0] == n
    assert (
        con.execute("SELECT COUNT(*) FROM translations WHERE critic_status = 'ok'").fetchone()[0]
        == n
    )
    assert con.execute("SELECT COUNT(*) FROM leases").fetchone()[0] == 0  # all released
    con.close()


def test_texts_leased_by_a_live_process_are_waited_for_not_redone(tmp_path, server, monkeypatch):
    monkeypatch.setattr(runner, "LEASE_POLL_S", 0.05)
    cfg = run_config(str(tmp_path), server.url)
    texts = [f"Satz {i}." for i in range(6)]
    t = cfg.translation.mt_translators[0]
    other = TranslationStore(store_path(cfg))
    other.owner = "elsewhere:1:x"
    held = [key_for(x, "de", t) for x in texts[:2]]
    assert other.claim(held) == held
    other.close()

    import threading

    def finish() -> None:  # the other process writes its two rows a little later
        import time

        time.sleep(0.3)
        with TranslationStore(store_path(cfg)) as s2:
            s2.owner = "elsewhere:1:x"
            s2.write_rows([Row(x, "de", t, raw="done elsewhere", text="done elsewhere")
                           for x in texts[:2]])  # fmt: skip
            s2.release(held)

    th = threading.Thread(target=finish)
    th.start()
    s = fill_store(cfg, {"de": texts})
    th.join()
    assert s["translators"]["fake"]["generated"] == 4
    assert s["translators"]["fake"]["by_others"] == 2
    sent = server.prompts("mt-fake")
    assert len(sent) == 4 and not any("Satz 0." in p or "Satz 1." in p for p in sent)


# ---------------------------------------------------------------------------------- critic
def test_a_failed_critic_is_rescored_on_the_next_run(tmp_path, server):
    cfg = run_config(str(tmp_path), server.url)
    cfg.translation.critic.max_concurrency = 4
    texts = ["Der Hund schläft.", "Ich habe Hunger.", "Wo ist der Bahnhof?", "Danke."]
    server.fail_critic = True  # HTTP 500: a transient failure
    first = fill_store(cfg, {"de": texts})
    assert first["critic"]["failed"] == 4 and first["critic"]["scored"] == 0
    assert first["pending"] == 4
    t = cfg.translation.mt_translators[0]
    with TranslationStore(store_path(cfg)) as store:
        row = store.row(texts[0], "de", t)
        assert row["critic_status"] == "failed" and row["semantic"] is None
        assert "500" in row["critic_raw"]
        assert all(c[0].scores is None for c in store.candidates(texts, "de", [t]))
    server.fail_critic = False  # the server is healthy again
    second = fill_store(cfg, {"de": texts})
    assert second["generated"] == 0 and second["reused"] == 4  # translations are kept
    assert second["critic"] == {**second["critic"], "scored": 4, "failed": 0, "retried": 4}
    assert second["pending"] == 0
    with TranslationStore(store_path(cfg)) as store:
        assert [c[0].scores for c in store.candidates(texts, "de", [t])] == [(7, 6, 5)] * 4
    third = fill_store(cfg, {"de": texts})
    assert third["critic"]["scored"] == 0 and third["critic"]["retried"] == 0  # nothing left


@pytest.mark.parametrize("tampered", [999, 0, -5])
def test_scores_outside_1_to_10_are_corrupt_rows_rescored_and_counted(
    tmp_path, server, caplog, tampered
):
    """The issue's probe: semantic=999 written into the store was read back and trained on."""
    cfg = run_config(str(tmp_path), server.url)
    texts = ["Der Hund schläft.", "Ich habe Hunger.", "Danke."]
    fill_store(cfg, {"de": texts})
    t = cfg.translation.mt_translators[0]
    con = sqlite3.connect(store_path(cfg))
    con.execute("UPDATE translations SET semantic = ? WHERE source = ?", (tampered, texts[0]))
    con.commit()
    con.close()
    with TranslationStore(store_path(cfg)) as store, caplog.at_level(logging.WARNING):
        cands = store.candidates(texts, "de", [t])
        assert [c[0].scores for c in cands] == [None, (7, 6, 5), (7, 6, 5)]  # never trained on
        assert store.corrupt_scores == 1
    assert "1 candidate(s) have critic scores outside 1-10" in caplog.text
    server.requests.clear()
    again = fill_store(cfg, {"de": texts})
    assert again["critic"]["corrupt"] == 1 and again["critic"]["scored"] == 1
    assert again["critic"]["retried"] == 0 and again["generated"] == 0
    assert len(server.prompts("critic-fake")) == 1  # only the corrupt row
    with TranslationStore(store_path(cfg)) as store:
        assert [c[0].scores for c in store.candidates(texts, "de", [t])] == [(7, 6, 5)] * 3
        assert store.corrupt_scores == 0


# ---------------------------------------------------------------------------------- bad files
def _sha(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _random_bytes(p):
    p.write_bytes(bytes(range(256)) * 40)


def _foreign_sqlite(p):
    con = sqlite3.connect(p)
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.execute("INSERT INTO users (name) VALUES ('ada')")
    con.commit()
    con.close()


def _newer_schema(p):
    TranslationStore(p).close()
    con = sqlite3.connect(p)
    con.execute("UPDATE meta SET v = ? WHERE k = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    con.commit()
    con.close()


def _text_file(p):
    p.write_text("source,translation\nHallo,Hello\n", encoding="utf-8")


@pytest.mark.parametrize(
    ("make", "pattern"),
    [
        (_random_bytes, r"is not an SQLite database.*move it away"),
        (_text_file, r"is not an SQLite database"),
        (_foreign_sqlite, r"database of another program.*\['users'\].*not modified"),
        (_newer_schema, rf"schema version '{SCHEMA_VERSION + 1}'.*new file"),
    ],
    ids=["random-bytes", "csv-file", "foreign-sqlite", "newer-schema"],
)
def test_bad_store_file_is_one_clear_error_and_left_untouched(tmp_path, make, pattern):
    p = tmp_path / "translations.sqlite"
    make(p)
    before = _sha(p)
    with pytest.raises(StoreError, match=pattern) as e:
        TranslationStore(p)
    assert str(p) in str(e.value)
    assert _sha(p) == before


def test_store_path_that_is_a_folder(tmp_path):
    with pytest.raises(StoreError, match="is a folder"):
        TranslationStore(tmp_path)


def test_truncated_store_names_the_file(tmp_path):
    p = tmp_path / "translations.sqlite"
    with TranslationStore(p) as s:
        s.write_rows([Row(f"text {i} " + "x" * 500, "de", MT, raw="y" * 500, text="y" * 500)
                      for i in range(400)])  # fmt: skip
    data = p.read_bytes()
    assert len(data) > 100_000
    p.write_bytes(data[: len(data) // 3])
    with pytest.raises(StoreError, match=rf"{p.name}.*malformed.*move it away"):
        with TranslationStore(p) as s:
            s.count()
            s.missing([f"text {i} " + "x" * 500 for i in range(400)], "de", MT)


def test_cli_translate_on_a_corrupt_store_prints_one_line(tmp_path):
    store = tmp_path / "bad.sqlite"
    _random_bytes(store)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output_dir: {tmp_path / 'out'}\ntranslation:\n  store: {store}\n"
                   "  critic: {kind: none}\n  num_candidates: 1\n"
                   "data:\n  max_train_queries: 2\n  max_eval_queries: 2\n")  # fmt: skip
    res = subprocess.run([sys.executable, "-m", "lira", "translate", str(cfg)],
                         capture_output=True, text=True, timeout=300)  # fmt: skip
    assert res.returncode == 1, res.stderr
    assert "Traceback" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("lira: translation store") and str(store) in last


# ---------------------------------------------------------------------------------- API keys
def test_api_key_only_from_the_named_variable(server, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-implicit-secret")
    monkeypatch.setenv("MY_SERVER_KEY", "explicit-key")
    msgs = [{"role": "user", "content": "hi"}]
    ChatClient(server.url, "m").complete(msgs)
    ChatClient(server.url, "m", api_key_env="MY_SERVER_KEY").complete(msgs)
    # the translator and critic defaults name no variable: no key is sent
    cfg = run_config("unused", server.url)
    assert cfg.translation.mt_translators[0].api_key_env == ""
    runner.build_translator(cfg.translation.mt_translators[0]).translate(["Hallo."], "de")
    build_critic(cfg.translation.critic).score(["Hallo."], ["Hello."], "de")
    auth = [a for _, _, a in server.requests]
    assert len(auth) == 4
    assert not any(a and "sk-implicit-secret" in a for a in auth)
    assert auth[1] == "Bearer explicit-key"
    assert all(a in (None, "Bearer EMPTY") for i, a in enumerate(auth) if i != 1)


@pytest.mark.parametrize(
    ("url", "warns"),
    [
        ("http://10.0.0.7:8000/v1", True),
        ("http://gpu-box.example.org/v1", True),
        ("https://api.example.org/v1", False),
        ("http://127.0.0.1:8000/v1", False),
        ("http://localhost:8000/v1", False),
        ("http://[::1]:8000/v1", False),
    ],
)
def test_key_over_plain_http_to_another_host_warns(url, warns, monkeypatch, caplog):
    monkeypatch.setenv("MY_SERVER_KEY", "explicit-key")
    with caplog.at_level(logging.WARNING, logger="lira.translation.translators"):
        assert api_key("MY_SERVER_KEY", url) == "explicit-key"
    assert ("plain http" in caplog.text) is warns
    assert "explicit-key" not in caplog.text  # the key itself is never logged
    assert is_loopback(url) is (url.startswith("http://127.") or "localhost" in url or "::1" in url)


def test_named_but_unset_variable_sends_nothing_and_warns(monkeypatch, caplog):
    monkeypatch.delenv("NOT_SET_KEY", raising=False)
    with caplog.at_level(logging.WARNING, logger="lira.translation.translators"):
        assert api_key("NOT_SET_KEY", "http://127.0.0.1:1/v1") is None
    assert "NOT_SET_KEY" in caplog.text


def test_critic_config_default_sends_no_key():
    assert (
        CriticConfig().api_key_env == "" and TranslatorConfig(name="x", model="m").api_key_env == ""
    )


def test_missing_model_folders_are_named(tmp_path, server):
    from lira.errors import MissingFileError
    from lira.translation.config import TranslationConfig
    from pipeline.runconfig import RunConfig

    cfg = run_config(str(tmp_path / "a"), server.url)
    cfg.translation.critic = CriticConfig(kind="vllm", model=str(tmp_path / "no-critic"))
    with pytest.raises(MissingFileError, match=r"model folder .*no-critic does not exist"):
        fill_store(cfg, {"de": ["Hallo."]})
    # a translator whose folder is missing fails alone, recorded with the reason
    t = TranslatorConfig(name="local", kind="transformers", role="mt", model="./no-such-mt")
    cfg = RunConfig(output_dir=str(tmp_path / "b"), translation=TranslationConfig(
        mt_translators=[t], num_candidates=1, critic=CriticConfig(kind="none")))  # fmt: skip
    s = fill_store(cfg, {"de": ["Hallo."]})
    assert s["translators"]["local"]["failed"] == 1 and s["pending"] == 1
    with TranslationStore(store_path(cfg)) as store:
        assert "no-such-mt does not exist" in store.row("Hallo.", "de", t)["error"]
