"""``lira run`` end to end on tiny real models: every stage, the leaderboard, and stage resume."""

from __future__ import annotations

import json
import random

import pytest

from arca.config import ArcaConfig
from evaluators.config import EvalConfig
from lasr.config import LaSRConfig
from lira.baselines.config import BaselinesConfig
from lira.config import DataConfig
from lira.errors import LiRAError
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig
from pipeline.runconfig import RunConfig

METHODS = ["infonce", "clear", "lancer", "jsd", "merging"]


def _noisy(text: str, rng: random.Random) -> str:
    words = text.split()
    return " ".join(w for w in words if rng.random() > 0.3) or words[0]


def _config(tmp_path, models_config) -> RunConfig:
    return RunConfig(
        output_dir=str(tmp_path),
        models=models_config,
        data=DataConfig(
            train_languages=["de"],
            eval_languages=["de", "ru"],  # ru is never seen in training
            max_train_queries=16,
            max_eval_queries=8,
        ),
        translation=TranslationConfig(
            pass_at_k=0,
            num_candidates=2,
            mt_translators=[
                TranslatorConfig(name="machine", kind="reference", role="mt"),
                TranslatorConfig(name="xquad-en", kind="reference", role="mt", train_only=True),
            ],
            critic=CriticConfig(kind="none"),
        ),
        arca=ArcaConfig(steps=2, batch_size=4, log_every=1, save_every=2),
        lasr=LaSRConfig(
            steps=2, batch_size=4, fusion_dim=32, fusion_layers=1, num_negatives=4, log_every=1
        ),
        baselines=BaselinesConfig(methods=METHODS, steps=2, batch_size=4),
        # English-corpus scenarios only: the test stays a few minutes on 2 cores
        eval=EvalConfig(scenarios=["en-en", "lang-en"], bootstrap=20, batch_size=32),
    )


def _import_machine_translations(cfg: RunConfig) -> None:
    """A non-gold English candidate for every source (the 'machine' translator, offline path)."""
    from lira.data.splits import load_splits
    from lira.translation.engine import store_path
    from lira.translation.store import TranslationStore

    splits = load_splits(cfg.data)
    rng = random.Random(0)
    rows = [
        (r.text, r.lang, _noisy(splits.dataset.question("en", r.id.split("@")[0]).text, rng), r.id)
        for r in splits.train_sources + splits.eval_sources
    ]
    with TranslationStore(store_path(cfg)) as store:
        store.add_reference("machine", rows)


@pytest.mark.slow
def test_run_writes_the_leaderboard_and_resumes_stage_by_stage(tmp_path, models_config):
    from pipeline.run import run_pipeline
    from pipeline.stages import ORDER, stage_fingerprint

    cfg = _config(tmp_path, models_config)
    _import_machine_translations(cfg)
    timings = run_pipeline(cfg)
    assert list(timings) == ["translate", "arca", "lasr", "baselines", "compare"]
    assert all(isinstance(t, float) for t in timings.values())

    rows = json.loads((tmp_path / "compare" / "leaderboard.json").read_text())
    keys = {"method", "task", "scenario", "language", "metric", "value", "ci_low", "ci_high"}
    assert rows and all(set(r) >= keys for r in rows)
    assert {"backbone", "lira", *METHODS} <= {r["method"] for r in rows}
    assert {"de", "ru"} <= {r["language"] for r in rows}
    for method in ("backbone", "lira", *METHODS):
        scenarios = {r["scenario"] for r in rows if r["method"] == method}
        assert set(cfg.eval.scenarios) <= scenarios, (method, scenarios)
    assert all(r["ci_low"] <= r["value"] <= r["ci_high"] for r in rows if r["metric"] == "ndcg@10")
    assert (tmp_path / "compare" / "leaderboard.md").read_text().count("| lira |") >= 1
    assert list((tmp_path / "compare").glob("*.png"))
    assert (tmp_path / "compare" / "diagnostics" / "lipschitz.png").is_file()
    assert json.loads((tmp_path / "run_summary.json").read_text())["stages"] == timings

    # a finished stage is not redone; a changed section re-runs its stage and those after it
    # that read it (the baselines read the data and the models, not LaSR's settings)
    assert set(run_pipeline(cfg).values()) == {"skipped"}
    before = {s: stage_fingerprint(cfg, s) for s in ORDER}
    cfg.lasr.steps = 3
    after = {s: stage_fingerprint(cfg, s) for s in ORDER}
    assert [s for s in ORDER if before[s] != after[s]] == ["lasr", "compare", "reason"]


def test_memory_only_fields_keep_every_stage_fingerprint():
    """baselines.gradient_checkpointing changes no output: no stage re-runs when it is set."""
    from pipeline.runconfig import RunConfig
    from pipeline.stages import ORDER, stage_fingerprint

    cfg = RunConfig()
    before = {s: stage_fingerprint(cfg, s) for s in ORDER}
    cfg.baselines.gradient_checkpointing = True
    assert {s: stage_fingerprint(cfg, s) for s in ORDER} == before
    cfg.baselines.lora = True  # a field that shapes the baselines does re-run them
    changed = [s for s in ORDER if stage_fingerprint(cfg, s) != before[s]]
    assert changed == ["baselines", "compare", "reason"]


def test_a_stage_reruns_when_what_it_reads_changes_and_only_then():
    """LaSR and Arca settings keep the baselines (they read the data and the models only); the
    data, the models and the seed re-run them; the translators re-run every stage but them."""
    from pipeline.runconfig import RunConfig
    from pipeline.stages import ORDER, stage_fingerprint

    def changed(edit) -> list[str]:
        cfg = RunConfig()
        before = {s: stage_fingerprint(cfg, s) for s in ORDER}
        edit(cfg)
        return [s for s in ORDER if stage_fingerprint(cfg, s) != before[s]]

    assert changed(lambda c: setattr(c.arca, "steps", 7)) == ["arca", "lasr", "compare", "reason"]
    assert changed(lambda c: setattr(c.translation, "num_candidates", 5)) == [
        "translate", "arca", "lasr", "compare", "reason"]  # fmt: skip
    assert changed(lambda c: setattr(c.data, "max_train_queries", 7)) == ORDER
    assert changed(lambda c: setattr(c.models, "backbone_max_length", 32)) == [
        "arca", "lasr", "baselines", "compare", "reason"]  # fmt: skip
    assert changed(lambda c: setattr(c, "seed", 1)) == ORDER


def test_pending_failures_rerun_the_stage_and_bad_markers_do_not_crash(tmp_path, monkeypatch):
    import pipeline.run as pipeline

    calls: list[str] = []
    pending = {"translate": 3}

    def fake(stage, cfg, opts):
        calls.append(stage)
        return {"pending": pending.get(stage, 0)}

    monkeypatch.setattr(pipeline, "run_stage", fake)
    cfg = RunConfig(output_dir=str(tmp_path), stages=["translate", "arca"])
    pipeline.run_pipeline(cfg)
    assert calls == ["translate", "arca"]
    assert json.loads((tmp_path / "stages" / "translate.json").read_text())["pending"] == 3
    pipeline.run_pipeline(cfg)  # the failed rows are retried; arca is done
    assert calls == ["translate", "arca", "translate"]
    pending["translate"] = 0
    pipeline.run_pipeline(cfg)
    pipeline.run_pipeline(cfg)  # nothing pending: everything skipped
    assert calls == ["translate", "arca", "translate", "translate"]
    (tmp_path / "stages" / "arca.json").write_text("{trunc", encoding="utf-8")
    pipeline.run_pipeline(cfg)  # an unreadable marker: the stage runs again
    assert calls[-1] == "arca"
    summary = (tmp_path / "run_summary.json").read_text()
    assert "NaN" not in summary


def test_a_refused_stage_leaves_config_yaml_as_it_was(tmp_path, monkeypatch):
    """Any user error (not only a refused checkpoint) before a stage finished restores the
    config of the outputs that are there; a checkpoint error is prefixed with the stage."""
    import pipeline.run as pipeline
    from lira.config import ConfigError
    from lira.errors import CheckpointError
    from lira.translation.engine import NothingTranslated

    errors = iter([ConfigError("arca.train_encoder", "refused"), NothingTranslated("nothing"),
                   CheckpointError("no intact checkpoint")])  # fmt: skip

    def fake(stage, cfg, opts):
        raise next(errors)

    cfg = RunConfig(output_dir=str(tmp_path), stages=["arca"])
    monkeypatch.setattr(pipeline, "run_stage", lambda s, c, o: {})
    pipeline.run_pipeline(cfg)
    record = (tmp_path / "config.yaml").read_bytes()
    monkeypatch.setattr(pipeline, "run_stage", fake)
    changed = RunConfig(output_dir=str(tmp_path), stages=["arca"], seed=7)
    for pattern in (r"arca.train_encoder", r"^nothing$", r"^stage arca: no intact checkpoint"):
        with pytest.raises(LiRAError, match=pattern):
            pipeline.run_pipeline(changed)
        assert (tmp_path / "config.yaml").read_bytes() == record


def _tree(folder) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}  # fmt: skip


@pytest.mark.slow
def test_run_resume_after_a_config_change_refuses_naming_stage_keys_and_fix(
    tmp_path, models_config, capsys
):
    """`lira run --resume` with a changed Arca key: one line naming the stage, the changed key
    and the fixes; the finished stage's outputs, its marker and config.yaml stay as they were.
    With the old config, --resume skips every finished stage."""
    from lira.config import save_config
    from pipeline.cli import main
    from pipeline.runconfig import load_config

    out = tmp_path / "out"
    cfg = _config(out, models_config)
    cfg.stages = ["translate", "arca"]
    _import_machine_translations(cfg)
    save_config(cfg, tmp_path / "run.yaml")
    run = ["run", str(tmp_path / "run.yaml")]
    assert main(run) == 0
    arca, markers = _tree(out / "arca"), _tree(out / "stages")
    record = (out / "config.yaml").read_text()
    capsys.readouterr()

    assert main([*run, "--resume", "arca.actor_lr=0.001"]) == 1
    stderr = capsys.readouterr().err
    err = stderr.strip().splitlines()[-1]  # above it: the models' loading progress bars
    assert err.startswith("lira: stage arca: cannot resume Arca") and "Traceback" not in stderr
    assert "arca.actor_lr: 0.0001 -> 0.001" in err, err
    assert "without --resume" in err and "--output-dir" in err, err
    assert _tree(out / "arca") == arca and _tree(out / "stages") == markers
    assert (out / "config.yaml").read_text() == record
    assert load_config(out / "config.yaml").arca.actor_lr == 1e-4

    assert main([*run, "--resume"]) == 0
    summary = json.loads((out / "run_summary.json").read_text())["stages"]
    assert summary == {"translate": "skipped", "arca": "skipped"}


def test_run_ends_with_the_headline_scores_and_stores_them(tmp_path, monkeypatch, capsys):
    """Issue 52.5: `lira run` printed no score at the end and run_summary.json held only stage
    seconds; now both give compare's pooled nDCG@10 of backbone, mE5-small and lira."""
    import pipeline.run as pipeline
    from evaluators.leaderboard import write_leaderboard

    def row(method, scenario, language, value, metric="ndcg@10"):
        return dict(method=method, task="xquad-r", scenario=scenario, language=language,
                    metric=metric, value=value, ci_low=value - 1, ci_high=value + 1)  # fmt: skip

    def fake(stage, cfg, opts):
        if stage == "compare":
            rows = [row(m, sc, "all", v + d) for m, v in (("backbone", 30.0), ("lira", 60.0),
                    ("me5-small", 50.0), ("infonce", 40.0))
                    for sc, d in (("en-en", 20.0), ("lang-en", 0.0), ("en-lang", -5.0))]  # fmt: skip
            rows += [
                row("lira", "lang-en", "de", 1.0),
                row("lira", "lang-en", "all", 9.0, "mrr@10"),
            ]
            write_leaderboard(rows, tmp_path / "compare")
        return {}

    monkeypatch.setattr(pipeline, "run_stage", fake)
    pipeline.run_pipeline(RunConfig(output_dir=str(tmp_path), stages=["arca", "compare"]))
    summary = json.loads((tmp_path / "run_summary.json").read_text())
    assert summary["headline"] == {
        "backbone": {"En-En": 50.0, "L→En": 30.0, "En→L": 25.0},
        "me5-small": {"En-En": 70.0, "L→En": 50.0, "En→L": 45.0},
        "lira": {"En-En": 80.0, "L→En": 60.0, "En→L": 55.0},
    }
    assert set(summary["stages"]) == {"arca", "compare"}
    out = capsys.readouterr().out.splitlines()
    at = out.index("ndcg@10 (every language pooled)")
    assert out[at + 1].split() == ["method", "En-En", "L→En", "En→L"]
    assert [x.split() for x in out[at + 2 : at + 5]] == [
        ["backbone", "50.0", "30.0", "25.0"], ["me5-small", "70.0", "50.0", "45.0"],
        ["lira", "80.0", "60.0", "55.0"]]  # fmt: skip
