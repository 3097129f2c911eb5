"""``lira ablate`` on tiny real models: Table 5 rows trained, an unchanged Arca shared, the
main run's translation store reused, table5.md / .json written, finished rows not redone."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest
from safetensors.torch import load_file

import lira
from arca.config import ArcaConfig
from evaluators.config import EvalConfig
from lasr.config import LaSRConfig
from lira.config import DataConfig, save_config
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from pipeline.runconfig import RunConfig

pytestmark = pytest.mark.slow


def _small_xquad(folder: Path, articles: int = 8) -> Path:
    """The first ``articles`` articles of the demo XQuAD-R (en, de): a small sentence pool, so
    that every row's evaluation stays cheap."""
    demo = Path(lira.__file__).parent / "data" / "demo" / "xquad-r"
    folder.mkdir(parents=True, exist_ok=True)
    for lang in ("en", "de"):
        data = json.loads((demo / f"{lang}.json").read_text(encoding="utf-8"))
        data["data"] = data["data"][:articles]
        (folder / f"{lang}.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


def _config(tmp_path, models_config) -> RunConfig:
    return RunConfig(
        output_dir=str(tmp_path / "run"),
        models=models_config,
        data=DataConfig(
            path=str(_small_xquad(tmp_path / "xquad-r")),
            train_languages=["de"],
            eval_languages=["de"],
            max_train_queries=16,
            max_eval_queries=8,
        ),
        translation=TranslationConfig(
            pass_at_k=0,
            num_candidates=2,
            mt_translators=[
                TranslatorConfig(name="xquad-en", kind="reference", role="mt", train_only=True),
                TranslatorConfig(name="echo", kind="reference", role="mt"),
            ],
            critic=CriticConfig(kind="none"),
        ),
        arca=ArcaConfig(steps=3, batch_size=4, log_every=1, save_every=3, train_encoder=False),
        lasr=LaSRConfig(
            steps=3,
            batch_size=4,
            fusion_dim=32,
            fusion_layers=1,
            num_negatives=4,
            log_every=1,
            corr_min=4,
        ),
        eval=EvalConfig(bootstrap=20, batch_size=32),
    )


def _fill_store(cfg: RunConfig) -> int:
    """The main run's store, as `lira translate` with a critic leaves it: a poor candidate per
    source (the untranslated text), XQuAD-R's English originals for the training sources, and
    critic scores that prefer the originals. Returns its number of rows."""
    from lira.data.splits import load_splits
    from lira.translation.engine import run_translate, store_path
    from lira.translation.store import TranslationStore, key_for

    splits = load_splits(cfg.data)
    sources = splits.train_sources + splits.eval_sources
    gold, echo = cfg.translation.mt_translators
    with TranslationStore(store_path(cfg)) as store:
        store.add_reference(echo, [(r.text, r.lang, r.text, r.id) for r in sources])
    run_translate(cfg)
    with TranslationStore(store_path(cfg)) as store:
        updates = []
        for t, s in ((gold, (9, 8, 9)), (echo, (3, 2, 4))):
            for r in sources:
                scores = dict(zip(("semantic", "emotional", "pragmatic"), s, strict=True))
                updates.append((key_for(r.text, r.lang, t), {**scores, "critic_status": "ok"}))
        store.write_scores(updates)
    return _count(store_path(cfg))


def _count(path) -> int:
    with sqlite3.connect(path) as db:
        return db.execute("SELECT COUNT(*) FROM translations").fetchone()[0]


def test_ablate_trains_the_rows_and_writes_table5(tmp_path, models_config):
    from pipeline.cli import main

    cfg = _config(tmp_path, models_config)
    rows_in_store = _fill_store(cfg)
    path = tmp_path / "cfg.yaml"
    save_config(cfg, path)
    assert main(["ablate", str(path), "--rows", "no-llm-critic", "no-queue"]) == 0

    root = tmp_path / "run" / "ablations"
    table = json.loads((root / "table5.json").read_text())
    assert [r["row"] for r in table["rows"]] == ["full", "no-llm-critic", "no-queue"]
    assert set(table["columns"]) == {"En-En", "L->En"}
    for r in table["rows"]:
        for col in ("En-En", "L->En"):
            v = r[col]
            assert 0 <= v["ci_low"] <= v["value"] <= v["ci_high"] <= 100
            assert v["delta_ci_low"] <= v["delta"] <= v["delta_ci_high"]
    assert table["rows"][0]["L->En"]["delta"] == 0 and table["rows"][0]["L->En"]["languages"] == [
        "de"
    ]
    md = (root / "table5.md").read_text()
    for label in ("LiRA (full)", "– LLM critic", "– FIFO queue", "En-En nDCG@10", "L->En"):
        assert label in md

    # Arca retrained only where its config changed; the LaSR-only row used the full row's
    full, no_llm, no_queue = root / "full", root / "no-llm-critic", root / "no-queue"
    assert (full / "arca" / "final").is_dir() and (no_llm / "arca" / "final").is_dir()
    assert not (no_queue / "arca").exists()
    marker = json.loads((no_queue / "stages" / "lasr.json").read_text())
    assert marker["arca_dir"] == str(full / "arca" / "final")
    arca_cfg = json.loads((no_llm / "lira-model" / "arca" / "arca_config.json").read_text())
    assert arca_cfg["arca"]["use_llm_critic"] is False
    lasr_cfg = json.loads((no_queue / "lira-model" / "lira_config.json").read_text())
    assert lasr_cfg["lasr"]["use_queue"] is False and lasr_cfg["arca"]["use_llm_critic"] is True

    # trained, non-identical models: the Actor learnt from other rewards, the heads differ
    actor = "arca/final/actor.safetensors"
    a, b = load_file(str(full / actor)), load_file(str(no_llm / actor))
    assert any(not a[k].equal(b[k]) for k in a)
    heads = [
        load_file(str(d / "lira-model" / "head.safetensors")) for d in (full, no_llm, no_queue)
    ]
    for other in heads[1:]:
        assert any(not heads[0][k].equal(other[k]) for k in heads[0])

    # nothing re-translated; a second call finds every row done and only rewrites the table
    assert _count(tmp_path / "run" / "translations.sqlite") == rows_in_store
    stamp = (full / "lira-model" / "head.safetensors").stat().st_mtime_ns
    (root / "table5.md").unlink()
    assert main(["ablate", str(path), "--rows", "no-llm-critic"]) == 0
    assert (full / "lira-model" / "head.safetensors").stat().st_mtime_ns == stamp
    rows = json.loads((root / "table5.json").read_text())["rows"]
    assert [r["row"] for r in rows] == ["full", "no-llm-critic"]
    assert rows[1]["En-En"] == table["rows"][1]["En-En"]
