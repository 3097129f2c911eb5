"""MTEB through the real ``mteb`` package on tiny local copies of two real task formats.

BelebeleRetrieval (hub layout: one config per language, passages and questions linked by
``link``; subsets ``deu_Latn-eng_Latn`` = German passages, English questions and the reverse)
and STS22 (a ``datasets`` save of its single ``default`` config with a ``lang`` column; subsets
``de`` and ``de-en``), built from the demo XQuAD-R questions and sentences. mteb loads and scores
them itself; the tests check its numbers against a hand computation on the same embeddings and
that every text reaches the model with its language and kind.
"""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
import torch

mteb = pytest.importorskip(
    "mteb", reason="the mteb extra is not installed (pip install -e '.[mteb]')"
)

from datasets import Dataset, DatasetDict  # noqa: E402

from evaluators.mteb_eval import result_rows, run_mteb  # noqa: E402
from evaluators.mteb_tasks import load_tasks, local_copy, parse_tasks  # noqa: E402
from evaluators.mteb_translate import task_sources  # noqa: E402
from lira.data import demo_path  # noqa: E402
from lira.data.xquad_r import load_xquad_r  # noqa: E402
from lira.errors import MissingFileError, UserInputError  # noqa: E402
from lira.metrics import sts_correlations  # noqa: E402
from lira.mteb_encoder import MTEBEncoder, iso1  # noqa: E402

N = 6
BELE = "BelebeleRetrieval:deu_Latn-eng_Latn+eng_Latn-deu_Latn"
STS = "STS22:de+de-en"


@pytest.fixture(scope="module")
def parallel():
    """N questions with distinct gold sentences, in German and English (demo XQuAD-R)."""
    ds = load_xquad_r(demo_path(), ["en", "de"])
    picked, golds = [], set()
    for q in ds.question_ids:
        g = ds.gold_sentence("en", q).text
        if g not in golds:
            picked.append(q)
            golds.add(g)
        if len(picked) == N:
            break
    return {
        lang: {
            "q": [ds.question(lang, q).text for q in picked],
            "p": [ds.gold_sentence(lang, q).text for q in picked],
        }
        for lang in ("de", "en")
    }


def _belebele(root, par):
    """BelebeleRetrieval as its hub repo holds it: configs deu_Latn / eng_Latn, split test."""
    folder = root / "BelebeleRetrieval"
    lines = ["---", "configs:"]
    for cfg, lang in (("deu_Latn", "de"), ("eng_Latn", "en")):
        rows = [{"link": f"https://example.org/{i}", "question_number": 1,
                 "flores_passage": par[lang]["p"][i], "question": par[lang]["q"][i],
                 "mc_answer1": "a", "mc_answer2": "b", "mc_answer3": "c", "mc_answer4": "d",
                 "correct_answer_num": "1", "dialect": cfg, "ds": "2023-05-03"}
                for i in range(N)]  # fmt: skip
        (folder / cfg).mkdir(parents=True)
        Dataset.from_list(rows).to_parquet(str(folder / cfg / "test.parquet"))
        lines += [f"- config_name: {cfg}", "  data_files:", "  - split: test",
                  f"    path: {cfg}/test.parquet"]  # fmt: skip
    (folder / "README.md").write_text("\n".join([*lines, "---", ""]), encoding="utf-8")


def sts_pairs(par):
    """{subset: (sentence1, sentence2, score)} of the tiny STS22: a German question with its own
    gold sentence (``de``) or its English original (``de-en``) scores 4, with another one's 1-2."""
    other = [i if i % 2 == 0 else (i + 1) % N for i in range(N)]
    score = [4.0 if j == i else 1.0 + 0.5 * (i % 3) for i, j in enumerate(other)]
    de = par["de"]["q"]
    return {
        "de": (de, [par["de"]["p"][j] for j in other], score),
        "de-en": (de, [par["en"]["q"][j] for j in other], score),
    }


def _sts22(root, par):
    """STS22 as a ``datasets`` save of its hub config ``default`` (mteb groups by ``lang``)."""
    rows = [{"id": f"{lang}-{i}", "score": s, "sentence1": a, "sentence2": b, "lang": lang}
            for lang, (s1, s2, sc) in sts_pairs(par).items()
            for i, (a, b, s) in enumerate(zip(s1, s2, sc))]  # fmt: skip
    DatasetDict({"test": Dataset.from_list(rows)}).save_to_disk(str(root / "STS22" / "default"))


@pytest.fixture(scope="module")
def tiny(tmp_path_factory, parallel):
    root = tmp_path_factory.mktemp("mteb-data")
    _belebele(root, parallel)
    _sts22(root, parallel)
    return root


@pytest.fixture(scope="module")
def backbone(models_config):
    from lira.models import load_backbone

    return load_backbone(models_config)


class Spy:
    """Wraps an encoder; records (text, lang, kind) of every text it is given."""

    def __init__(self, encoder):
        self.encoder, self.seen = encoder, []

    def encode(self, texts, langs=None, kind="query", batch_size=32):
        langs = langs or [None] * len(texts)
        self.seen += list(zip(texts, langs, [kind] * len(texts)))
        return self.encoder.encode(texts, langs=langs, kind=kind, batch_size=batch_size)


def expected_languages(par):
    """(text, lang, kind) every text must arrive with, per the tasks' metadata."""
    want = set()
    for d in (0, 1):  # deu_Latn-eng_Latn: German passages, English questions; and the reverse
        doc, q = ("de", "en") if d == 0 else ("en", "de")
        want |= {(t, doc, "document") for t in par[doc]["p"]}
        want |= {(t, q, "query") for t in par[q]["q"]}
    for subset, (s1, s2, _) in sts_pairs(par).items():
        l1, l2 = ("de", "de") if subset == "de" else ("de", "en")
        want |= {(t, l1, "query") for t in s1} | {(t, l2, "query") for t in s2}
    return want


def hand_scores(encoder, par):
    """nDCG@10 per Belebele subset and cosine Pearson/Spearman per STS22 subset, by hand."""
    out = {}
    for subset, (doc, q) in {"deu_Latn-eng_Latn": ("de", "en"),
                             "eng_Latn-deu_Latn": ("en", "de")}.items():  # fmt: skip
        d = encoder.encode(par[doc]["p"], langs=[doc] * N, kind="document")
        e = encoder.encode(par[q]["q"], langs=[q] * N, kind="query")
        sims = np.asarray(e) @ np.asarray(d).T  # rows L2-normalised: cosine
        ranks = [1 + int((sims[i] > sims[i, i]).sum()) for i in range(N)]  # gold of i is i
        out[("BelebeleRetrieval", subset, "ndcg@10")] = 100 * float(
            np.mean([1 / math.log2(r + 1) if r <= 10 else 0.0 for r in ranks])
        )
    for subset, (s1, s2, gold) in sts_pairs(par).items():
        l1, l2 = ("de", "de") if subset == "de" else ("de", "en")
        a = np.asarray(encoder.encode(s1, langs=[l1] * N, kind="query"))
        b = np.asarray(encoder.encode(s2, langs=[l2] * N, kind="query"))
        cos = (a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        corr = sts_correlations(cos, gold)  # lira.metrics on the same pairs
        out[("STS22", subset, "pearson")] = corr["pearson"]
        # Spearman ranks cosines: values equal up to float rounding (e.g. a translation that is
        # the English sentence itself gives cos = 1/N for several pairs) rank in an order that
        # float32 (mteb) and float64 (here) break differently, so it is only compared without them
        c = np.sort(np.asarray(cos, dtype=np.float64))
        if not np.any(np.diff(c) < 1e-5):
            out[("STS22", subset, "spearman")] = corr["spearman"]
    return out


def check(rows, method, want):
    got = {(r["scenario"], r["language"], r["metric"]): r["value"]
           for r in rows if r["method"] == method}  # fmt: skip
    for key, value in want.items():
        assert got[key] == pytest.approx(value, abs=1e-3), key
    for task, metric in (("BelebeleRetrieval", "ndcg@10"), ("STS22", "pearson")):
        subs = [v for (t, s, m), v in want.items() if t == task and m == metric]
        assert got[(task, "all", metric)] == pytest.approx(np.mean(subs), abs=1e-3)
    return got


# ------------------------------------------------------------------------------ unit


def test_language_codes_and_task_spec():
    assert [iso1(x) for x in ("deu-Latn", "cmn-Hans", "zsm_Latn", "ben-Beng", "eng")] == [
        "de", "zh", "ms", "bn", "en"]  # fmt: skip
    assert parse_tasks("A, B:x+y,") == [("A", None), ("B", ["x", "y"])]
    with pytest.raises(UserInputError, match="names no task"):
        parse_tasks(" , ")
    with pytest.raises(UserInputError, match="unknown MTEB task 'NoSuchTask'"):
        load_tasks("NoSuchTask")
    with pytest.raises(UserInputError, match="STS22 has no subset \\['xx-yy'\\]"):
        load_tasks("STS22:xx-yy")


def test_adapter_languages_follow_the_subset_metadata():
    """Two-language subsets: Belebele/MLQA list [document, query]; STS: sentence1, sentence2."""
    ad = MTEBEncoder(None, "x")
    bele = mteb.get_task("BelebeleRetrieval").metadata
    mlqa = mteb.get_task("MLQARetrieval").metadata
    sts = mteb.get_task("STS22").metadata
    assert ad.text_languages(bele, "test", "deu_Latn-eng_Latn", "document", 2) == ["de", "de"]
    assert ad.text_languages(bele, "test", "deu_Latn-eng_Latn", "query", 1) == ["en"]
    assert ad.text_languages(mlqa, "test", "ara-deu", "query", 1) == ["de"]
    assert ad.text_languages(sts, "test", "de-en", None, 1) == ["de"]  # sentence1
    assert ad.text_languages(sts, "test", "de-en", None, 1) == ["en"]  # sentence2
    assert ad.text_languages(sts, "test", "de", None, 1) == ["de"]


def test_local_copy_layouts(tmp_path, tiny):
    bele = mteb.get_task("BelebeleRetrieval")
    assert local_copy(bele, tiny, tmp_path) == tiny / "BelebeleRetrieval"  # hub repo copy
    sts = local_copy(mteb.get_task("STS22"), tiny, tmp_path)  # save_to_disk -> hub layout
    assert sts == tmp_path / "mteb_data" / "STS22" and (sts / "README.md").is_file()
    # a Hugging Face hub cache: datasets--<org>--<repo>/snapshots/<revision>/
    xq = mteb.get_task("XQuADRetrieval")
    snap = (tmp_path / "hub" / "datasets--mteb--XQuADRetrieval" / "snapshots"
            / xq.metadata.dataset["revision"])  # fmt: skip
    snap.mkdir(parents=True)
    (snap / "README.md").write_text("---\n---\n", encoding="utf-8")
    assert local_copy(xq, tmp_path / "hub", tmp_path) == snap
    with pytest.raises(
        MissingFileError, match="hf download mteb/MLQARetrieval --repo-type dataset"
    ):
        local_copy(mteb.get_task("MLQARetrieval"), tmp_path / "hub", tmp_path)


# ------------------------------------------------------------------------------ end to end


@pytest.mark.slow
def test_backbone_through_mteb_equals_hand_computation(tmp_path, tiny, parallel, backbone):
    tasks = load_tasks([BELE, STS], tiny, work_dir=tmp_path)
    spy = Spy(backbone)
    rows = run_mteb({"backbone": spy}, tasks, tmp_path / "out", batch_size=4)
    assert set(spy.seen) == expected_languages(parallel)
    got = check(rows, "backbone", hand_scores(backbone, parallel))
    print("tiny-task scores (backbone):", json.dumps({"/".join(k): round(v, 2)
                                                       for k, v in got.items()}))  # fmt: skip
    # mteb wrote its own result files, with the same main scores
    res = tmp_path / "out" / "results" / "lira__backbone" / "local"
    saved = json.loads((res / "STS22.json").read_text(encoding="utf-8"))
    by = {s["hf_subset"]: s for s in saved["scores"]["test"]}
    assert 100 * by["de-en"]["cosine_pearson"] == pytest.approx(got[("STS22", "de-en", "pearson")])
    assert (res / "BelebeleRetrieval.json").is_file()


@pytest.fixture(scope="module")
def lira_folder(tmp_path_factory, models_config, parallel):
    """A saved LiRA model (fresh Arca on the demo models) whose store holds two reference
    translations of every German text of the tiny tasks."""
    from lasr.model import LiRAModel
    from lira.translation.config import TranslationConfig
    from lira.translation.store import TranslationStore, reference_translator
    from pipeline.runconfig import RunConfig

    tmp = tmp_path_factory.mktemp("lira-mteb")
    store = TranslationStore(tmp / "translations.sqlite")
    a, b = reference_translator("ref-a"), reference_translator("ref-b")
    de = parallel["de"]["q"] + parallel["de"]["p"]
    en = parallel["en"]["q"] + parallel["en"]["p"]
    store.add_reference(a, [(d, "de", e, None) for d, e in zip(de, en)])
    store.add_reference(b, [(d, "de", e.lower(), None) for d, e in zip(de, en)])
    cfg = RunConfig(output_dir=str(tmp), models=dataclasses.replace(models_config),
                    translation=TranslationConfig(mt_translators=[a, b], num_candidates=2))  # fmt: skip
    cfg.translation.critic.kind = "none"
    cfg.lasr.fusion_dim, cfg.lasr.fusion_layers = 32, 1
    torch.manual_seed(0)
    model = LiRAModel.from_config(cfg, None, store=store)
    model.save_pretrained(tmp / "lira-model")
    return tmp / "lira-model", {d: {e, e.lower()} for d, e in zip(de, en)}


@pytest.mark.slow
def test_lira_eval_mteb_cli_languages_translation_and_scores(
    tmp_path, tiny, parallel, lira_folder, monkeypatch, capsys
):
    """`lira eval configs/demo.yaml --mteb …` on a LiRA model: every text arrives with its
    language, German texts are translated from the store and the Actor picks a candidate, and
    mteb's scores equal the hand computation."""
    from lasr.model import LiRAModel
    from pipeline.cli import main

    folder, translations = lira_folder
    seen, chosen = [], []
    encode, english = LiRAModel.encode, LiRAModel.english_texts

    def spy_encode(self, texts, langs=None, kind="query", batch_size=32, **kw):
        seen.extend(zip(texts, langs or [None] * len(texts), [kind] * len(texts)))
        return encode(self, texts, langs, kind=kind, batch_size=batch_size, **kw)

    def spy_english(self, texts, langs, train=False):
        out = english(self, texts, langs, train)
        chosen.extend(zip(texts, langs, out[0]))
        return out

    monkeypatch.setattr(LiRAModel, "encode", spy_encode)
    monkeypatch.setattr(LiRAModel, "english_texts", spy_english)
    code = main(["eval", "configs/demo.yaml", "--output-dir", str(tmp_path), f"eval.model={folder}",
                 "--mteb", f"{BELE},{STS}", "--mteb-data", str(tiny)])  # fmt: skip
    assert code == 0
    assert "eval/mteb/leaderboard.md" in capsys.readouterr().out
    assert set(seen) == expected_languages(parallel)
    for text, lang, english_text in chosen:
        if lang == "de":  # translated: the Actor's choice among the two stored candidates
            assert english_text in translations[text]
        else:
            assert english_text == text  # English is embedded as is
    assert {lang for _, lang, _ in chosen} == {"de", "en"}
    rows = json.loads((tmp_path / "eval" / "mteb" / "results.json").read_text(encoding="utf-8"))
    monkeypatch.setattr(LiRAModel, "encode", encode)
    monkeypatch.setattr(LiRAModel, "english_texts", english)
    got = check(rows, "lira", hand_scores(LiRAModel.from_pretrained(folder), parallel))
    print("tiny-task scores (lira):", json.dumps({"/".join(k): round(v, 2)
                                                   for k, v in got.items()}))  # fmt: skip
    assert (tmp_path / "eval" / "mteb" / "results" / "lira__lira" / "local"
            / "BelebeleRetrieval.json").is_file()  # fmt: skip


# ------------------------------------------------------------------------------ translate, compare


def test_translate_mteb_collects_every_non_english_text(tmp_path, tiny, parallel):
    """`lira translate CONFIG --mteb …` fills the store with exactly the texts (and languages)
    a LiRA model is given on the tasks; English is never translated."""
    from lira.translation.store import TranslationStore, reference_translator
    from pipeline.cli import main

    tasks = load_tasks([BELE, STS], tiny, work_dir=tmp_path)
    sources = task_sources(tasks, tmp_path)
    german = {t for t, lang, _ in expected_languages(parallel) if lang == "de"}
    assert set(sources) == {"de"} and set(sources["de"]) == german
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        "translation:\n  num_candidates: 1\n  critic: {kind: none}\n"
        "  mt_translators: [{name: ref, kind: reference, role: mt}]\n",
        encoding="utf-8",
    )
    out = tmp_path / "run"
    with TranslationStore(out / "translations.sqlite") as store:  # one text already translated
        store.add_reference(reference_translator("ref"), [(sorted(german)[0], "de", "x", None)])
    code = main(["translate", str(cfg), "--output-dir", str(out), "--mteb", f"{BELE},{STS}",
                 "--mteb-data", str(tiny)])  # fmt: skip
    assert code == 0
    summary = json.loads((out / "translate_mteb_summary.json").read_text(encoding="utf-8"))
    assert summary["sources"] == len(german) and summary["reused"] == 1
    assert summary["mteb_tasks"] == ["BelebeleRetrieval", "STS22"]


def _lazretrieval(root, par):
    """A released split (train/, test/) of two countries, German text standing in."""
    texts = par["de"]["q"] + par["en"]["q"]
    for split, ids in (("train", range(0, 6)), ("test", range(6, 12))):
        rows = {"query": [], "item": [], "pairs_info": []}
        for i in ids:
            nation = "BD" if i % 2 else "VN"
            rows["query"].append({"ID": f"Q{i}", "nation": nation, "text": texts[i]})
            rows["item"].append({"item_id": f"C{i}", "nation": nation,
                                 "text": (par["de"]["p"] + par["en"]["p"])[i]})  # fmt: skip
            rows["pairs_info"].append({"query_id": f"Q{i}", "item_id": f"C{i}", "rscore": "1.0"})
        (root / split).mkdir(parents=True)
        for name, r in rows.items():
            (root / split / f"{name}.json").write_text(json.dumps(r), encoding="utf-8")


@pytest.mark.slow
def test_compare_lazretrieval_mteb_and_paper_tables(tmp_path, tiny, parallel, models_config,
                                                    capsys):  # fmt: skip
    """`lira compare` on LazRetrieval's released test split, then on MTEB tasks with
    --paper-tables: Table 1 and Table 2 rows of this run are filled, the rest is '—'."""
    from pipeline.cli import main

    _lazretrieval(tmp_path / "laz", parallel)
    cfg = tmp_path / "cfg.yaml"
    cfg.write_text(
        f"output_dir: {tmp_path / 'run'}\n"
        f"models: {{backbone: demo:minilm, encoder: demo:mt5, cache_dir: '{models_config.cache_dir}',"
        " backbone_max_length: 64, encoder_max_length: 64}\n"
        f"data: {{format: lazretrieval, path: '{tmp_path / 'laz'}', train_languages: [bn, vi],"
        " eval_languages: [bn, vi]}\n"
        "baselines: {methods: []}\neval: {bootstrap: 0, batch_size: 16}\n",
        encoding="utf-8",
    )
    assert main(["compare", str(cfg)]) == 0
    assert "released split" in capsys.readouterr().out
    assert main(["compare", str(cfg), "--mteb", f"{BELE},{STS}", "--mteb-data", str(tiny),
                 "--paper-tables"]) == 0  # fmt: skip
    printed = capsys.readouterr().out
    rows = json.loads((tmp_path / "run" / "compare" / "leaderboard.json").read_text("utf-8"))
    rows += json.loads(
        (tmp_path / "run" / "compare" / "mteb" / "leaderboard.json").read_text("utf-8")
    )
    v = {(r["scenario"], r["language"], r["metric"]): r["value"] for r in rows
         if r["method"] == "backbone"}  # fmt: skip
    line = next(x for x in printed.splitlines() if x.startswith("| demo:minilm (this run"))
    bd, vn = v[("lazretrieval", "bn", "ndcg@10")], v[("lazretrieval", "vi", "ndcg@10")]
    assert (
        line
        == f"| demo:minilm (this run: backbone) | {bd:.2f} | — | — | — | — | — | {vn:.2f} | — |"
    )
    t2 = [x for x in printed.splitlines() if x.startswith("| demo:minilm (this run")][1]
    bele, sts = v[("BelebeleRetrieval", "all", "ndcg@10")], v[("STS22", "all", "pearson")]
    assert t2 == f"| demo:minilm (this run: backbone) | — | {bele:.2f} | {sts:.2f} | — |"
    assert "| QWEN3-E-8B | — | — | — | — | — | — | — | — |" in printed
    assert (tmp_path / "run" / "compare" / "paper_tables.md").read_text("utf-8") in printed


# ------------------------------------------------------------------------------ mteb.evaluate


@pytest.mark.slow
def test_mteb_evaluate_on_a_loaded_lira_model_equals_lira_eval(tmp_path, tiny, lira_folder):
    """Issue 40: ``mteb.evaluate(LiRAModel.from_pretrained(folder), tasks)`` as users call it
    (no adapter) gives each text its task language, reports a ModelMeta, and scores exactly what
    ``lira eval --mteb`` (run_mteb through the evaluators' adapter) scores."""
    from lasr.model import LiRAModel

    folder, _ = lira_folder
    tasks = load_tasks([BELE, STS], tiny, work_dir=tmp_path)
    model = LiRAModel.from_pretrained(folder)
    model.card = {"languages": ["de", "en"], "data": {"dataset": "xquad-r"}}
    meta = model.mteb_model_meta
    assert meta.languages == ["deu-Latn", "eng-Latn"] and meta.embed_dim == model.dim
    assert meta.n_parameters == sum(p.numel() for p in model.parameters()) > 0
    assert "PyTorch" in meta.framework and meta.training_datasets == {"xquad-r"}
    result = mteb.evaluate(model, tasks, cache=None, co2_tracker=False, show_progress_bar=False)
    got = [r for tr in result.task_results for r in result_rows("lira", tr)]
    want = run_mteb({"lira": LiRAModel.from_pretrained(folder)}, tasks, tmp_path / "eval")
    assert {(r["scenario"], r["language"], r["metric"]) for r in got} == {
        (r["scenario"], r["language"], r["metric"]) for r in want
    }
    key = {(r["scenario"], r["language"], r["metric"]): r["value"] for r in want}
    for r in got:
        assert r["value"] == pytest.approx(key[(r["scenario"], r["language"], r["metric"])],
                                           abs=1e-6)  # fmt: skip
    assert model.missing_translations == 0  # German texts were looked up as German
