"""With two real candidates per query (K = 2 at inference) the Actor decides what LaSR embeds."""

from __future__ import annotations

import dataclasses

import torch
from torch import nn

from lasr.model import LiRAModel
from lira.translation.config import TranslationConfig, TranslatorConfig
from lira.translation.store import TranslationStore
from pipeline.runconfig import RunConfig

DE = ["Wie viele Punkte gab die Verteidigung ab?", "Wer führte das Team an?"]
GOOD = ["How many points did the defense allow?", "Who led the team?"]
POOR = ["The weather is nice today.", "Bananas are yellow."]


def test_the_actor_picks_among_two_inference_candidates(tmp_path, models_config):
    store = TranslationStore(tmp_path / "store.sqlite")
    a = TranslatorConfig(name="a", kind="reference", role="mt")  # both usable at inference
    b = TranslatorConfig(name="b", kind="reference", role="mt")
    store.add_reference(a, [(d, "de", e, None) for d, e in zip(DE, GOOD)])
    store.add_reference(b, [(d, "de", e, None) for d, e in zip(DE, POOR)])
    models = dataclasses.replace(models_config, backbone="demo:minilm", backbone_pooling="mean")
    cfg = RunConfig(
        output_dir=str(tmp_path),
        models=models,
        translation=TranslationConfig(mt_translators=[a, b], num_candidates=2),
    )
    cfg.lasr.fusion_dim, cfg.lasr.fusion_layers = 32, 1
    torch.manual_seed(0)
    model = LiRAModel.from_config(cfg, None, store=store)
    cands = model.candidates(DE, ["de", "de"])
    assert [len(c) for c in cands] == [2, 2]  # K = 2 at inference: there is a choice
    # an Actor that reads sim only: +sim prefers the higher sim, -sim the lower
    picks = []
    for sign in (1.0, -1.0):
        head = nn.Linear(4, 1, bias=False)
        head.weight.data = torch.tensor([[0.0, 0.0, 0.0, 100.0 * sign]])
        model.arca.actor.net = head
        chosen, translated, _ = model.english_texts(DE, ["de", "de"])
        assert translated.tolist() == [1.0, 1.0]
        picks.append(chosen)
    # the Actor's weights decide the embedded text of every source (+sim and -sim disagree)
    for i in range(len(DE)):
        assert {picks[0][i], picks[1][i]} == {GOOD[i], POOR[i]}


def test_the_k2_config_offers_two_candidates_at_inference():
    from pathlib import Path

    from pipeline.runconfig import load_config

    root = Path(__file__).resolve().parents[2] / "configs"
    at_inference = {}
    for name in ("xquad_minilm", "xquad_minilm_k2"):
        tc = load_config(root / f"{name}.yaml").translation
        at_inference[name] = [t.name for t in tc.active_translators() if not t.train_only]
    assert at_inference == {"xquad_minilm": ["gemma3"],
                            "xquad_minilm_k2": ["smollm2", "smollm2-t07"]}  # fmt: skip
    k2 = load_config(root / "xquad_minilm_k2.yaml")
    assert k2.translation.critic.kind == "embedding" and k2.arca.use_llm_critic
