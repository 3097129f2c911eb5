"""Translation store: key stability, dedup, import, crash safety (kill -9) and resume."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest

from lira.translation.config import TranslatorConfig
from lira.translation.store import Row, TranslationStore, key_for, store_key

MT = TranslatorConfig(name="mt", kind="transformers", role="mt", model="some/model")


def test_key_is_stable_and_sensitive():
    k = store_key("Hallo", "de", "mt", "paper-v1", '{"t":0}')
    # a fixed digest: the key must never change across versions of the code
    assert k == store_key("Hallo", "de", "mt", "paper-v1", '{"t":0}')
    assert len(k) == 64
    for other in [
        ("Hallo!", "de", "mt", "paper-v1", '{"t":0}'),
        ("Hallo", "nl", "mt", "paper-v1", '{"t":0}'),
        ("Hallo", "de", "mt2", "paper-v1", '{"t":0}'),
        ("Hallo", "de", "mt", "paper-v2", '{"t":0}'),
        ("Hallo", "de", "mt", "paper-v1", '{"t":1}'),
    ]:
        assert store_key(*other) != k
    # decoding params are part of the key; batch size is not
    hot = TranslatorConfig(name="mt", kind="transformers", role="mt", model="some/model",
                           temperature=0.7)  # fmt: skip
    big = TranslatorConfig(name="mt", kind="transformers", role="mt", model="some/model",
                           batch_size=64)  # fmt: skip
    assert key_for("Hallo", "de", hot) != key_for("Hallo", "de", MT)
    assert key_for("Hallo", "de", big) == key_for("Hallo", "de", MT)


def test_hand_computed_key():
    import hashlib

    blob = json.dumps(["a", "de", "t", "v", "{}"], ensure_ascii=False).encode()
    assert store_key("a", "de", "t", "v", "{}") == hashlib.sha256(blob).hexdigest()


def test_missing_dedups_and_candidates_roundtrip(tmp_path):
    store = TranslationStore(tmp_path / "s.sqlite", commit_every=2)
    texts = ["eins", "zwei", "eins", "drei", "zwei"]
    assert store.missing(texts, "de", MT) == ["eins", "zwei", "drei"]
    store.write_rows([Row("eins", "de", MT, raw="'one'", text="one", removed="''"),
                      Row("zwei", "de", MT, status="failed", error="boom", retry=True),
                      Row("drei", "de", MT, status="failed", error="empty", retry=False)])  # fmt: skip
    assert store.count() == 3
    # retryable failure is missing again, permanent failure is not
    assert store.missing(texts, "de", MT) == ["zwei"]
    store.write_scores([(key_for("eins", "de", MT), {"semantic": 7, "emotional": 5,
                         "pragmatic": 6, "critic_status": "ok", "critic_id": "c"})])  # fmt: skip
    cands = store.candidates(texts, "de", [MT])
    assert [len(c) for c in cands] == [1, 0, 1, 0, 0]
    assert cands[0][0].text == "one" and cands[0][0].scores == (7, 5, 6)
    assert cands[2] == cands[0]
    # rewriting a key replaces the row: never a duplicate
    store.write_rows([Row("zwei", "de", MT, raw="two", text="two")])
    assert store.count() == 3 and store.missing(texts, "de", MT) == []
    store.close()


def test_import_jsonl(tmp_path):
    f = tmp_path / "ref.jsonl"
    lines = [
        {"source_id": "q1", "source_text": "Wo ist der Hund?", "source_lang": "de",
         "translation": "Where is the dog?", "translator": "xquad-en"},
        {"id": "q2", "source": "¿Dónde está?", "lang": "es", "translation": "Where is it?"},
    ]  # fmt: skip
    f.write_text("\n".join(json.dumps(x, ensure_ascii=False) for x in lines) + "\n\n")
    store = TranslationStore(tmp_path / "s.sqlite")
    assert store.import_jsonl(f, "xquad-en") == 2
    ref = TranslatorConfig(name="xquad-en", kind="reference", role="mt", train_only=True)
    c = store.candidates(["Wo ist der Hund?"], "de", [ref])
    assert c[0][0].text == "Where is the dog?" and c[0][0].scores is None
    assert store.row("¿Dónde está?", "es", ref)["source_id"] == "q2"
    assert store.import_jsonl(f, "xquad-en") == 2 and store.count() == 2  # idempotent
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"source_text": "x", "source_lang": "de"}\n')
    with pytest.raises(ValueError, match=r"bad.jsonl:1: missing field 'translation'"):
        store.import_jsonl(bad, "xquad-en")
    # a \ud800 escape (a lone surrogate) used to end in a UnicodeEncodeError in store_key
    bad.write_text('{"source_text": "ok", "source_lang": "de", "translation": "y"}\n'
                   '{"source_text": "a\\ud800", "source_lang": "de", "translation": "y"}\n')  # fmt: skip
    with pytest.raises(
        ValueError, match=r"bad.jsonl:2: field 'source_text' holds a lone surrogate at character 1"
    ):
        store.import_jsonl(bad, "xquad-en")
    assert store.count() == 2  # nothing of the file was imported
    store.close()


@pytest.mark.parametrize(
    "line, message",
    [
        ({"source_text": 5}, r"t.jsonl:2: field 'source_text' is 5, not a string"),
        ({"translation": ["Hi"]}, r't.jsonl:2: field .translation. is \["Hi"\], not a string'),
        ({"translator": {"a": 1}}, r't.jsonl:2: field .translator. is \{"a": 1\}, not a string'),
        ({"source_id": [1]}, r"t.jsonl:2: field 'source_id' is \[1\], not a string or an int"),
        ({"source_lang": "zz"}, r"t.jsonl:2: field 'source_lang': 'zz' is not an ISO 639-1"),
        ({"translation": "Other."}, r"t.jsonl:2: another translation of the de source of line 1"),
    ],
    ids=["int-source", "list-translation", "object-translator", "list-id", "zz", "two-lines"],
)
def test_an_import_line_that_would_be_coerced_or_lost_is_one_line(tmp_path, line, message):
    """Issue 60, item 5: ``--import`` stored 5 as "5" and ["Hi"] as "['Hi']", took source_lang
    "zz", and reported two lines for one source as 2 imported while the second replaced the
    first; each is refused naming the file, line and field, and nothing is imported."""
    from lira.errors import UserInputError

    first = {"source_id": 1, "source_text": "Hallo.", "source_lang": "de",
             "translation": "Hello.", "translator": "ref"}  # fmt: skip
    f = tmp_path / "t.jsonl"
    f.write_text(json.dumps(first) + "\n" + json.dumps({**first, **line}) + "\n")
    store = TranslationStore(tmp_path / "s.sqlite")
    with pytest.raises(UserInputError, match=message) as e:
        store.import_jsonl(f)
    assert "\n" not in str(e.value) and store.count() == 0
    f.write_text(json.dumps(first) + "\n" + json.dumps(first) + "\n")  # the same line twice
    assert store.import_jsonl(f) == 1 and store.count() == 1
    store.close()


WRITER = textwrap.dedent(
    """
    import sys
    from lira.translation.config import TranslatorConfig
    from lira.translation.store import Row, TranslationStore
    t = TranslatorConfig(name="mt", kind="transformers", role="mt", model="m")
    store = TranslationStore(sys.argv[1], commit_every=5)
    i = 0
    while True:
        store.write_rows([Row(f"text {i + j}", "de", t, raw="x" * 2000, text="x" * 2000)
                          for j in range(5)])
        i += 5
    """
)


def test_kill_9_mid_write_leaves_whole_transactions(tmp_path):
    path = tmp_path / "s.sqlite"
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(path)])
    deadline = time.time() + 60
    n = 0
    while time.time() < deadline and n < 200:
        time.sleep(0.2)
        if path.exists():
            try:
                n = (
                    sqlite3.connect(path, timeout=5)
                    .execute("SELECT COUNT(*) FROM translations")
                    .fetchone()[0]
                )
            except sqlite3.OperationalError:
                pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    store = TranslationStore(path)
    n = store.count()
    assert n >= 200 and n % 5 == 0  # only whole transactions survive
    assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    bad = store.conn.execute(
        "SELECT COUNT(*) FROM translations WHERE status = 'ok' AND (text IS NULL OR length(text) != 2000)"
    ).fetchone()[0]
    assert bad == 0
    store.close()


RUNNER = textwrap.dedent(
    """
    import json, sys
    from pipeline.runconfig import RunConfig
    from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
    from lira.translation.engine import fill_store
    out, model, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
    mt = TranslatorConfig(name="mt", kind="transformers", role="mt", model=model,
                          batch_size=2, max_new_tokens=8)
    cfg = RunConfig(output_dir=out, translation=TranslationConfig(
        mt_translators=[mt], pass_at_k=0, num_candidates=1, commit_every=2,
        critic=CriticConfig(kind="none")))
    texts = [f"Satz Nummer {i % (n - 3)} ist hier." for i in range(n)]  # 3 duplicates
    print(json.dumps(fill_store(cfg, {"de": texts})))
    """
)


@pytest.mark.slow
def test_resume_after_kill_9_generates_only_missing(tmp_path, mt_path):
    n = 120
    unique = n - 3
    path = tmp_path / "translations.sqlite"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen([sys.executable, "-c", RUNNER, str(tmp_path), mt_path, str(n)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)  # fmt: skip
    before = 0
    deadline = time.time() + 120
    while time.time() < deadline and before < 6:
        time.sleep(0.05)
        if path.exists():
            try:
                con = sqlite3.connect(path, timeout=5)
                before = con.execute("SELECT COUNT(*) FROM translations").fetchone()[0]
                con.close()
            except sqlite3.OperationalError:
                pass
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    before = TranslationStore(path).count()
    assert 0 < before < unique, "the run must be killed mid-way"
    assert before % 2 == 0  # commit_every=2: whole transactions only
    done = subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path), mt_path, str(n)],
                          env=env, capture_output=True, text=True, check=True)  # fmt: skip
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["translators"]["mt"]["reused"] == before
    assert summary["generated"] + summary["failed"] == unique - before
    store = TranslationStore(path)
    assert store.count() == unique  # no duplicates, nothing lost
    dup = store.conn.execute(
        "SELECT COUNT(*) FROM (SELECT source FROM translations GROUP BY source HAVING COUNT(*) > 1)"
    ).fetchone()[0]
    assert dup == 0
    third = subprocess.run([sys.executable, "-c", RUNNER, str(tmp_path), mt_path, str(n)],
                           env=env, capture_output=True, text=True, check=True)  # fmt: skip
    assert json.loads(third.stdout.strip().splitlines()[-1])["generated"] == 0
