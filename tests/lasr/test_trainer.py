"""LaSR training on demo XQuAD-R: retrieval and rank tasks improve held-out metrics over the
Arca-only start, every Table 5 ablation trains and evaluates, resume is exact, the engine runs."""

from __future__ import annotations

import dataclasses
import logging
import random
import shutil

import pytest
import torch

import lasr.losses
from lasr.banks import PER_QUERY
from lasr.config import LaSRConfig
from lasr.engine import run_lasr
from lasr.model import LiRAModel
from lasr.trainer import LaSRTrainer
from lira.checkpoint.folders import latest_checkpoint
from lira.config import DataConfig
from lira.data.splits import load_splits
from lira.data.types import PairData, RetrievalData
from lira.data.xquad_r import plain_qid
from lira.translation.config import TranslationConfig
from lira.translation.store import TranslationStore, key_for, reference_translator
from lira.translation.types import NEUTRAL_SCORE
from pipeline.runconfig import RunConfig

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def demo(tmp_path_factory, models_config):
    """Demo model (MiniLM backbone, demo mT5 encoder, fresh Arca, no translation store) and the
    German demo XQuAD-R split: German questions -> English sentence pool, held-out by id."""
    tmp = tmp_path_factory.mktemp("lasr")
    splits = load_splits(DataConfig(train_languages=["de"], eval_languages=["de"]))
    models = dataclasses.replace(models_config, backbone="demo:minilm", backbone_pooling="mean")
    cfg = RunConfig(output_dir=str(tmp), models=models)
    torch.manual_seed(0)
    model = LiRAModel.from_config(cfg, None)
    adaptor = {k: v.clone() for k, v in model.arca.adaptor.state_dict().items()}
    return model, splits.train, splits.eval, tmp, adaptor


def _pairs(data: RetrievalData, seed: int = 0, lang2: str = "en") -> PairData:
    """Graded (question, sentence) pairs: 2 = gold sentence, 1 = same paragraph, 0 = elsewhere."""
    rng = random.Random(seed)
    docs = {d.id: d for d in data.corpus}
    para: dict[str, list] = {}
    for d in data.corpus:  # sentence ids are en:<article>:<paragraph>:<sentence>
        para.setdefault(d.id.rsplit(":", 1)[0], []).append(d)
    s1, s2, sc = [], [], []
    for q in data.queries:
        gold = next(d for d, v in data.qrels[q.id].items() if v > 0 and d in docs)
        same = [d for d in para[gold.rsplit(":", 1)[0]] if d.id != gold]
        other = rng.choice(
            [d for d in data.corpus if d.id.rsplit(":", 1)[0] != gold.rsplit(":", 1)[0]]
        )
        for d, s in [(docs[gold], 2.0), *([(rng.choice(same), 1.0)] if same else []), (other, 0.0)]:
            s1.append(q.text)
            s2.append(d.text)
            sc.append(s)
    return PairData(s1, s2, sc, ["de"] * len(s1), [lang2] * len(s1))


def _subset(data: RetrievalData, n: int) -> RetrievalData:
    """The first ``n`` queries with their gold sentences plus 40 other sentences."""
    queries = data.queries[:n]
    gold = {d for q in queries for d in data.qrels[q.id]}
    corpus = [d for d in data.corpus if d.id in gold]
    corpus += [d for d in data.corpus if d.id not in gold][:40]
    return RetrievalData(queries, corpus, data.qrels)


def _fresh(model: LiRAModel, cfg: LaSRConfig, adaptor: dict) -> LiRAModel:
    """The demo model with a fresh head for ``cfg`` and Arca's starting Adaptor."""
    torch.manual_seed(cfg.seed)
    model.arca.adaptor.load_state_dict(adaptor)
    model.set_head(cfg)
    return model


SMALL = dict(
    batch_size=16, fusion_dim=64, fusion_layers=1, ema_decay=0.95, log_every=1000, save_every=1000
)


def test_retrieval_task_beats_arca_only_on_held_out(demo):
    model, train, held, tmp, adaptor = demo
    cfg = LaSRConfig(steps=100, lr=5e-5, **SMALL)
    tr = LaSRTrainer(cfg, _fresh(model, cfg, adaptor), tmp / "r", retrieval=train)
    before = tr.evaluate(held)["retrieval"]
    tr.train()
    after = tr.evaluate(held)["retrieval"]
    print("retrieval held-out", before, after)
    # held-out over the whole sentence pool: the soft loss saturates near 1 there (hundreds of
    # candidates at τ = 0.1), so the true nDCG@10 is what must rise
    assert after["ndcg@10"] > before["ndcg@10"] + 0.05


def test_rank_task_raises_held_out_pearson(demo):
    model, train, held, tmp, adaptor = demo
    cfg = LaSRConfig(steps=100, lr=1e-4, **SMALL)
    # the sentences are given as language "xx" (unknown): an English *query* is embedded by the
    # backbone alone (gate r = 0), so only the foreign side's E_lr would enter the pair score
    pairs = _pairs(train, lang2="xx")
    tr = LaSRTrainer(cfg, _fresh(model, cfg, adaptor), tmp / "p", pairs=pairs)
    hp = _pairs(held, seed=1, lang2="xx")
    before = tr.evaluate(pairs=hp)["rank"]
    tr.train()
    after = tr.evaluate(pairs=hp)["rank"]
    print("rank held-out", before, after)
    assert after["pearson"] > before["pearson"]


@pytest.mark.parametrize(
    "flag",
    [
        "use_llm_critic",
        "use_embedding_critic",
        "use_translations",
        "use_multilingual_encoder",
        "use_queue",
    ],
)
def test_each_ablation_trains_evaluates_and_masks_what_it_removes(demo, flag):
    """Every Table 5 ablation trains and evaluates, and changes the gate features it should:
    no LLM critic -> the chosen candidate's critic scores read neutral 5.5 (not the stored
    ones), no embedding critic -> its sim reads 0, no translations -> nothing translated.
    The critic switches are Arca's (``arca.use_*``: the Actor was trained without them)."""
    model, train, held, tmp, adaptor = demo
    arca_flag = flag in ("use_llm_critic", "use_embedding_critic")
    lasr_off = {} if arca_flag else {flag: False}
    cfg = LaSRConfig(steps=4, lr=1e-4, corr_min=8, **{**SMALL, "batch_size": 8}, **lasr_off)
    arca_cfg = model.arca.arca_cfg
    small, small_held = _subset(train, 24), _subset(held, 8)
    # two stored candidates per question, so the Actor (and its critic ablations) selects
    refs = [reference_translator("ref-a"), reference_translator("ref-b")]
    store = TranslationStore(tmp / f"{flag}.sqlite")
    critic = [(9, 8, 7), (2, 3, 4)]  # stored critic scores of ref-a and ref-b
    qs = small.queries + small_held.queries
    for k, ref in enumerate(refs):
        store.add_reference(ref, [(q.text, q.lang, f"{q.text} ({k})", q.id) for q in qs])
        store.write_scores([
            (key_for(q.text, q.lang, ref),
             dict(zip(("semantic", "emotional", "pragmatic"), critic[k]), critic_status="ok"))
            for q in qs
        ])  # fmt: skip
    model.store = store
    model.translation_cfg = TranslationConfig(mt_translators=refs, num_candidates=2)
    if arca_flag:
        model.arca.arca_cfg = dataclasses.replace(arca_cfg, **{flag: False})
    try:
        model._memo.clear()  # streams of another selection setting
        fresh = _fresh(model, cfg, adaptor)
        tr = LaSRTrainer(cfg, fresh, tmp / flag, retrieval=small, pairs=_pairs(small))
        assert tr.task == "both"
        hist = tr.train()
        out = tr.evaluate(small_held, _pairs(small_held))
        picked, _, _ = model.english_texts([small.queries[0].text], ["de"])
        gate = model.streams([small.queries[0].text], ["de"]).feats[0]  # [9]
    finally:
        model.store, model.translation_cfg = None, TranslationConfig()
        model.arca.arca_cfg = arca_cfg
        model._memo.clear()
        store.close()
    translated = picked[0] != small.queries[0].text
    assert translated == (flag != "use_translations") and gate[3] == float(translated)
    stored = critic[int(picked[0].endswith("(1)"))] if translated else (NEUTRAL_SCORE,) * 3
    neutral = flag in ("use_llm_critic", "use_translations")
    want = torch.tensor((NEUTRAL_SCORE,) * 3 if neutral else stored) / 10
    torch.testing.assert_close(gate[4:7], want)
    assert (gate[7] == 0) == (flag in ("use_embedding_critic", "use_translations"))
    assert len(hist) == 4 and all(torch.isfinite(torch.tensor(h["retrieval"])) for h in hist)
    assert 0 <= out["retrieval"]["ndcg@10"] <= 1 and -1 <= out["rank"]["pearson"] <= 1
    if flag == "use_queue":
        assert len(tr.doc_queue) == 0 and len(tr.corr_queue) == 0
    else:
        assert len(tr.doc_queue) > 0


def test_resume_is_exact(demo):
    model, train, _, tmp, adaptor = demo
    small = _subset(train, 32)
    pairs = _pairs(small)
    cfg = LaSRConfig(
        steps=6, lr=1e-3, dropout=0.1, corr_min=8, **{**SMALL, "batch_size": 8, "save_every": 3}
    )
    a = LaSRTrainer(cfg, _fresh(model, cfg, adaptor), tmp / "resume", retrieval=small, pairs=pairs)
    a.train()
    want = {k: v.clone() for k, v in a.net.state_dict().items()}
    last = latest_checkpoint(tmp / "resume" / "lasr")
    assert last is not None and last.name == "step-00000006"
    shutil.rmtree(last)
    b = LaSRTrainer(
        cfg,
        _fresh(model, dataclasses.replace(cfg, seed=5), adaptor),
        tmp / "resume",
        retrieval=small,
        pairs=pairs,
    )
    b.train(resume=True)  # the trainer contract: continue from step-00000003
    assert b.step == 6
    for k, v in b.net.state_dict().items():
        assert torch.equal(v, want[k]), k


@pytest.mark.parametrize("train_adaptor", [True, False])
def test_end_to_end_lasr_trains_the_adaptor(demo, train_adaptor):
    """App. D.1: "the LaSR module is trained end-to-end" — LaSR's Adaptor (its own copy of
    Arca's) moves with lasr.train_adaptor and stays as Arca left it without; Arca's own, which
    scores the candidates the gate's features come from, never moves."""
    model, train, _, tmp, adaptor = demo
    cfg = LaSRConfig(steps=5, lr=1e-3, adaptor_lr=1e-3, train_adaptor=train_adaptor, **SMALL)
    tr = LaSRTrainer(cfg, _fresh(model, cfg, adaptor), tmp / f"e2e{train_adaptor}",
                     retrieval=_subset(train, 32))  # fmt: skip
    tr.train()
    tr.finalize()
    after = model.net.adaptor.state_dict()
    changed = [k for k in adaptor if not torch.equal(adaptor[k], after[k])]
    assert bool(changed) == train_adaptor, changed
    arca = model.arca.adaptor.state_dict()
    assert all(torch.equal(adaptor[k], arca[k]) for k in adaptor)
    assert not any(p.requires_grad for p in model.parameters())  # finalize freezes


def test_run_lasr_engine_writes_loadable_model(tmp_path, models_config, caplog):
    data = DataConfig(
        train_languages=["de"],
        eval_languages=["de"],
        max_train_queries=24,
        max_eval_queries=8,
        dev_fraction=0.1,
        max_dev_queries=8,
    )
    splits = load_splits(data)
    ref = reference_translator("ref")
    store = TranslationStore(tmp_path / "translations.sqlite")
    en = {q: splits.dataset.question("en", q).text for q in splits.train_ids + splits.eval_ids}
    store.add_reference(
        ref, [(r.text, "de", en[plain_qid(r.id)], r.id) for r in splits.train_sources]
    )
    store.close()
    models = dataclasses.replace(models_config, backbone="demo:minilm", backbone_pooling="mean")
    cfg = RunConfig(
        output_dir=str(tmp_path),
        models=models,
        data=data,
        translation=TranslationConfig(mt_translators=[ref], num_candidates=1),
        lasr=LaSRConfig(steps=3, task="retrieval", **{**SMALL, "batch_size": 8}),
    )
    with caplog.at_level(logging.WARNING, logger="lasr.engine"):
        summary = run_lasr(cfg, resume=False)
    assert summary["steps"] == 3 and "ndcg@10" in summary["after"]["retrieval"]
    # train questions were translated through the store, validation ones were not; LaSR never
    # looks at the test questions (lira compare's)
    missing, total = summary["missing_translations"], summary["translation_lookups"]
    assert splits.dev is not None and summary["after"]["retrieval"]["queries"] == 8
    # + the German sentences of the validation pools (En→L, Multi), looked up once each
    de_docs = len({r.text for r in splits.dataset.sentences("de")})
    assert missing == 8 + de_docs and total == 8 + 24 + de_docs
    assert summary["fixed_fusion"]["foreign"]["weights"] and summary["selected_step"] in (0, 3)
    assert f"LaSR: {missing} of {total} non-English texts have no stored translation" in caplog.text
    loaded = LiRAModel.from_pretrained(tmp_path / "lira-model")
    assert loaded.english_texts([splits.train_sources[0].text], ["de"])[0] == [
        en[plain_qid(splits.train_sources[0].id)]
    ]
    z = loaded.encode([splits.train_sources[0].text], ["de"])
    assert z.shape == (1, loaded.dim)


def test_gate_features_are_the_same_in_training_and_after_loading(tmp_path, models_config):
    """The anchor similarity among the gate features is Arca's (LaSR trains its own copy of the
    Adaptor), so a saved model sees exactly the features its head was trained on."""
    data = DataConfig(train_languages=["de"], eval_languages=["de"], max_train_queries=16)
    splits = load_splits(data)
    ref = reference_translator("ref")
    store = TranslationStore(tmp_path / "translations.sqlite")
    en = {q: splits.dataset.question("en", q).text for q in splits.train_ids}
    store.add_reference(
        ref, [(r.text, "de", en[plain_qid(r.id)], r.id) for r in splits.train_sources]
    )
    models = dataclasses.replace(models_config, backbone="demo:minilm", backbone_pooling="mean")
    cfg = RunConfig(output_dir=str(tmp_path), models=models, data=data,
                    translation=TranslationConfig(mt_translators=[ref], num_candidates=1))  # fmt: skip
    torch.manual_seed(0)
    model = LiRAModel.from_config(cfg, None, store=store)
    lc = LaSRConfig(steps=4, lr=1e-2, adaptor_lr=1e-2, task="retrieval", **SMALL)
    model.set_head(lc)
    tr = LaSRTrainer(lc, model, tmp_path, retrieval=_subset(splits.train, 16))
    tr.train()
    saved = tr.finalize()
    keys = [q.id for q in splits.train.queries[:16]]
    trained = tr.qbank.rows(keys).feats
    assert trained[:, 7].abs().sum() > 0  # sim is there to compare
    loaded = LiRAModel.from_pretrained(saved, store=store)
    texts = [q.text for q in splits.train.queries[:16]]
    assert torch.equal(loaded.streams(texts, ["de"] * 16).feats, trained)
    moved = loaded.net.adaptor.state_dict()
    arca = loaded.arca.adaptor.state_dict()
    assert any(not torch.equal(moved[k], arca[k]) for k in moved)  # LaSR's Adaptor trained


def test_fixed_fusion_start_english_floor_and_selection(demo, tmp_path):
    """fusion_init=validation: step 0 is the validation-best fixed fusion (never below any block
    alone, the backbone included, on English queries); a checkpoint whose English queries fall
    below the backbone is never kept, nor one whose gain is noise on the validation questions
    (paired lower bound <= 0), a better one is, and finalize saves the kept weights."""
    model, _, _, _, adaptor = demo
    splits = load_splits(DataConfig(train_languages=["en", "de"], eval_languages=["de"],
                                    dev_fraction=0.2, max_dev_queries=12))  # fmt: skip
    cfg = LaSRConfig(steps=2, lr=1e-3, task="retrieval", **SMALL)
    tr = LaSRTrainer(cfg, _fresh(model, cfg, adaptor), tmp_path, retrieval=_subset(splits.train, 24),
                     eval_retrieval=splits.dev)  # fmt: skip
    en, foreign = tr.fits["en"], tr.fits["foreign"]
    assert en.score >= max(en.parts.values()) - 1e-9
    assert foreign.score >= max(foreign.parts.values()) - 1e-9
    assert tr.english_floor == en.parts["en"]  # the backbone alone on English queries
    step0 = tr.evaluate(splits.dev)["retrieval"]
    assert abs(step0["by_lang"]["en"] - en.score) < 1e-6  # step 0 ranks as the fitted fusion
    assert abs(step0["by_lang"]["de"] - foreign.by_lang["de"]) < 1e-6
    assert tr.consider(0, {"retrieval": step0}) and tr.best["step"] == 0
    worse_en = {
        **step0,
        "macro": 1.0,
        "by_lang": {**step0["by_lang"], "en": tr.english_floor - 0.01},
    }
    assert not tr.consider(1, {"retrieval": worse_en}) and tr.best["step"] == 0
    assert not tr.consider(1, {"retrieval": {**step0, "macro": step0["macro"] - 0.01}})
    per_q = tr.best[PER_QUERY]  # step 0's nDCG@10 per validation query
    assert len(per_q) == step0["queries"]
    # a higher macro from noise alone (± per question, mean +0.005) is not kept ...
    questions = sorted({plain_qid(q) for q in per_q})
    sign = {q: 0.1 if i % 2 else -0.09 for i, q in enumerate(questions)}
    noisy = {q: v + sign[plain_qid(q)] for q, v in per_q.items()}
    assert not tr.consider(2, {"retrieval": {**step0, "macro": step0["macro"] + 0.01,
                                             PER_QUERY: noisy}})  # fmt: skip
    with torch.no_grad():  # ... a different net at "step 2" that gains on every question is
        tr.ema.shadow.head.type_logw.add_(0.5)
    better = {q: v + 0.05 for q, v in per_q.items()}
    assert tr.consider(
        2, {"retrieval": {**step0, "macro": step0["macro"] + 0.01, PER_QUERY: better}}
    )
    saved = LiRAModel.from_pretrained(tr.finalize())
    assert torch.equal(saved.head.type_logw, tr.best["state"]["head.type_logw"])


def test_whole_corpus_negatives_are_the_hand_top_k(demo, tmp_path, monkeypatch):
    """lasr.negatives=corpus: each query's negatives are the M highest-scoring non-relevant
    same-language documents of the whole corpus under the current model (hand top-k)."""
    model, train, _, _, adaptor = demo
    data = _subset(train, 8)
    cfg = LaSRConfig(steps=1, task="retrieval", negatives="corpus", num_negatives=5,
                     **{**SMALL, "batch_size": 8}, dropout=0.0)  # fmt: skip
    tr = LaSRTrainer(cfg, _fresh(model, cfg, adaptor), tmp_path, retrieval=data)
    seen = {}
    monkeypatch.setattr(
        lasr.losses, "ranking_loss", lambda s, m, *_: seen.update(s=s.detach(), m=m)
    )
    tr.retrieval_loss()
    net = tr.accelerator.unwrap_model(tr.net).eval()
    with torch.no_grad():
        zd = net(*tr.dbank.streams.tensors())
        order = seen["s"]
        for b in range(order.shape[0]):
            # the query of row b: the one whose positive score matches (queries are distinct)
            zq = net(*tr.qbank.streams.tensors())
            cands = []
            for qi, q in enumerate(tr.qbank.keys):
                rel = {d for d, v in data.qrels[q].items() if v > 0}
                s = zq[qi] @ zd.T
                s[[tr.dbank.index[d] for d in rel if d in tr.dbank.index]] = float("-inf")
                top = s.topk(5).values
                if torch.allclose(top, order[b, 1:], atol=1e-5):
                    cands.append(q)
            assert cands, f"row {b}: negatives are not any query's hand top-5"
    assert seen["m"].all()
