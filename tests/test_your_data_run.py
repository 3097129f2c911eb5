"""``lira run`` on a user's BEIR folder with a cross-lingual corpus (issue 40 item 5): it runs
with a validation split and sends the translator only the non-English texts."""

from __future__ import annotations

import json

import pytest

from arca.config import ArcaConfig
from lasr.config import LaSRConfig
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from lira.translation.translators import Translation
from pipeline.runconfig import RunConfig
from tests.data.beir_folder import beir_config, write_beir_folder


class CountingTranslator:
    """A translator that records every (text, language) it is sent."""

    def __init__(self, sent: list[tuple[str, str]]) -> None:
        self.sent = sent

    def translate(self, texts, lang):
        self.sent += [(t, lang) for t in texts]
        return [Translation(f"(from {lang}) {t}") for t in texts]


@pytest.mark.slow
def test_lira_run_on_a_cross_lingual_beir_folder(tmp_path, models_config, monkeypatch):
    import lira.translation.engine as runner
    from pipeline.run import run_pipeline

    folder = tmp_path / "my-beir"
    given = write_beir_folder(folder, n=32, qrels=("train", "test"))
    sent: list[tuple[str, str]] = []
    monkeypatch.setattr(runner, "build_translator", lambda cfg, cache="": CountingTranslator(sent))
    cfg = RunConfig(
        output_dir=str(tmp_path / "out"),
        stages=["translate", "arca", "lasr"],
        models=models_config,
        data=beir_config(folder, dev_fraction=0.25),
        translation=TranslationConfig(
            num_candidates=1,
            mt_translators=[
                TranslatorConfig(name="mt", kind="transformers", role="mt", model="counting")
            ],
            critic=CriticConfig(kind="none"),
        ),
        arca=ArcaConfig(steps=2, batch_size=4, log_every=1, save_every=2),
        lasr=LaSRConfig(
            steps=2,
            batch_size=4,
            fusion_dim=32,
            fusion_layers=1,
            num_negatives=4,
            log_every=1,
            eval_every=1,
        ),
    )
    run_pipeline(cfg)

    queries = {json.loads(x)["_id"]: json.loads(x) for x in (folder / "queries.jsonl").open()}
    docs = [json.loads(x) for x in (folder / "corpus.jsonl").open()]
    foreign_docs = {(d["text"], d["lang"]) for d in docs if d.get("lang")}
    want = {(q["text"], q.get("language", "de")) for q in queries.values()} | foreign_docs
    assert len(foreign_docs) == 3 and len(docs) > 3 * len(foreign_docs)
    assert set(sent) == want  # every query and German document, no English document
    assert len(sent) == len(want)  # each once
    assert {lang for _, lang in sent} == {"de", "es"}

    lasr = json.loads((tmp_path / "out" / "lasr" / "metrics.json").read_text())
    assert lasr["evals"] and lasr["before"], "LaSR evaluated no validation split"
    from lira.data.splits import load_splits

    splits = load_splits(cfg.data)  # what LaSR validated on: training ids, never test ones
    assert splits.dev_ids and set(splits.dev_ids) <= set(given["train"])
    assert splits.eval_ids == given["test"]
    # per-step logs of both trainers (LaSR wrote none before), drawn as training curves
    from evaluators.diagnostics import plot_training_curves

    logs = {name: tmp_path / "out" / name.lower() / "log.jsonl" for name in ("Arca", "LaSR")}
    for path in logs.values():
        steps = [json.loads(x)["step"] for x in path.read_text().splitlines()]
        assert steps == [1, 2], (path, steps)
    assert plot_training_curves(logs, tmp_path / "curves.png") is not None
