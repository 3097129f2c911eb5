"""User errors of ``lira arca`` / ``lira reason``, the reasoning files and ``data.format: hf``
are LiRAErrors (one ``lira: ...`` line, no traceback), raised before any model loads."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from torch import nn

from arca.config import ArcaConfig
from lira.config import ConfigError, DataConfig
from lira.data.errors import DataError
from lira.errors import UserInputError
from lira.reasoning.config import ReasonConfig
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from pipeline.runconfig import RunConfig

REPO = Path(__file__).resolve().parents[1]


def _no_models(*_: object, **__: object) -> None:
    raise AssertionError("a model was loaded before the user error was found")


# ------------------------------------------------------------------ lira arca


def _arca_cfg(tmp_path: Path, names: tuple[str, ...] = ("gold",), **arca: object) -> RunConfig:
    refs = [TranslatorConfig(name=n, kind="reference", role="mt") for n in names]
    return RunConfig(
        output_dir=str(tmp_path),
        data=DataConfig(
            train_languages=["de"], eval_languages=["de"], max_train_queries=4, max_eval_queries=2
        ),
        translation=TranslationConfig(
            pass_at_k=0, num_candidates=1, mt_translators=refs, critic=CriticConfig(kind="none")
        ),
        arca=ArcaConfig(steps=1, batch_size=2, **arca),
    )


def test_cli_arca_without_translators_is_a_config_error(tmp_path, capsys):
    from pipeline.cli import main

    args = ["arca", str(REPO / "configs" / "demo.yaml"), "--output-dir", str(tmp_path)]
    args += ["arca.online_translation=true", "translation.llm_translators=[]"]
    args += ["translation.mt_translators=[]", "translation.pass_at_k=0"]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    line = err.strip().splitlines()[-1]
    assert line.startswith("lira: config key 'translation': no active translator")
    assert "translation.mt_translators" in line and "translation.llm_translators" in line
    assert not list(tmp_path.glob("*.sqlite"))  # refused before the store is created


def test_arca_with_an_empty_store_names_the_store_and_the_fix(tmp_path, monkeypatch):
    from arca import engine
    from lira.translation.engine import store_path
    from lira.translation.store import TranslationStore

    monkeypatch.setattr(engine, "load_backbone", _no_models)
    cfg = _arca_cfg(tmp_path)
    TranslationStore(store_path(cfg)).close()
    with pytest.raises(
        UserInputError, match=r"translations\.sqlite holds no candidate.*lira translate"
    ):
        engine.run_arca(cfg)


def test_arca_with_a_store_of_another_pool_names_its_translators(tmp_path, monkeypatch):
    from arca import engine
    from lira.data.splits import load_splits
    from lira.translation.engine import store_path
    from lira.translation.store import TranslationStore

    monkeypatch.setattr(engine, "load_backbone", _no_models)
    cfg = _arca_cfg(tmp_path)
    splits = load_splits(cfg.data)
    with TranslationStore(store_path(cfg)) as store:
        store.add_reference("other", [(r.text, r.lang, "x", None) for r in splits.train_sources])
    with pytest.raises(UserInputError, match=r"holds candidates of \['other'\].*\['gold'\]"):
        engine.run_arca(cfg)


def test_arca_ridge_with_online_translation_and_no_english_is_a_config_error(tmp_path, monkeypatch):
    from arca import engine

    monkeypatch.setattr(engine, "load_backbone", _no_models)
    cfg = _arca_cfg(tmp_path, online_translation=True, objective="distill", distill_solver="ridge")
    with pytest.raises(ConfigError, match=r"'arca\.distill_solver': ridge .*lira translate"):
        engine.run_arca(cfg)


def test_usable_items_and_fit_ridge_without_english_are_user_errors():
    from arca.data import ArcaItem, usable_items
    from arca.model import ArcaModel

    with pytest.raises(UserInputError, match=r"no usable Arca training source.*lira translate"):
        usable_items([ArcaItem("x", "de", [])], None)
    fake = SimpleNamespace(adaptor=SimpleNamespace(mlp=nn.Linear(2, 2)))
    with pytest.raises(UserInputError, match="no English text to fit the ridge Adaptor"):
        ArcaModel.fit_ridge(fake, [" ", ""], 1.0)  # type: ignore[arg-type]


# ------------------------------------------------------------------ lira reason


class _FakeLM:
    def __init__(self, dim: int) -> None:
        self.emb = nn.Embedding(2, dim)

    def to(self, *_: object) -> _FakeLM:
        return self

    def eval(self) -> _FakeLM:
        return self

    def get_input_embeddings(self) -> nn.Embedding:
        return self.emb


def test_reason_with_an_arca_of_another_dim_is_a_config_error(tmp_path, monkeypatch):
    from pipeline import reason

    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    fake_arca = SimpleNamespace(dim=384)
    fake_arca.to = lambda *_: fake_arca
    monkeypatch.setattr(reason, "load_causal_lm", lambda *a, **k: (_FakeLM(576), None))
    monkeypatch.setattr(reason, "load_arca", lambda *_: fake_arca)
    cfg = RunConfig(
        output_dir=str(tmp_path),
        reason=ReasonConfig(languages=["en"], modes=["soft_only"], arca_checkpoint=str(ckpt)),
    )
    with pytest.raises(
        ConfigError, match=r"'reason\.arca_checkpoint': .*d=384 .*d=576: train Arca with"
    ):
        reason.run_reason(cfg)


def test_reason_without_a_test_time_translator_is_a_config_error(tmp_path, monkeypatch):
    from pipeline import reason

    monkeypatch.setattr(reason, "load_causal_lm", _no_models)
    only_train = TranslatorConfig(name="gold", kind="reference", role="mt", train_only=True)
    cfg = RunConfig(
        output_dir=str(tmp_path),
        translation=TranslationConfig(num_candidates=1, mt_translators=[only_train]),
        reason=ReasonConfig(languages=["de"], modes=["direct"]),
    )
    with pytest.raises(ConfigError, match=r"'translation': .*not train_only"):
        reason.run_reason(cfg)
    with pytest.raises(ConfigError, match=r"not train_only"):
        reason.selected_translations(cfg, ["x"], "de", None)


# ------------------------------------------------------------------ reasoning files

GOOD = {
    "question": {
        "stem": "s",
        "choices": [{"label": "A", "text": "a"}, {"label": "B", "text": "b"}],
    },
    "answerKey": "A",
}


def test_mgsm_datasets_folder_without_the_columns_is_a_data_error(tmp_path):
    from datasets import Dataset

    from lira.reasoning.data import load_mgsm

    Dataset.from_dict({"question": ["q"], "solution": ["3"]}).save_to_disk(str(tmp_path / "d"))
    with pytest.raises(DataError, match=r"d: no such column .*'answer_number'"):
        load_mgsm(tmp_path / "d", "xx")


@pytest.mark.parametrize(
    ("line", "field"),
    [
        (b"[1, 2]", "<record>"),
        (b'"a string"', "<record>"),
        (
            json.dumps({**GOOD, "question": {**GOOD["question"], "stem": 5}}).encode(),
            "question.stem",
        ),
        (
            json.dumps(
                {
                    **GOOD,
                    "question": {
                        "stem": "s",
                        "choices": [{"text": "a"}, {"label": "B", "text": "b"}],
                    },
                }
            ).encode(),
            r"question.choices\[0\].label",
        ),
        (
            json.dumps({**GOOD, "question": {"stem": "s", "choices": ["a", "b"]}}).encode(),
            r"question.choices\[0\]",
        ),
        (b'{"question": "\\ud800"}', "question"),
        (b'{"question": "caf\xe9"}', "<bytes>"),
        (b"1" * 5000, "<json>"),
    ],
)
def test_xcsqa_bad_lines_are_data_errors(tmp_path, line, field):
    from lira.reasoning.data import load_xcsqa

    f = tmp_path / "xcsqa_xx.jsonl"
    f.write_bytes(json.dumps(GOOD).encode() + b"\n" + line + b"\n")
    with pytest.raises(DataError, match=rf"xcsqa_xx\.jsonl: record line 2: field '{field}'"):
        load_xcsqa(f, "xx")


def test_reasoning_file_errors_reach_the_cli_as_one_line(tmp_path, capsys, monkeypatch):
    from pipeline import reason
    from pipeline.cli import main

    monkeypatch.setattr(reason, "load_causal_lm", lambda *a, **k: (_FakeLM(8), None))
    (tmp_path / "mgsm_en.tsv").write_text("q\tmany\n", encoding="utf-8")
    args = ["reason", str(REPO / "configs" / "demo.yaml"), "--output-dir", str(tmp_path / "o")]
    args += [f"reason.mgsm_path={tmp_path}", "reason.tasks=[mgsm]", "reason.languages=[en]"]
    args += ["reason.modes=[direct]"]
    assert main(args) == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err
    assert (
        err.strip()
        .splitlines()[-1]
        .startswith(f"lira: {tmp_path / 'mgsm_en.tsv'}: record line 1: field 'answer'")
    )


# ------------------------------------------------------------------ data.format: hf


def _hf_folder(tmp_path: Path, corpus: bytes) -> Path:
    (tmp_path / "corpus.jsonl").write_bytes(corpus)
    (tmp_path / "queries.jsonl").write_text('{"_id": "q1", "text": "y"}\n', encoding="utf-8")
    qrel = '{"query-id": "q1", "corpus-id": "d1", "score": 1}\n'
    (tmp_path / "qrels.jsonl").write_text(qrel, encoding="utf-8")
    return tmp_path


def test_hf_malformed_corpus_is_a_data_error(tmp_path):
    from lira.data.beir import load_hf_retrieval

    folder = _hf_folder(tmp_path, b'{"_id": "d1", "text": "x"}\n{not json\n')
    with pytest.raises(DataError, match=r"corpus\.jsonl: datasets cannot read it: .*regenerate"):
        load_hf_retrieval(folder)


def test_hf_truncated_parquet_is_a_data_error(tmp_path):
    from lira.data.beir import load_hf_retrieval

    folder = _hf_folder(tmp_path, b'{"_id": "d1", "text": "x"}\n')
    (folder / "queries.jsonl").unlink()
    (folder / "queries.parquet").write_bytes(b"PAR1 truncated")
    with pytest.raises(DataError, match=r"queries\.parquet: datasets cannot read it"):
        load_hf_retrieval(folder)
