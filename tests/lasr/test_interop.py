"""Issue 40: a LiRA model folder in the Hugging Face ecosystem — sentence-transformers, the usual
``encode`` keywords and ``datasets`` inputs, a self-contained copyable folder with its model
card and translations, hub ids and push_to_hub, and no translation where it has weight 0."""

from __future__ import annotations

import dataclasses
import json
import logging
import re
import shutil
import subprocess
import sys
from pathlib import Path

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


def _copy_of(saved, tmp_path, name: str = "hostile"):
    """A copy of the saved folder, to be edited (its manifest rewritten by the test)."""
    return shutil.copytree(saved[1], tmp_path / name)


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


def _damaged(work):
    """Every page of ``work`` after the first overwritten: 'database disk image is malformed'."""
    data = bytearray(work.read_bytes())
    data[4096:] = b"\x0d" * (len(data) - 4096)
    work.write_bytes(bytes(data))


def _edited(work):
    """A sound SQLite file whose stored translations were changed (a planted working copy)."""
    import sqlite3

    conn = sqlite3.connect(work)
    with conn:
        conn.execute("UPDATE translations SET text = 'Something else entirely.'")
    conn.close()


@pytest.mark.parametrize("harm", [_damaged, _edited], ids=["damaged", "edited"])
def test_a_bad_working_copy_of_the_folders_store_is_made_again(saved, tmp_path, monkeypatch,
                                                                caplog, harm):  # fmt: skip
    """Issue 60, item 4: a damaged or edited working copy under $LIRA_STORE_CACHE (a shared
    temp folder) locked out every copy of an intact model with 'database disk image is
    malformed ... set translation.store'; it is made again from the folder's snapshot (rows
    added online are kept while the copy is sound)."""
    from lira.translation.store import TranslationStore

    _, folder, texts, langs, want = saved
    cache = tmp_path / "cache"
    monkeypatch.setenv("LIRA_STORE_CACHE", str(cache))
    LiRAModel.from_pretrained(folder).store.close()
    (work,) = cache.glob("*.sqlite")
    with TranslationStore(work) as added:  # a translation made online: a sound copy keeps it
        added.add_reference(reference_translator("ref"), [("Neu.", "de", "New.", None)])
    again = LiRAModel.from_pretrained(folder)
    assert again.candidates(["Neu."], ["de"])[0][0].text == "New."
    again.store.close()
    harm(work)
    with caplog.at_level(logging.WARNING, logger="lasr.hub"):
        model = LiRAModel.from_pretrained(folder)
    assert "was damaged or changed: made again from the model folder's snapshot" in caplog.text
    assert np.abs(model.encode(texts, langs) - want["query"]).max() < 1e-6
    assert model.missing_translations == 0
    model.store.close()


def test_a_folder_never_chooses_where_demo_models_are_built(saved, tmp_path, monkeypatch,
                                                            demo_cache):  # fmt: skip
    """Issue 60, item 3: ``models.cache_dir`` in lira_config.json (and arca_config.json) named
    any path, and loading built the folder's demo models there; a cache that does not already
    hold them is never used: the loader's own cache ($LIRA_CACHE) is."""
    from lira.checkpoint.manifest import write_manifest

    _, _, texts, langs, want = saved
    copy = _copy_of(saved, tmp_path, "copy")
    elsewhere = tmp_path / "chosen-by-the-folder"
    for f in (copy / "lira_config.json", copy / "arca" / "arca_config.json"):
        meta = json.loads(f.read_text())
        meta["models"]["cache_dir"] = str(elsewhere)
        f.write_text(json.dumps(meta))
    write_manifest(copy / "arca")
    write_manifest(copy)
    monkeypatch.setenv("LIRA_CACHE", str(demo_cache))  # the user's own cache
    model = LiRAModel.from_pretrained(copy)
    assert not elsewhere.exists()
    assert np.abs(model.encode(texts, langs) - want["query"]).max() < 1e-6
    model.store.close()


def test_the_model_card_says_what_the_model_is(saved):
    _, folder, _, _, _ = saved
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert card.startswith("---\n") and "library_name: sentence-transformers" in card
    assert "- de\n" in card  # languages in the front matter
    assert "sentence-transformers/all-MiniLM-L6-v2" in card  # demo:minilm in hub terms
    assert "xquad-r" in card and "| ndcg@10 | 0.5 |" in card  # data and metrics (a table)
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
    """Weights λ(en, lr, g, gt, hx) = (0, 0, 0.125, 0, 0) for foreign queries (the demo model's fit): the
    translation is unused, so no candidate is looked up (no online translator would run), the
    vectors are exactly those with translation, and one plain sentence says why."""
    model, _, texts, langs, _ = saved
    fused = LiRAModel(model.models_cfg, model.translation_cfg, model.arca_cfg, model.lasr_cfg,
                      model.backbone, model.arca, model.store)  # fmt: skip
    table = fused.head.table().clone()
    table[0] = torch.tensor([0.0, 0.0, 0.125, 0.0, 0.0])
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
    table[0] = torch.tensor([0.0, 1.0, 0.125, 0.0, 0.0])
    fused.head.set_weights(table)
    torch.nn.init.normal_(fused.head.delta.weight, std=0.05)
    assert not fused.translation_unused("query")
    # g's translation block (lasr.translated_g) reads the translation too
    arch = dataclasses.replace(model.lasr_cfg, translated_g=True)
    gt = LiRAModel(model.models_cfg, model.translation_cfg, model.arca_cfg, arch,
                   model.backbone, model.arca, model.store)  # fmt: skip
    for w_gt, unused in ((0.5, False), (0.0, True)):
        gt.head.set_weights(torch.tensor([[0.0, 0.0, 0.125, w_gt, 0.0]] + [[1.0] * 5] * 3))
        assert gt.translation_unused("query") is unused, w_gt
    # h on the untranslated text (lasr.raw_h) does not read it
    arch = dataclasses.replace(model.lasr_cfg, raw_h=True)
    hx = LiRAModel(model.models_cfg, model.translation_cfg, model.arca_cfg, arch,
                   model.backbone, model.arca, model.store)  # fmt: skip
    hx.head.set_weights(torch.tensor([[0.0, 0.0, 0.125, 0.0, 2.0]] + [[1.0] * 5] * 3))
    assert hx.translation_unused("query") and not hx.translation_unused("document")
    assert "the backbone on the untranslated text" in hx.parts_note()


# ------------------------------------------------------------------------ issue 52: round trips
def _st_saved(folder, dest, plain=False):
    """``folder`` loaded through sentence-transformers and saved again to ``dest`` by it."""
    from sentence_transformers import SentenceTransformer

    from lasr.st_module import LiRASentenceTransformer

    st = (SentenceTransformer(str(folder), device="cpu", trust_remote_code=True) if plain
          else LiRASentenceTransformer(str(folder), device="cpu"))  # fmt: skip
    st.save(str(dest))
    return st


@pytest.mark.parametrize("plain", [False, True], ids=["LiRASentenceTransformer", "plain-st"])
def test_a_folder_saved_through_sentence_transformers_loads_again(saved, tmp_path, plain):
    """Issue 52, item 1: ST's save writes its own card after LiRA's manifest; the card is outside
    the manifest, so the folder loads (through ST and LiRA) and embeds identically, and its
    integrity checks still hold (a flipped weight byte is refused)."""
    from lasr.st_module import LiRASentenceTransformer
    from lira.checkpoint.manifest import checkpoint_problem
    from lira.errors import CheckpointError

    model, folder, texts, langs, want = saved
    dest = tmp_path / "resaved"
    _st_saved(folder, dest, plain)
    assert checkpoint_problem(dest, verify=True) is None
    again = LiRASentenceTransformer(str(dest), device="cpu")
    assert np.abs(again.encode(DE, lang="de") - model.encode(DE, ["de", "de"])).max() <= 1e-6
    got = LiRAModel.from_pretrained(dest).encode(texts, langs)
    assert np.abs(got - want["query"]).max() <= 1e-6
    head = bytearray((dest / "head.safetensors").read_bytes())
    head[-3] ^= 0x01
    (dest / "head.safetensors").write_bytes(bytes(head))
    with pytest.raises(CheckpointError, match=r"head\.safetensors does not match its sha256"):
        LiRAModel.from_pretrained(dest)


def test_push_to_hub_through_sentence_transformers_uploads_a_folder_that_loads(
    saved, tmp_path, monkeypatch
):
    """Issue 52, item 1: ST's push_to_hub (a fake HfApi) uploads a folder LiRA loads, its card
    naming the hub repo."""
    import sentence_transformers.base.model as st_model

    from lasr.st_module import LiRASentenceTransformer

    _, folder, texts, langs, want = saved
    uploaded = tmp_path / "uploaded"

    class FakeApi:
        def __init__(self, token=None):
            pass

        def create_repo(self, repo_id, **kw):
            return type("Url", (), {"repo_id": repo_id})()

        def upload_folder(self, repo_id, folder_path, **kw):
            shutil.copytree(folder_path, uploaded)
            return type("Info", (), {"commit_url": "https://hub.invalid/commit/1"})()

    st = LiRASentenceTransformer(str(folder), device="cpu")
    monkeypatch.setattr(st_model, "HfApi", FakeApi)
    monkeypatch.setattr(st_model, "load_file_path", lambda *a, **k: None)  # no card on the hub
    assert st.push_to_hub("someone/lira-demo") == "https://hub.invalid/commit/1"
    assert (
        np.abs(LiRAModel.from_pretrained(uploaded).encode(texts, langs) - want["query"]).max()
        <= 1e-6
    )
    assert "LiRASentenceTransformer('someone/lira-demo')" in (uploaded / "README.md").read_text()


@pytest.mark.parametrize("lang", ["xx", "deu", "De"])
def test_sentence_transformers_refuses_an_unknown_lang_in_one_line(saved, lang):
    """Issue 52, item 3: ``lang="xx"`` was accepted (and embedded untranslated)."""
    from lasr.st_module import LiRASentenceTransformer
    from lira.errors import UserInputError

    st = LiRASentenceTransformer(str(saved[1]), device="cpu")
    with pytest.raises(UserInputError, match=r"is not an ISO 639-1") as e:
        st.encode(DE, lang=lang)
    assert "\n" not in str(e.value)


def test_token_embeddings_are_refused_in_one_line(saved):
    """Issue 52, item 5: ``output_value="token_embeddings"`` was a bare KeyError."""
    from lasr.st_module import LiRASentenceTransformer
    from lira.errors import UserInputError

    st = LiRASentenceTransformer(str(saved[1]), device="cpu")
    with pytest.raises(UserInputError, match="output_value='token_embeddings': a LiRA model"):
        st.encode(DE, lang="de", output_value="token_embeddings")
    every = st.encode(DE, lang="de", output_value=None)  # every output: the vectors are there
    assert every[0]["sentence_embedding"].shape == (saved[0].dim,)


def test_push_to_hub_offline_is_one_line_naming_the_hub(saved, monkeypatch):
    """Issue 52, item 5: an upload that cannot reach the hub (a closed local port here) was a
    bare httpx ConnectError."""
    import huggingface_hub.constants

    from lasr.st_module import LiRASentenceTransformer
    from lira.errors import LiRAError

    model, folder, _, _, _ = saved
    monkeypatch.setattr(huggingface_hub.constants, "ENDPOINT", "http://127.0.0.1:9")
    monkeypatch.setenv("HF_TOKEN", "hf_fake")
    st = LiRASentenceTransformer(str(folder), device="cpu")
    for push in (model.push_to_hub, st.push_to_hub):
        with pytest.raises(LiRAError) as e:
            push("someone/lira-demo")
        msg = str(e.value)
        assert msg.startswith("could not upload to the Hugging Face Hub repo 'someone/lira-demo'")
        assert "\n" not in msg and "HF_TOKEN" in msg


def _run_snippet(card: str, where: Path) -> None:
    """Paste the card's first code block into a fresh interpreter started in ``where``."""
    snippet = re.search(r"```python\n(.*?)```", card, re.S).group(1)
    cmd = [sys.executable, "-c", snippet]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600, cwd=where)
    assert out.returncode == 0, out.stderr[-2000:]
    assert "tensor([[" in out.stdout


# ------------------------------------------------------------------------ issue 52, item 2: card
def test_the_cards_snippet_runs_as_pasted_and_its_front_matter_is_complete(saved):
    """The card's first code block, run in a fresh interpreter, loads the folder by its own path
    and prints similarities; the front matter names base_model (h by hub id), datasets, license
    and a model-index of the rounded validation results."""
    import yaml

    _, folder, _, _, _ = saved
    card = (folder / "README.md").read_text(encoding="utf-8")
    front = yaml.safe_load(card.split("---\n")[1])
    assert front["base_model"] == ["sentence-transformers/all-MiniLM-L6-v2"]
    assert front["datasets"] == ["google-research-datasets/xquad_r"]
    assert front["license"] == "apache-2.0"
    result = front["model-index"][0]["results"][0]
    assert result["metrics"][0] == {"type": "ndcg_at_10", "value": 0.5, "name": "ndcg@10"}
    assert result["dataset"]["split"] == "validation"
    assert "| retrieval ndcg@10 |" not in card and "| ndcg@10 |" in card  # a table, not JSON
    snippet = re.search(r"```python\n(.*?)```", card, re.S).group(1)
    assert "LiRASentenceTransformer('lira-model')" in snippet and "FOLDER_OR_HUB_ID" not in card
    assert "tasks=[...]" not in card and "texts," not in card
    _run_snippet(card, folder.parent)


# ------------------------------------------------------------------------ issue 58, item 1: card
def test_a_run_writes_a_card_whose_snippet_runs_beside_the_folder_and_a_copy(
    models_config, tmp_path
):
    """The card that ``lira run`` writes (:meth:`LaSRTrainer.finalize`, through the atomic
    writer) named the writer's temporary folder (``.lira-model.tmp-<pid>@<host>``), gone after
    the rename: its snippet, pasted, was a FileNotFoundError. It names the folder's own name:
    the snippet runs beside the folder, and beside a copy once the original is gone."""
    from lasr.config import LaSRConfig
    from lasr.trainer import LaSRTrainer
    from lira.data.types import Record, RetrievalData

    out = tmp_path / "out"
    cfg = RunConfig(output_dir=str(out), models=dataclasses.replace(models_config))
    torch.manual_seed(0)
    model = LiRAModel.from_config(cfg, None)
    docs = [Record(f"d{i}", t, "en") for i, t in enumerate(EN)]
    data = RetrievalData([Record("q0", DE[1], "de")], docs, {"q0": {"d1": 1}})
    lasr = LaSRConfig(steps=0, fusion_init="paper", encode_batch_size=4)
    folder = LaSRTrainer(lasr, model, out, retrieval=data, fingerprint={}).finalize()
    assert folder == out / "lira-model" and not list(out.glob(".lira-model.*"))
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert ".tmp-" not in card and str(out) not in card
    assert "LiRASentenceTransformer('lira-model')  # this folder: run beside it" in card
    assert "LiRAModel.from_pretrained('lira-model')" in card
    _run_snippet(card, out)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(folder, elsewhere / "lira-model")
    folder.rename(out / "moved-away")  # the copy cannot lean on the original
    _run_snippet(card, elsewhere)


# ------------------------------------------------------------------------ issue 51, item 2
EVIL = "import pathlib\npathlib.Path({marker!r}).write_text('ran')\nclass Evil:\n    pass\n"


@pytest.mark.parametrize("trust", [False, True], ids=["no-flag", "trust_remote_code"])
def test_a_folders_own_python_never_runs_through_lira_sentence_transformer(saved, tmp_path,
                                                                            trust):  # fmt: skip
    """A folder whose modules.json names a class in a .py file beside it (plain
    ``SentenceTransformer(folder, trust_remote_code=True)`` imports and runs it): refused in one
    line naming modules.json and the class, the file never imported, whatever the flag; a
    ``.py`` shadowing LiRA's own module path is never read either."""
    from lasr.st_module import LiRASentenceTransformer
    from lira.checkpoint.manifest import write_manifest
    from lira.errors import CheckpointError

    hostile, marker = _copy_of(saved, tmp_path), tmp_path / "marker"
    (hostile / "evil.py").write_text(EVIL.format(marker=str(marker)))
    (hostile / "lasr").mkdir()
    (hostile / "lasr" / "st_module.py").write_text(EVIL.format(marker=str(marker)))
    (hostile / "lasr.st_module.py").write_text(EVIL.format(marker=str(marker)))
    with pytest.raises(CheckpointError, match=r"is not listed in lira_manifest\.json"):
        LiRASentenceTransformer(str(hostile), device="cpu", trust_remote_code=trust)
    assert not marker.exists()  # files LiRA did not write make the folder damaged (issue 51)
    write_manifest(hostile)  # a hostile folder may carry a manifest that lists its own files
    st = LiRASentenceTransformer(str(hostile), device="cpu", trust_remote_code=trust)
    assert st.lira.dim == saved[0].dim and not marker.exists()  # LiRA's class, installed
    modules = [{"idx": 0, "name": "0", "path": "", "type": "evil.Evil"}]
    (hostile / "modules.json").write_text(json.dumps(modules))
    write_manifest(hostile)
    with pytest.raises(CheckpointError) as e:
        LiRASentenceTransformer(str(hostile), device="cpu", trust_remote_code=trust)
    msg = str(e.value)
    assert "modules.json names the module class 'evil.Evil'" in msg and "\n" not in msg
    assert not marker.exists()


# ------------------------------------------------------------------------ issue 60, item 1
PWN = (
    "import pathlib\npathlib.Path({marker!r}).write_text('ran')\n"
    "from transformers import BertConfig, BertModel\n"
    "class EvilConfig(BertConfig):\n    pass\nclass EvilModel(BertModel):\n    pass\n"
)


@pytest.mark.parametrize("where", ["", "x/y"], ids=["folder", "nested"])
def test_sentence_transformers_own_module_never_runs_the_folders_code(saved, tmp_path, where):
    """A folder whose modules.json names sentence-transformers' own Transformer module and
    whose config.json has an auto_map to a .py beside it: ``trust_remote_code=True`` (also in
    model_kwargs) was passed on to AutoModel, which ran the file and then ended in a raw error.
    It is refused in one line naming config.json's auto_map (the folder itself), or loaded with
    trust_remote_code=False and refused in one line (a deeper folder); never run."""
    from lasr.st_module import LiRASentenceTransformer
    from lira.checkpoint.manifest import write_manifest
    from lira.errors import CheckpointError

    hostile, marker = _copy_of(saved, tmp_path), tmp_path / "marker"
    (hostile / where).mkdir(parents=True, exist_ok=True)
    (hostile / where / "pwn.py").write_text(PWN.format(marker=str(marker)))
    auto_map = {"AutoConfig": "pwn.EvilConfig", "AutoModel": "pwn.EvilModel"}
    (hostile / where / "config.json").write_text(
        json.dumps({"model_type": "bert", "auto_map": auto_map})
    )
    transformer = "sentence_transformers.base.modules.Transformer"
    modules = [{"idx": 0, "name": "0", "path": where, "type": transformer}]
    (hostile / "modules.json").write_text(json.dumps(modules))
    write_manifest(hostile)
    with pytest.raises(CheckpointError) as e:
        LiRASentenceTransformer(str(hostile), device="cpu", trust_remote_code=True,
                                model_kwargs={"trust_remote_code": True})  # fmt: skip
    msg = str(e.value)
    assert not marker.exists() and "\n" not in msg and msg.startswith(str(hostile))
    if where:
        assert "could not load it as a sentence-transformers model" in msg
    else:
        assert "config.json: auto_map" in msg and "never runs code from a model folder" in msg
