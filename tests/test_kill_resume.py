"""kill -9 + ``--resume`` of the real ``lira arca`` / ``lira lasr`` processes reaches the
uninterrupted run's weights bit for bit (issue 18). One kill per stage, after the first
checkpoint; ``benchmarks/kill_resume.py`` runs many trials at random kill points."""

from __future__ import annotations

import importlib.util
import random
import sys
from pathlib import Path

import pytest

from arca.config import ArcaConfig
from lasr.config import LaSRConfig
from lira.config import DataConfig, save_config
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from pipeline.runconfig import RunConfig

REPO = Path(__file__).resolve().parents[1]


def _bench():
    spec = importlib.util.spec_from_file_location(
        "kill_resume", REPO / "benchmarks" / "kill_resume.py"
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("kill_resume", module)  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def _base(tmp: Path, models_config) -> tuple[Path, RunConfig]:
    """A config (reference translators only, no critic) and an output folder with its store."""
    from lira.data.splits import load_splits
    from lira.translation.engine import run_translate, store_path
    from lira.translation.store import TranslationStore

    base = tmp / "base"
    cfg = RunConfig(
        output_dir=str(base),
        models=models_config,
        data=DataConfig(
            train_languages=["de"], eval_languages=["de"], max_train_queries=12, max_eval_queries=4
        ),
        translation=TranslationConfig(
            pass_at_k=0,
            num_candidates=2,
            mt_translators=[
                TranslatorConfig(name="xquad-en", kind="reference", role="mt", train_only=True),
                TranslatorConfig(name="machine", kind="reference", role="mt"),
            ],
            critic=CriticConfig(kind="none"),
        ),
        arca=ArcaConfig(steps=10, batch_size=4, log_every=2, save_every=2),
        lasr=LaSRConfig(
            steps=10,
            batch_size=4,
            fusion_dim=32,
            fusion_layers=1,
            num_negatives=4,
            save_every=2,
            log_every=2,
        ),
    )
    splits = load_splits(cfg.data)
    rng = random.Random(0)
    rows = []
    for r in splits.train_sources + splits.eval_sources:
        words = splits.dataset.question("en", r.id.split("@")[0]).text.split()
        rows.append((r.text, r.lang, " ".join(w for w in words if rng.random() > 0.3), r.id))
    with TranslationStore(store_path(cfg)) as store:
        store.add_reference("machine", rows)
    run_translate(cfg)  # fills the xquad-en references (nothing to generate)
    save_config(cfg, tmp / "run.yaml")
    return base, cfg


@pytest.mark.slow
def test_kill_9_and_resume_gives_the_uninterrupted_weights(tmp_path, models_config):
    kr = _bench()
    base, _ = _base(tmp_path, models_config)
    # jobs=3: the Arca trial and both LaSR runs go at once (each a separate process and folder)
    res = kr.run_benchmark(tmp_path / "run.yaml", [], ["arca", "lasr"], trials=1, kills=1,
                           seed=0, workdir=tmp_path / "work", after_checkpoint=True,
                           base=(base, None), timeout=300, jobs=3)  # fmt: skip
    print("\n" + kr.summary_table(res))
    for stage in ("arca", "lasr"):
        r = res[stage]
        assert r["failures"] == 0, (stage, r["problems"])
        assert r["killed"] == 1, (stage, r["kill_points"])  # killed after a checkpoint, resumed
        assert r["kill_points"][0]["latest"] is not None
        assert r["identical"] == 1, (stage, r["max_diff"])
