"""Issue 40: a LiRA model folder in the Hugging Face ecosystem — sentence-transformers, the usual
``encode`` keywords and ``datasets`` inputs, a self-contained copyable folder with its model
card and translations, hub ids and push_to_hub, and no translation where it has weight 0."""

from __future__ import annotations

import dataclasses
import json
import logging
import shutil

import numpy as np
import pytest
import torch

from lasr.model import LiRAModel
from lira.translation.config import TranslationConfig
from lira.translation.store import TranslationStore, reference_translator
from pipeline.runconfig import RunConfig

DE = ["Wie viele Punkte gab die Verteidigung ab?", "Wer führte das Team an?"]
EN = ["How many points did the defense allow?", "Who led the team?"]
DEV = ["Wo liegt Fresno?"]  # a validation text: stored like the training ones
DEV_EN = ["Where is Fresno?"]


@pytest.fixture(scope="module")
def saved(tmp_path_factory, models_config):
    """A LiRA model (demo models, fresh Arca, a head that changes E_lr) saved to
    ``<run>/lira-model`` with the run's store beside it, and its embeddings before any copy."""
    run = tmp_path_factory.mktemp("run")
    store = TranslationStore(run / "translations.sqlite")
    ref = reference_translator("ref")
    store.add_reference(ref, [(d, "de", e, None) for d, e in zip(DE + DEV, EN + DEV_EN)])
    cfg = RunConfig(output_dir=str(run), models=dataclasses.replace(models_config),
                    translation=TranslationConfig(mt_translators=[ref], num_candidates=1))  # fmt: skip
    cfg.lasr.fusion_dim, cfg.lasr.fusion_layers = 32, 1
    torch.manual_seed(0)
    model = LiRAModel.from_config(cfg, None, store=store)
    torch.nn.init.normal_(model.head.delta.weight, std=0.05)
    torch.nn.init.normal_(model.head.gate_mlp[-1].weight, std=0.5)
    model.card = {"languages": ["de", "en"], "data": {"format": "xquad_r", "dataset": "xquad-r"},
                  "metrics": {"after": {"ndcg@10": 0.5}}}  # fmt: skip
    folder = run / "lira-model"
    model.save_pretrained(folder)
    texts, langs = DE + DEV + EN, ["de"] * 3 + ["en"] * 2
    want = {k: model.encode(texts, langs, kind=k) for k in ("query", "document")}
    return model, folder, texts, langs, want


# ------------------------------------------------------------------------ sentence-transformers


@pytest.mark.slow
def test_sentence_transformers_loads_the_folder_and_encodes_as_lira(saved):
    """SentenceTransformer(folder) (through modules.json: no code in the folder) equals
    LiRAModel.encode on the same texts and languages, for queries and documents."""
    from sentence_transformers import SentenceTransformer

    from lasr.st_module import LiRAModule, LiRASentenceTransformer

    model, folder, _, _, _ = saved
    assert not list(folder.rglob("*.py"))  # the module class comes from the installed package
    modules = json.loads((folder / "modules.json").read_text())
    assert [m["type"] for m in modules] == ["lasr.st_module.LiRAModule"]
    for st in (LiRASentenceTransformer(str(folder), device="cpu"),
               SentenceTransformer(str(folder), device="cpu", trust_remote_code=True)):  # fmt: skip
        assert isinstance(st[0], LiRAModule) and st.get_embedding_dimension() == model.dim
        de = model.encode(DE, ["de", "de"])
        assert np.abs(st.encode(DE, lang="de") - de).max() < 1e-6
        assert np.abs(st.encode_query(DE, lang="de") - de).max() < 1e-6
        doc = model.encode(EN, ["en", "en"], kind="document")
        assert np.abs(st.encode_document(EN, lang="en") - doc).max() < 1e-6
        assert np.abs(st.encode(EN, prompt_name="document", lang="en") - doc).max() < 1e-6
        t = st.encode(DE, lang="de", convert_to_tensor=True, normalize_embeddings=True)
        assert isinstance(t, torch.Tensor) and torch.allclose(t, torch.as_tensor(de), atol=1e-6)
        assert st.similarity(t, t).shape == (2, 2)
    # without the flag sentence-transformers >= 6 refuses any class outside its own package
    with pytest.raises(ValueError, match="trust_remote_code"):
        SentenceTransformer(str(folder), device="cpu")


def test_encode_takes_the_sentence_transformers_keywords_and_datasets(saved, capsys):
    import datasets

    model, _, texts, langs, want = saved
    z = model.encode(texts, langs, show_progress_bar=True, convert_to_tensor=True,
                     normalize_embeddings=True, device="cpu", prompt_name="query")  # fmt: skip
    assert isinstance(z, torch.Tensor) and np.abs(z.numpy() - want["query"]).max() < 1e-6
    assert "encode" in capsys.readouterr().err  # tqdm's bar
    doc = model.encode(texts, langs, task="document")
    assert np.abs(doc - want["document"]).max() < 1e-6
    ds = datasets.Dataset.from_dict({"text": texts, "lang": langs})
    assert np.abs(model.encode(ds) - want["query"]).max() < 1e-6  # its lang column
    assert np.abs(model.encode(ds["text"], ds["lang"]) - want["query"]).max() < 1e-6
    with pytest.raises(ValueError, match="'text' column"):
        model.encode(ds.rename_column("text", "sentence"))
    with pytest.raises(ValueError, match="prompt_name='query' or prompt_name='document'"):
        model.encode(texts, langs, prompt_name="passage")


# ------------------------------------------------------------------------ a self-contained folder


@pytest.mark.slow
def test_a_copied_folder_embeds_stored_and_validation_texts_as_before(saved, tmp_path,
                                                                      monkeypatch):  # fmt: skip
    """The issue's probe: the folder copied to another path with no store beside it embeds
    every stored text (training and validation) exactly as before the copy, and stays intact."""
    from lira.checkpoint.manifest import checkpoint_problem

    _, folder, texts, langs, want = saved
    monkeypatch.setenv("LIRA_STORE_CACHE", str(tmp_path / "cache"))
    copy = tmp_path / "elsewhere" / "my-model"
    shutil.copytree(folder, copy)
    assert not (copy.parent / "translations.sqlite").exists()
    meta = json.loads((copy / "lira_config.json").read_text())
    assert meta["store"] == "translations.sqlite" and (copy / "translations.sqlite").is_file()
    moved = LiRAModel.from_pretrained(copy)
    for kind in ("query", "document"):
        assert np.abs(moved.encode(texts, langs, kind=kind) - want[kind]).max() < 1e-6
    assert moved.missing_translations == 0 and moved.translation_lookups == 6
    moved.store.close()
    assert checkpoint_problem(copy, verify=True) is None  # the snapshot was never written


def test_the_model_card_says_what_the_model_is(saved):
    _, folder, _, _, _ = saved
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n") and "library_name: sentence-transformers" in card
    assert "- de\n" in card  # languages in the front matter
    assert "sentence-transformers/all-MiniLM-L6-v2" in card  # demo:minilm in hub terms
    assert "xquad-r" in card and '"ndcg@10": 0.5' in card  # data and metrics
    assert "A foreign query uses" in card and "| foreign query |" in card  # block weights
    assert '"fusion_dim": 32' in card  # the training config


@pytest.mark.slow
def test_hub_id_loading_and_push_to_hub_without_network(saved, tmp_path, monkeypatch):
    """from_pretrained("owner/name") goes through huggingface_hub.snapshot_download (the local
    cache); push_to_hub hands upload_folder a folder that loads to the same model."""
    import huggingface_hub

    model, folder, texts, langs, want = saved
    calls = {}

    def fake_download(repo_id, revision=None, **kw):
        calls["download"] = (repo_id, revision)
        return str(folder)

    monkeypatch.setattr(huggingface_hub, "snapshot_download", fake_download)
    hub = LiRAModel.from_pretrained("someone/lira-demo", revision="v1")
    assert calls["download"] == ("someone/lira-demo", "v1")
    assert np.abs(hub.encode(texts, langs) - want["query"]).max() < 1e-6
    assert hub.mteb_model_meta.name == "someone/lira-demo"

    uploaded = tmp_path / "uploaded"

    class FakeApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, private=None, exist_ok=False):
            calls["create"] = (repo_id, private, exist_ok)

        def upload_folder(self, repo_id, folder_path, commit_message=""):
            shutil.copytree(folder_path, uploaded)  # what would reach the hub
            return "https://hub.invalid/commit/1"

    monkeypatch.setattr(huggingface_hub, "HfApi", FakeApi)
    assert model.push_to_hub("someone/lira-demo", private=True) == "https://hub.invalid/commit/1"
    assert calls["create"] == ("someone/lira-demo", True, True)
    assert {"README.md", "modules.json", "translations.sqlite"} <= {
        p.name for p in uploaded.iterdir()
    }
    got = LiRAModel.from_pretrained(uploaded).encode(texts, langs)
    assert np.abs(got - want["query"]).max() < 1e-6


# ------------------------------------------------------------------------ no wasted translation


def test_a_zero_english_weight_skips_the_translator_and_says_so_once(saved, caplog):
    """Weights λ(en, lr, g) = (0, 0, 0.125) for foreign queries (the demo model's fit): the
    translation is unused, so no candidate is looked up (no online translator would run), the
    vectors are exactly those with translation, and one plain sentence says why."""
    model, _, texts, langs, _ = saved
    fused = LiRAModel(model.models_cfg, model.translation_cfg, model.arca_cfg, model.lasr_cfg,
                      model.backbone, model.arca, model.store)  # fmt: skip
    table = fused.head.table().clone()
    table[0] = torch.tensor([0.0, 0.0, 0.125])
    fused.head.set_weights(table)
    assert fused.translation_unused("query") and not fused.translation_unused("document")
    st = fused.streams(texts, langs, "query")  # with the stored translations
    with_translation = fused.net(*st.net_inputs("cpu")).detach().numpy()
    looked = []
    real = fused.candidates
    fused.candidates = lambda *a, **k: (looked.append(a[0]), real(*a, **k))[1]
    with caplog.at_level(logging.INFO, logger="lasr.model"):
        z = fused.encode(texts, langs)
        fused.encode(texts, langs)
    assert looked == []
    assert np.abs(z - with_translation).max() < 1e-6
    said = [r.getMessage() for r in caplog.records if "A foreign query uses only" in r.getMessage()]
    assert said == [
        "A foreign query uses only g's own vector: its English translation has weight 0, so the "
        "translators are skipped for it. A foreign document uses the English half (the backbone "
        "on the chosen translation) and the multilingual half (Arca's Adaptor on g) and g's own "
        "vector."
    ]
    fused.encode(texts, langs, kind="document")
    assert looked  # documents use their translation: looked up
    # the same sentence opens the leaderboard (evaluators.leaderboard.model_notes)
    from evaluators.leaderboard import leaderboard_markdown, model_notes

    notes = model_notes({"lira": fused, "backbone": model.backbone})
    assert notes == [f"lira: {said[0]}"]
    row = {"method": "lira", "task": "t", "scenario": "lang-en", "language": "all",
           "metric": "ndcg@10", "value": 50.0, "ci_low": 40.0, "ci_high": 60.0}  # fmt: skip
    md = leaderboard_markdown([row], "Leaderboard", notes=notes)
    assert md.index(said[0]) < md.index("## ndcg@10")
    # a head whose multilingual half reads the English half (Δ ≠ 0): the translation matters
    table[0] = torch.tensor([0.0, 1.0, 0.125])
    fused.head.set_weights(table)
    torch.nn.init.normal_(fused.head.delta.weight, std=0.05)
    assert not fused.translation_unused("query")
