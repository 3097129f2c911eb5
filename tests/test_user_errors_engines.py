"""User errors in the engines end as one `lira: ...` line (or a logged skip), never a traceback."""

from __future__ import annotations

import gc
import json
import logging
import re
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lira.config import ConfigError
from lira.data.types import Record
from lira.errors import CheckpointError, UserInputError
from pipeline.cli import main

REPO = Path(__file__).resolve().parents[1]


def _config(tmp_path: Path, extra: str = "") -> Path:
    cfg = tmp_path / "c.yaml"
    cfg.write_text(f"output_dir: {tmp_path / 'out'}\n{extra}", encoding="utf-8")
    return cfg


def _one_line_error(capsys: pytest.CaptureFixture[str], pattern: str) -> None:
    err = capsys.readouterr().err.strip().splitlines()
    assert err and re.search(pattern, err[-1]), err
    assert not any("Traceback" in line or "Exception ignored" in line for line in err), err


# ------------------------------------------------------------------ 1. the critic's lease generator
def test_critic_failure_closes_its_leases_before_the_store(tmp_path, capsys, monkeypatch):
    """A missing critic model: the lease generator is closed at once, not finalised later on a
    closed store ("Exception ignored in leased_chunks ... closed database")."""
    unraisable: list[object] = []
    monkeypatch.setattr(sys, "unraisablehook", unraisable.append)
    args = [
        "translate", str(REPO / "configs" / "demo.yaml"), "translation.llm_translators=[]",
        "translation.pass_at_k=0",
        "translation.mt_translators=[{name: xquad-en, kind: reference, role: mt, train_only: true}]",
        "translation.critic.kind=transformers", f"translation.critic.model={tmp_path / 'no-critic'}",
        "--output-dir", str(tmp_path / "o"),
    ]  # fmt: skip
    code = main(args)
    gc.collect()
    assert code == 1
    _one_line_error(capsys, r"^lira: .*no-critic")
    assert not unraisable, [getattr(u, "exc_value", u) for u in unraisable]


# ------------------------------------------------------------------- 2-3. lasr.task, baselines
@pytest.mark.parametrize(
    ("command", "args", "pattern"),
    [
        ("lasr", ["lasr.task=rank"], r"'lasr.task': rank needs STS pairs: set data.sts_path"),
        ("lasr", ["lasr.task=retrieval", "data.format=sts", "data.path=p.tsv"],
         r"'lasr.task': retrieval needs retrieval data .*lasr.task: rank"),
        ("baseline", ["data.train_languages=[en]"], r"'data.train_languages': \['en'\] has no "
                                                    r"language besides English.*add one"),
        ("baseline", ["data.format=beir", "data.path=."], r"'data.format': beir gives no "
                                                          r"parallel training questions.*"
                                                          r"data.format: xquad_r"),
    ],
    ids=["rank-without-sts", "retrieval-on-sts", "baselines-english-only", "baselines-beir"],
)  # fmt: skip
def test_a_stage_refuses_data_it_cannot_use(tmp_path, capsys, command, args, pattern):
    assert main([command, str(_config(tmp_path)), *args]) == 2
    _one_line_error(capsys, r"^lira: config key " + pattern)


def test_training_task_names_the_key_and_the_data():
    from lasr.config import LaSRConfig
    from lasr.trainable import training_task

    with pytest.raises(ConfigError, match=r"'lasr.task': rank needs STS pairs"):
        training_task(LaSRConfig(task="rank"), None, None)
    with pytest.raises(ConfigError, match=r"'lasr.task': retrieval needs retrieval data"):
        training_task(LaSRConfig(task="retrieval"), None, None)


def test_too_few_joined_examples_is_a_config_error():
    from lira.baselines.data import build_examples
    from lira.data.types import ParallelData, RetrievalData

    parallel = ParallelData(ids=["q1"], texts={"en": ["Who?"], "de": ["Wer?"]})
    retrieval = RetrievalData(
        queries=[Record("q1@de", "Wer?", "de")],
        corpus=[Record("s1", "He did.", "en")],
        qrels={"q1@de": {"s1": 1}},
    )
    with pytest.raises(ConfigError, match=r"'data.max_train_queries': only 1 training"):
        build_examples(parallel, retrieval)


def test_more_mined_negatives_than_the_corpus_is_a_config_error():
    from lira.baselines.composition import mine_filtered_negatives

    q, pool = torch.eye(3)[:1], torch.eye(3)
    with pytest.raises(ConfigError, match=r"'baselines.merging.negatives': asked for 5 .*lower"):
        mine_filtered_negatives(q, pool, pool[:1], torch.tensor([0]), torch.arange(3), 5)


# ------------------------------------------------------------------- 4. the language-ID probe
class _Questions:
    """An XQuAD-R stand-in: question ``q`` in ``lang``."""

    def question(self, lang: str, qid: str) -> Record:
        return Record(qid, f"{qid} in {lang}", lang)


class _Encoder:
    def encode(self, texts: list[str], **kw: object) -> np.ndarray:
        return np.random.default_rng(0).normal(size=(len(texts), 4))


@pytest.mark.parametrize(
    ("qids", "languages", "why"),
    [
        (
            ["q1", "q2"],
            ["de", "es", "ru"],
            r"8 rows cannot be split .*test_size = 3 should be greater or equal to the number of classes = 4",
        ),
        (["q1"], ["de"], r"2 rows cannot be split .*too few"),
        ([f"q{i}" for i in range(10)], ["en"], r"at least two languages"),
    ],
    ids=["test-split-smaller-than-languages", "one-row-per-language", "english-only"],
)
def test_language_probe_is_skipped_with_a_warning_on_small_splits(caplog, qids, languages, why):
    from evaluators.compare import agnosticism

    with caplog.at_level(logging.WARNING, logger="evaluators.compare"):
        rows = agnosticism({"m": _Encoder()}, _Questions(), qids, languages, 0)  # type: ignore[arg-type]
    assert rows[0]["language_id_accuracy"] is None
    assert re.search(r"language-ID probe skipped.*" + why, caplog.text), caplog.text
    assert (rows[0]["lancer_penalty"] is None) == (languages == ["en"])


def test_language_probe_runs_when_the_split_fits(caplog):
    from evaluators.compare import agnosticism

    with caplog.at_level(logging.WARNING, logger="evaluators.compare"):
        rows = agnosticism({"m": _Encoder()}, _Questions(), [f"q{i}" for i in range(8)], ["de"], 0)  # type: ignore[arg-type]
    assert isinstance(rows[0]["language_id_accuracy"], float) and "skipped" not in caplog.text


# ------------------------------------------------------------------ 5. damaged merge inputs
def _checkpoint(folder: Path, config: str, weights: bytes | None = None) -> str:
    from safetensors.torch import save_file

    folder.mkdir()
    (folder / "config.json").write_text(config, encoding="utf-8")
    if weights is None:
        save_file({"w": torch.ones(2)}, str(folder / "model.safetensors"))
    else:
        (folder / "model.safetensors").write_bytes(weights)
    return str(folder)


GOOD = '{"model_type": "bert", "architectures": ["BertModel"]}'


@pytest.mark.parametrize(
    ("config", "weights", "pattern"),
    [
        ('{"model_type": ', None, r"checkpoint config .*b/config\.json is not valid JSON"
                                  r".*leave it out of the merge"),
        ("[1, 2]", None, r"checkpoint config .*b/config\.json is not a JSON object"
                         r".*leave it out of the merge"),
        (GOOD, b"garbage" * 4, r"weights file .*b/model\.safetensors is damaged"
                               r".*save or train the model again"),
    ],
    ids=["broken-config", "config-not-an-object", "garbage-weights"],
)  # fmt: skip
def test_baseline_merge_names_the_damaged_file(tmp_path, capsys, config, weights, pattern):
    a = _checkpoint(tmp_path / "a", GOOD)
    b = _checkpoint(tmp_path / "b", config, weights)
    assert main(["baseline-merge", a, b, "--out", str(tmp_path / "m")]) == 1
    _one_line_error(capsys, r"^lira: " + pattern)
    assert not (tmp_path / "m").exists()


# ------------------------------------------------------------------------------- 6. --pairs
def test_negative_pairs_is_refused_before_any_work(tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        main(["tune-translator", str(_config(tmp_path)), "--evaluate", "--pairs", "-1"])
    assert e.value.code == 2
    _one_line_error(capsys, r"argument --pairs: -1 is negative; give 0 or more")
    assert not (tmp_path / "out").exists()


def test_run_translator_eval_refuses_negative_pairs():
    from evaluators.translators import run_translator_eval
    from pipeline.runconfig import load_config

    with pytest.raises(UserInputError, match=r"--pairs -1 is negative"):
        run_translator_eval(load_config(None), pairs=-1)


# ------------------------------------------------------------------- 7. damaged run files
@pytest.mark.parametrize("text", ["{", "[1]"], ids=["truncated", "not-an-object"])
def test_damaged_baselines_summary_is_one_line(tmp_path, capsys, text):
    summary = tmp_path / "out" / "baselines" / "summary.json"
    summary.parent.mkdir(parents=True)
    summary.write_text(text, encoding="utf-8")
    assert main(["baseline", str(_config(tmp_path))]) == 1
    _one_line_error(capsys, r"^lira: baselines summary .*summary\.json is not (valid JSON|a JSON "
                            r"object).*delete it and run `lira baseline` again")  # fmt: skip


def test_damaged_arca_summary_names_the_file(tmp_path):
    from evaluators.compare import arca_diagnostics

    (tmp_path / "arca").mkdir()
    (tmp_path / "arca" / "summary.json").write_bytes(b'{"selection": \xff')
    with pytest.raises(CheckpointError, match=r"Arca summary .*summary\.json is not UTF-8.*"
                                              r"lira arca"):  # fmt: skip
        arca_diagnostics(tmp_path, tmp_path)


@pytest.mark.parametrize(
    ("text", "why"),
    [("[{", "is not valid JSON"), (json.dumps({"rows": []}), "is not a list of rows")],
    ids=["truncated", "not-a-list"],
)
def test_damaged_leaderboard_names_the_file(tmp_path, text, why):
    from evaluators.paper_tables import load_rows

    (tmp_path / "mteb").mkdir()
    (tmp_path / "mteb" / "leaderboard.json").write_text(text, encoding="utf-8")
    with pytest.raises(CheckpointError, match=rf"leaderboard .*leaderboard\.json {why}.*compare"):
        load_rows(tmp_path)
