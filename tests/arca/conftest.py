"""Arca test data: XQuAD-R questions (de) with the gold English and a noisy variant."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest
import torch

import lira
from arca.data import ArcaItem
from lira.translation.types import Candidate

DEMO = Path(lira.__file__).parent / "data" / "demo" / "xquad-r"
SHARED = Path(
    os.environ.get(
        "LIRA_XQUAD_R", Path(__file__).resolve().parents[3] / "shared" / "data" / "xquad-r"
    )
)


def _questions(lang: str) -> dict[str, str]:
    folder = DEMO if (DEMO / f"{lang}.json").is_file() else SHARED
    path = folder / f"{lang}.json"
    if not path.is_file():
        pytest.skip(f"XQuAD-R {lang}.json not found in {DEMO} or {SHARED}")
    data = json.loads(path.read_text(encoding="utf-8"))
    return {
        q["id"]: q["question"]
        for art in data["data"]
        for par in art["paragraphs"]
        for q in par["qas"]
    }


def noisy(text: str, rng: random.Random) -> str:
    """A meta-text-polluted, word-dropped variant of a gold translation (App. C.3 bad case)."""
    words = text.split()
    kept = [w for w in words if rng.random() > 0.4] or words[:1]
    return (
        "Sure, here is the translated sentence: " + " ".join(kept) + " If you need more help, ask."
    )


@pytest.fixture(scope="session")
def xquad_pairs() -> list[tuple[str, str]]:
    """(German question, English question) pairs aligned by question id, first 96 ids."""
    en, de = _questions("en"), _questions("de")
    ids = sorted(set(en) & set(de))[:96]
    return [(de[i], en[i]) for i in ids]


def make_items(pairs: list[tuple[str, str]], seed: int = 0) -> list[ArcaItem]:
    """Each source gets the gold English (critic 9/9/9) and a noisy variant (3/4/3)."""
    rng = random.Random(seed)
    return [
        ArcaItem(
            src,
            "de",
            [Candidate("gold", en, (9, 9, 9)), Candidate("noisy", noisy(en, rng), (3, 4, 3))],
        )
        for src, en in pairs
    ]


@pytest.fixture(scope="session")
def arca_backbone(models_config):
    """The frozen backbone h (shared: never trained)."""
    from lira.models import load_backbone

    return load_backbone(models_config)


@pytest.fixture
def build_model(models_config, arca_backbone):
    """Factory: a fresh ArcaModel (seeded Adaptor/Actor, freshly loaded g) for a config."""
    from arca.model import ArcaModel
    from lira.models import load_encoder

    def build(cfg, seed: int = 0):
        torch.manual_seed(seed)
        encoder = load_encoder(models_config)
        return ArcaModel.from_config(models_config, cfg, backbone=arca_backbone, encoder=encoder)

    return build


@pytest.fixture
def fresh_accelerate_state():
    """accelerate keeps one process-wide state; reset it around a test that changes it."""
    from accelerate.state import AcceleratorState

    AcceleratorState._reset_state(reset_partial_state=True)
    yield
    AcceleratorState._reset_state(reset_partial_state=True)


def reference_run(
    models_config: object, out: Path, max_train: int, max_eval: int, **arca: object
) -> object:
    """A ``RunConfig`` whose store holds two reference translators of the de questions: the gold
    English (``xquad-en``) and a noisy variant of it (``noisy``); ``arca`` sets ArcaConfig."""
    from arca.config import ArcaConfig
    from lira.config import DataConfig
    from lira.data.splits import load_splits
    from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
    from lira.translation.engine import store_path
    from lira.translation.store import TranslationStore
    from pipeline.runconfig import RunConfig

    refs = [TranslatorConfig(name=n, kind="reference", role="mt") for n in ("xquad-en", "noisy")]
    data = DataConfig(train_languages=["de"], eval_languages=["de"],
                      max_train_queries=max_train, max_eval_queries=max_eval)  # fmt: skip
    translation = TranslationConfig(pass_at_k=0, num_candidates=2, mt_translators=refs,
                                    critic=CriticConfig(kind="none"))  # fmt: skip
    cfg = RunConfig(output_dir=str(out), models=models_config, data=data, translation=translation,
                    arca=ArcaConfig(steps=4, batch_size=4, log_every=2, save_every=2, **arca))  # fmt: skip
    splits = load_splits(cfg.data)
    rng = random.Random(0)
    with TranslationStore(store_path(cfg)) as store:
        for name in ("xquad-en", "noisy"):
            rows = []
            for r in splits.train_sources + splits.eval_sources:
                en = splits.dataset.question("en", r.id.split("@")[0]).text
                rows.append((r.text, r.lang, en if name == "xquad-en" else noisy(en, rng), r.id))
            store.add_reference(name, rows)
    return cfg
