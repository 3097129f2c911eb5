"""fill_store / run_translate on tiny real models: bad inputs, failures, critic, reuse."""

from __future__ import annotations

import json
import logging

import pytest

from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from lira.translation.engine import fill_store, run_translate, store_path
from lira.translation.scheduling import EMPTY_SOURCE
from lira.translation.store import TranslationStore
from pipeline.runconfig import RunConfig


def _cfg(tmp_path, mt_path, llm=(), critic=None, **kw) -> RunConfig:
    mt = TranslatorConfig(name="mt", kind="transformers", role="mt", model=mt_path,
                          batch_size=4, max_new_tokens=8)  # fmt: skip
    tc = TranslationConfig(llm_translators=list(llm), mt_translators=[mt], pass_at_k=len(llm),
                           num_candidates=len(llm) + 1,
                           critic=critic or CriticConfig(kind="none"), **kw)  # fmt: skip
    return RunConfig(output_dir=str(tmp_path), translation=tc)


@pytest.mark.slow
def test_bad_sources_are_recorded_not_raised(tmp_path, mt_path, caplog):
    cfg = _cfg(tmp_path, mt_path, source_max_chars=64)
    long = "Wort " * 20_000  # 100k characters
    with caplog.at_level(logging.WARNING):
        s = fill_store(cfg, {"de": ["", "   \n", long, "Guten Morgen."]})
    assert "truncated to" in caplog.text
    mt = cfg.translation.mt_translators[0]
    with TranslationStore(store_path(cfg)) as store:
        for empty in ("", "   \n"):
            row = store.row(empty, "de", mt)
            assert row["status"] == "failed" and row["error"] == EMPTY_SOURCE and row["retry"] == 0
        row = store.row(long, "de", mt)
        assert row["truncated"] == 1 and row["source"] == long
        assert store.missing(["", "   \n", long, "Guten Morgen."], "de", mt) == []
    assert s["translators"]["mt"]["failed"] >= 2 and s["sources"] == 4


def test_unknown_language_code_names_it(tmp_path):
    cfg = _cfg(tmp_path, "unused")
    with pytest.raises(ValueError, match=r"unknown language code 'xx'.*known codes: .*\bde\b"):
        fill_store(cfg, {"xx": ["bla"]})


def test_mt_lang_codes_missing_code_is_clear(mt_path):
    from lira.translation.translators import TransformersTranslator

    t = TransformersTranslator(TranslatorConfig(name="nllb", kind="transformers", role="mt",
                               model=mt_path, lang_codes={"de": "deu_Latn", "en": "eng_Latn"}))  # fmt: skip
    with pytest.raises(ValueError, match=r"no language code for 'ru'.*\['de', 'en'\]"):
        t.translate(["Привет"], "ru")


@pytest.mark.slow
def test_failing_translator_is_recorded_and_others_continue(tmp_path, mt_path, lm_path):
    dead = TranslatorConfig(name="dead", kind="openai", role="llm", model="m",
                            base_url="http://127.0.0.1:9/v1", max_retries=0, timeout_s=2)  # fmt: skip
    llm = TranslatorConfig(name="lm", kind="transformers", role="llm", model=lm_path,
                           max_new_tokens=8, batch_size=4)  # fmt: skip
    cfg = _cfg(
        tmp_path,
        mt_path,
        llm=[llm, dead],
        critic=CriticConfig(kind="transformers", model=lm_path, max_retries=0),
    )
    texts = ["Der Hund schläft.", "Ich habe Hunger.", "Der Hund schläft."]
    s = fill_store(cfg, {"de": texts})
    assert s["translators"]["dead"]["failed"] == 2 and s["translators"]["dead"]["generated"] == 0
    assert s["translators"]["lm"]["generated"] + s["translators"]["lm"]["failed"] == 2
    with TranslationStore(store_path(cfg)) as store:
        err = store.row("Ich habe Hunger.", "de", dead)["error"]
        assert "Connect" in err or "refused" in err.lower()
        # transient failures are retried on the next run
        assert store.missing(texts, "de", dead) == ["Der Hund schläft.", "Ich habe Hunger."]
        cands = store.candidates(texts, "de", cfg.translation.active_translators())
        assert cands[0] == cands[2]  # identical sources share their candidates
        for c in cands[0]:
            assert c.translator in ("lm", "mt")
            assert c.scores is None or all(1 <= v <= 10 for v in c.scores)
        n_scored = store.conn.execute(
            "SELECT COUNT(*) FROM translations WHERE critic_status = 'ok'"
        ).fetchone()[0]
        n_ok = store.count(status="ok")
        assert n_scored == n_ok  # the constrained critic scored every ok candidate
    # second run: nothing new except retrying the dead translator
    s2 = fill_store(cfg, {"de": texts})
    assert s2["translators"]["lm"]["generated"] == 0 and s2["translators"]["mt"]["generated"] == 0
    assert s2["critic"]["scored"] == 0


@pytest.mark.slow
def test_run_translate_import_and_summary(tmp_path, mt_path):
    from lira.config import DataConfig

    ref = TranslatorConfig(name="xquad-en", kind="reference", role="mt", train_only=True)
    cfg = _cfg(tmp_path, mt_path)
    cfg.translation.mt_translators.append(ref)
    cfg.translation.num_candidates = 2
    cfg.data = DataConfig(train_languages=["de"], eval_languages=["de"], max_train_queries=3,
                          max_eval_queries=2)  # fmt: skip
    # --import: the paper's offline-translation path
    f = tmp_path / "ref.jsonl"
    f.write_text(json.dumps({"source_id": "1", "source_text": "Hallo Welt.", "source_lang": "de",
                             "translation": "Hello world.", "translator": "xquad-en"}) + "\n")  # fmt: skip
    assert run_translate(cfg, import_file=str(f), translator="xquad-en")["imported"] == 1
    # the dataset run: MT for every source, XQuAD-R English originals for training sources only
    s = run_translate(cfg, import_file=None, translator=None)
    assert json.loads((tmp_path / "translate_summary.json").read_text()) == s
    assert s["sources"] == 5
    assert s["translators"]["mt"]["generated"] + s["translators"]["mt"]["failed"] == 5
    assert (
        s["translators"]["xquad-en"]["reused"] == 3 and s["translators"]["xquad-en"]["missing"] == 2
    )
    assert {"generated", "reused", "failed", "seconds", "texts_per_s"} <= set(
        s["translators"]["mt"]
    )
    from lira.data.splits import load_splits

    splits = load_splits(cfg.data)
    with TranslationStore(store_path(cfg)) as store:
        train = store.candidates([r.text for r in splits.train_sources], "de", [ref])
        held = store.candidates([r.text for r in splits.eval_sources], "de", [ref])
        assert store.candidates(["Hallo Welt."], "de", [ref])[0][0].text == "Hello world."
    assert all(len(c) == 1 and c[0].text for c in train) and all(c == [] for c in held)
    s2 = run_translate(cfg, import_file=None, translator=None)
    assert s2["generated"] == 0
