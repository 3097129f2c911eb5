"""``lira tune-translator``: GRPO on Arca's anchor reward (beyond the paper; issue #20)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from arca.tuning.config import TuneTranslatorConfig
from arca.tuning.engine import run_tune_translator
from lira.config import DataConfig
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from lira.translation.store import Row, TranslationStore, key_for
from lira.translation.tuning import tuned_translator
from pipeline.runconfig import RunConfig

from .conftest import EN, SRC, _reset_accelerate


def one_step_run(out, base, models_config, arca_dir, **data):
    """(config, summary) of one GRPO step of ``base`` on two German training questions."""
    cfg = RunConfig(
        output_dir=str(out),
        models=models_config,
        data=DataConfig(train_languages=["de"], eval_languages=["de"], max_train_queries=2,
                        max_eval_queries=2, **data),
        translation=TranslationConfig(llm_translators=[base], pass_at_k=1, num_candidates=1,
                                      critic=CriticConfig(kind="none")),
        tune_translator=TuneTranslatorConfig(
            arca_checkpoint=str(arca_dir), steps=1, batch_size=2, num_generations=2,
            max_new_tokens=base.max_new_tokens, lr=1e-3, save_steps=1, logging_steps=1,
            lora_r=4, lora_alpha=8,
        ),
    )  # fmt: skip
    _reset_accelerate()
    summary = run_tune_translator(cfg, resume=False)
    _reset_accelerate()
    return cfg, summary


@pytest.fixture(scope="module")
def tuned_run(arca_dir, models_config, demo_cache, tmp_path_factory):
    """One GRPO step of the demo causal LM (chat prompt), with a validation split in de + es."""
    from lira.demo.references import resolve_model

    lm = resolve_model("demo:qwen3-lm", str(demo_cache))
    base = TranslatorConfig(name="qwen-lm", model=lm, max_new_tokens=8, batch_size=4)
    return one_step_run(tmp_path_factory.mktemp("tune"), base, models_config, arca_dir,
                        dev_fraction=0.2, max_dev_queries=2, dev_languages=["es"])  # fmt: skip


def test_one_grpo_step_moves_the_lora_weights_and_writes_a_loadable_model(tuned_run):
    from transformers import AutoModelForCausalLM

    cfg, summary = tuned_run
    out = cfg.output_dir + "/tune_translator/qwen-lm-grpo"
    assert summary["steps"] == 1 and summary["translator"]["name"] == "qwen-lm-grpo"
    assert summary["log"] and "reward" in summary["log"][0]
    lora = load_file(out + "/adapter/adapter_model.safetensors")
    b = [v for k, v in lora.items() if "lora_B" in k]
    assert b and any(bool(v.abs().sum() > 0) for v in b)  # B starts at 0: the step moved it
    tuned = AutoModelForCausalLM.from_pretrained(out + "/final")
    base = AutoModelForCausalLM.from_pretrained(cfg.translation.llm_translators[0].model)
    t, o = tuned.state_dict(), base.state_dict()
    assert set(t) == set(o)  # merged: a plain model of the base architecture
    assert any(not torch.equal(t[k], o[k]) for k in t)
    # adapter/ (what final/ holds with merge: false) is base + LoRA = the merged model, and the
    # pool's transformers backend loads it through its base reference
    from lira.translation.translators import TransformersTranslator

    unmerged = TransformersTranslator(TranslatorConfig(name="u", model=out + "/adapter"), "cpu")
    ids = torch.tensor([[1, 2, 3, 4]])
    with torch.no_grad():
        diff = (unmerged.model(ids).logits - tuned(ids).logits).abs().max()
    assert float(diff) < 1e-4
    assert (
        Path(out, "checkpoint-1").is_dir() and Path(out, "final", "tune_translator.json").is_file()
    )
    assert "qwen-lm-grpo" in Path(out, "translator.yaml").read_text()


def test_resume_continues_from_the_last_checkpoint(tuned_run, tmp_path):
    import dataclasses
    import shutil

    cfg, _ = tuned_run
    src = Path(cfg.output_dir, "tune_translator", "qwen-lm-grpo")
    shutil.copytree(src / "checkpoint-1", tmp_path / "checkpoint-1")
    tc = dataclasses.replace(cfg.tune_translator, steps=2, output=str(tmp_path))
    _reset_accelerate()
    summary = run_tune_translator(dataclasses.replace(cfg, tune_translator=tc), resume=True)
    _reset_accelerate()
    assert summary["steps"] == 2  # step 1 came from the checkpoint (with its log row)
    assert [h["step"] for h in summary["log"]] == [1, 2]
    assert (tmp_path / "checkpoint-2").is_dir() and (tmp_path / "final").is_dir()


def test_store_keeps_tuned_and_base_candidates_apart(tuned_run, tmp_path):
    from lira.translation.engine import fill_store

    cfg, _ = tuned_run
    base = cfg.translation.llm_translators[0]
    tuned = tuned_translator(cfg)
    assert tuned.name != base.name and tuned.model.endswith("final")
    pool = TranslationConfig(llm_translators=[base, tuned], pass_at_k=2, num_candidates=2,
                             critic=CriticConfig(kind="none"))  # fmt: skip
    run = RunConfig(output_dir=str(tmp_path), models=cfg.models, translation=pool)
    texts = [SRC, "Wo liegt Berlin?"]
    assert key_for(SRC, "de", base) != key_for(SRC, "de", tuned)
    # the pool loads the tuned folder and generates with it, beside the base translator (the
    # tiny demo LM may produce nothing usable: a recorded empty output, never a load failure)
    fill_store(run, {"de": texts})
    with TranslationStore(tmp_path / "translations.sqlite") as store:
        assert store.count(base.name) == 2 and store.count(tuned.name) == 2
        rows = [store.row(x, "de", t) for t in (base, tuned) for x in texts]
        assert all("load" not in (r["error"] or "") for r in rows)
        assert {r["translator"] for r in rows} == {base.name, tuned.name}
        # the same source keeps one candidate per translator id, side by side
        store.write_rows([
            Row(SRC, "de", base, raw="base says", text="base says"),
            Row(SRC, "de", tuned, raw="tuned says", text="tuned says"),
        ])  # fmt: skip
        cands = store.candidates([SRC], "de", [base, tuned])[0]
    assert [(c.translator, c.text) for c in cands] == [
        (base.name, "base says"),
        (tuned.name, "tuned says"),
    ]


def test_evaluate_compares_the_backbone_on_base_and_tuned_translations(tuned_run, tmp_path):
    import dataclasses
    import json

    from evaluators.translators import TranslatedQueries, run_translator_eval
    from lira.errors import UserInputError
    from lira.models import load_backbone

    cfg, _ = tuned_run
    summary = run_translator_eval(cfg, pairs=5, split="test")
    base, tuned = "h(qwen-lm)", "h(qwen-lm-grpo)"
    nd = summary["ndcg@10"]
    assert {
        f"{m} {lg}" for m in ("backbone (raw question)", base, tuned) for lg in ("de", "all")
    } <= set(nd)
    # the tuned translator's paired Δ is the difference of the two means (same questions)
    delta = summary["paired_delta"]["de"][0]
    assert delta == pytest.approx(nd[f"{tuned} de"][0] - nd[f"{base} de"][0], abs=0.02)
    out = Path(cfg.output_dir, "tune_translator", "qwen-lm-grpo", "evaluation", "test")
    assert json.loads((out / "summary.json").read_text())["questions"] == 2
    assert (out / "pairs.md").read_text().count("\n| de |") == 2  # 2 held-out questions
    # both translators' candidates of the held-out questions are in the run's store
    with TranslationStore(Path(cfg.output_dir, "translations.sqlite")) as store:
        assert store.count("qwen-lm") >= 2 and store.count("qwen-lm-grpo") >= 2
    # the encoder embeds the stored translation, and the source where none is stored
    backbone = load_backbone(cfg.models)
    with TranslationStore(tmp_path / "t.sqlite") as store:
        t = cfg.translation.llm_translators[0]
        store.write_rows([Row(SRC, "de", t, raw=EN, text=EN)])
        enc = TranslatedQueries(backbone, store, t)
        got = enc.encode([SRC, "Wo liegt Berlin?"], ["de", "de"])
        want = backbone.encode([EN, "Wo liegt Berlin?"])
        assert torch.allclose(torch.as_tensor(got), torch.as_tensor(want), atol=1e-5)
        assert enc.missing == 1
    # no tuned model yet: one clear error naming the command
    gone = dataclasses.replace(cfg.tune_translator, output=str(tmp_path / "none"))
    with pytest.raises(UserInputError, match="run `lira tune-translator"):
        run_translator_eval(dataclasses.replace(cfg, tune_translator=gone))


def test_evaluate_on_validation_reads_the_validation_ids_and_counts_non_translations(
    tuned_run, tmp_path
):
    import dataclasses

    from evaluators.translators import heldout_questions, no_translation_rates, run_translator_eval
    from lira.data.splits import load_splits
    from lira.errors import UserInputError

    cfg, _ = tuned_run
    splits = load_splits(cfg.data)
    _, ids, questions = heldout_questions(cfg, "validation")
    assert ids == splits.dev_ids and not set(ids) & set(splits.eval_ids + splits.train_ids)
    assert list(questions) == ["de", "es"]  # the training language and the dev language
    summary = run_translator_eval(cfg, pairs=2)  # validation is the default
    assert summary["split"] == "validation" and summary["questions"] == 2 * len(ids)
    assert {"de", "es"} <= {k.split()[-1] for k in summary["ndcg@10"]}
    assert Path(cfg.output_dir, "tune_translator", "qwen-lm-grpo", "evaluation", "validation",
                "summary.json").is_file()  # fmt: skip
    rates = summary["no_translation_rate"]
    assert set(rates) == {"qwen-lm", "qwen-lm-grpo"}
    # the rate by hand: a copy of the source, an empty output and a translation of 3 sources
    base = cfg.translation.llm_translators[0]
    texts = [SRC, "Wo liegt Berlin?", "Wer gewann?"]
    with TranslationStore(tmp_path / "t.sqlite") as store:
        store.write_rows([
            Row(texts[0], "de", base, raw=EN, text=EN),
            Row(texts[1], "de", base, raw=texts[1], text=texts[1]),
            Row(texts[2], "de", base, raw="", text=""),
        ])  # fmt: skip
        got = no_translation_rates(store, {"de": texts}, base)
    assert got == pytest.approx({"de": 2 / 3, "all": 2 / 3})
    # no validation split: one line naming the field
    flat = dataclasses.replace(cfg, data=dataclasses.replace(cfg.data, dev_fraction=0.0,
                                                             dev_languages=[]))  # fmt: skip
    with pytest.raises(UserInputError, match=r"data\.dev_fraction"):
        heldout_questions(flat, "validation")


@pytest.fixture(scope="module")
def completion_run(arca_dir, models_config, demo_cache, tmp_path_factory):
    """One GRPO step of the demo causal LM as a base model with the few-shot prompt."""
    from lira.demo.references import resolve_model

    lm = resolve_model("demo:qwen3-lm", str(demo_cache))
    base = TranslatorConfig(name="lm-fewshot", model=lm, max_new_tokens=6, batch_size=4,
                            prompt_version="fewshot-v1")  # fmt: skip
    return one_step_run(tmp_path_factory.mktemp("tune-fewshot"), base, models_config, arca_dir)


def test_a_base_model_tunes_on_its_few_shot_text_and_keeps_its_own_stop_ids(completion_run):
    from transformers import GenerationConfig

    from arca.tuning.engine import training_sources
    from arca.tuning.grpo import build_dataset, line_end_stops, load_policy
    from lira.models.generators import line_end_ids
    from lira.prompts import translation_prompt

    cfg, summary = completion_run
    base = cfg.translation.llm_translators[0]
    assert summary["steps"] == 1 and summary["log"] and "reward" in summary["log"][0]
    # the GRPO prompt is the pool's plain few-shot text, not a chat message
    sources = training_sources(cfg)
    rows = build_dataset(sources, base)
    assert rows[0]["prompt"] == translation_prompt(sources[0][0], "de", "fewshot-v1")
    assert rows[0]["prompt"].endswith("English:")
    # while the trainer is built the policy stops at any line break, then its ids come back
    model, tok = load_policy(base)
    own = model.generation_config.eos_token_id
    with line_end_stops(model, tok):
        assert model.generation_config.eos_token_id == line_end_ids(tok)
        assert len(line_end_ids(tok)) > 1 and tok.eos_token_id in line_end_ids(tok)
    assert model.generation_config.eos_token_id == own
    final = Path(cfg.output_dir, "tune_translator", "lm-fewshot-grpo", "final")
    assert GenerationConfig.from_pretrained(final).eos_token_id == own
