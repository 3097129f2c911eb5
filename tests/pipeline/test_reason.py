"""``lira reason`` end to end: Arca trained with the LLM as h, then MGSM/X-CSQA in four modes."""

from __future__ import annotations

import json

import pytest

from arca.config import ArcaConfig
from lira.config import ConfigError, DataConfig, ModelsConfig
from lira.reasoning.config import ReasonConfig
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from pipeline.reason import load_items, question_text, selected_translations
from pipeline.runconfig import RunConfig

MODES = ["direct", "translate-en", "soft_only", "both"]


def _config(tmp_path, demo_cache, **reason) -> RunConfig:
    llm = "demo:qwen3-lm"
    return RunConfig(
        output_dir=str(tmp_path),
        models=ModelsConfig(
            backbone=llm,
            backbone_pooling="last",
            backbone_max_length=48,
            encoder="demo:mt5",
            encoder_max_length=48,
            cache_dir=str(demo_cache),
        ),
        data=DataConfig(
            train_languages=["de"], eval_languages=["de"], max_train_queries=16, max_eval_queries=4
        ),
        translation=TranslationConfig(
            pass_at_k=0,
            num_candidates=1,
            mt_translators=[TranslatorConfig(name="gold", kind="reference", role="mt")],
            critic=CriticConfig(kind="none"),
        ),
        arca=ArcaConfig(steps=2, batch_size=4, log_every=1, save_every=2),
        reason=ReasonConfig(
            llm=llm, languages=["de"], modes=MODES, max_items=3, max_new_tokens=6, **reason
        ),
    )


def _import_gold(cfg: RunConfig) -> dict[str, list[str]]:
    """Store the English originals as the 'gold' translator: XQuAD-R and the reasoning files."""
    from lira.data.splits import load_splits
    from lira.translation.engine import store_path
    from lira.translation.store import TranslationStore

    splits = load_splits(cfg.data)
    rows = [
        (r.text, r.lang, splits.dataset.question("en", r.id.split("@")[0]).text, r.id)
        for r in splits.train_sources + splits.eval_sources
    ]
    english = {}
    for task in ("mgsm", "xcsqa"):
        de = [question_text(it) for it in load_items(task, "demo", "de", 3)]
        english[task] = [question_text(it) for it in load_items(task, "demo", "en", 3)]
        rows += [(x, "de", y, None) for x, y in zip(de, english[task])]
    with TranslationStore(store_path(cfg)) as store:
        store.add_reference("gold", rows)
    return english


@pytest.fixture(scope="module")
def trained(tmp_path_factory, demo_cache):
    """A run folder with the gold store and a 2-step Arca trained with the tiny LM as h."""
    from arca.engine import run_arca

    tmp_path = tmp_path_factory.mktemp("reason")
    english = _import_gold(_config(tmp_path, demo_cache))
    run_arca(_config(tmp_path, demo_cache), resume=False)
    return tmp_path, english


@pytest.mark.slow
def test_reason_runs_every_mode_and_writes_the_table(trained, demo_cache, capsys):
    from arca.model import load_arca
    from pipeline.reason import run_reason

    tmp_path, english = trained
    cfg = _config(tmp_path, demo_cache)

    # translate-en / both read the Arca-selected candidate from the store
    arca = load_arca(tmp_path / "arca" / "final")
    de = [question_text(it) for it in load_items("mgsm", "demo", "de", 3)]
    assert selected_translations(cfg, de, "de", arca) == english["mgsm"]

    results = run_reason(cfg)
    rows = results["rows"]
    assert {(r["task"], r["mode"]) for r in rows} == {
        (t, m) for t in ("mgsm", "xcsqa") for m in MODES
    }
    assert all(r["n"] == 3 and 0.0 <= r["ci_low"] <= r["accuracy"] <= r["ci_high"] for r in rows)
    gens = results["generations"]
    assert len(gens) == 2 * len(MODES) * 3
    assert all(isinstance(g["generation"], str) and "extracted" in g for g in gens)
    saved = json.loads((tmp_path / "reason" / "results.json").read_text())
    assert saved["rows"] == json.loads(json.dumps(rows))
    table = (tmp_path / "reason" / "results.md").read_text()
    assert table.splitlines()[0] == "| task | lang | " + " | ".join(MODES) + " |"
    assert "| mgsm | de |" in capsys.readouterr().out


@pytest.mark.slow
def test_reason_refuses_an_arca_trained_for_another_llm(trained, demo_cache):
    from pipeline.reason import run_reason

    cfg = _config(trained[0], demo_cache)
    cfg.reason.llm = "demo:smollm2"  # d = 576, the Arca Adaptor maps into the tiny LM's d
    with pytest.raises(ConfigError, match=r"train Arca with models\.backbone=demo:smollm2"):
        run_reason(cfg)


def test_reason_without_arca_checkpoint_is_a_clear_error(tmp_path, demo_cache, monkeypatch):
    """The missing checkpoint is named before the LLM loads (and before any output is made)."""
    import pipeline.reason
    from pipeline.reason import run_reason

    def no_llm(*a: object, **kw: object) -> None:
        raise AssertionError("the LLM was loaded before the checkpoint was checked")

    monkeypatch.setattr(pipeline.reason, "load_causal_lm", no_llm)
    cfg = _config(tmp_path, demo_cache)
    with pytest.raises(FileNotFoundError, match=r"train one with `lira arca`"):
        run_reason(cfg)
    assert not (tmp_path / "reason").exists()


def test_missing_language_file_is_a_clear_error():
    with pytest.raises(FileNotFoundError, match="no mgsm file for language 'xx'"):
        load_items("mgsm", "demo", "xx", 0)
