"""What each ``lira`` command runs: one small adapter per command, and the main job ``lira run``.

An adapter reads the command's options (:class:`Options`, from the command line) and calls its
engine with typed keywords; every engine is imported here, at the top, so ``lira <command>``
leads to its engine in one step (:func:`run_command`, :func:`run_stage`). Below this floor no
function takes the argparse ``Namespace``. The CLI imports this module when a command runs
(torch loads with the engines), so ``lira --help`` starts without torch.

:func:`run_pipeline` runs the stages of :data:`pipeline.stages.STAGES` in order, each through
its adapter, skipping those already done with this config (see :mod:`pipeline.stages`).
"""

from __future__ import annotations

import dataclasses
import json
import logging
import time
from argparse import Namespace
from dataclasses import dataclass
from pathlib import Path

from arca.engine import run_arca
from arca.g_cache import critic_g
from arca.tuning.engine import run_tune_translator
from evaluators.compare import run_compare
from evaluators.engine import run_eval
from evaluators.leaderboard import headline_scores, headline_table
from evaluators.mteb_translate import translate_tasks
from evaluators.translators import run_translator_eval
from lasr.engine import run_lasr, trained_arca
from lira.baselines.engine import run_baselines
from lira.baselines.merging import merge_command
from lira.config import save_config
from lira.errors import CheckpointError, LiRAError
from lira.jsonio import write_json
from lira.models.devices import release_memory
from lira.translation.engine import run_translate
from pipeline.ablate import run_ablate
from pipeline.reason import run_reason
from pipeline.runconfig import RunConfig
from pipeline.stages import (
    ONE_PROCESS,
    ORDER,
    STAGES,
    main_process,
    read_marker,
    stage_fingerprint,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Options:
    """The command-line options of one ``lira`` command; those it does not take keep their
    defaults (``lira run`` hands only ``resume`` to its stages)."""

    command: str = "run"
    """The ``lira`` subcommand."""
    resume: bool = False
    """``--resume``: continue from checkpoints (arca, lasr, baseline, tune-translator, run)."""
    import_file: str | None = None
    """``translate --import FILE``: a JSONL of translations to import."""
    translator: str | None = None
    """``translate --translator NAME``: the translator the imported rows are stored under."""
    shard: str | None = None
    """``translate --shard I/N``: translate one shard only."""
    merge: list[str] | None = None
    """``translate --merge [STORE …]``: merge shard stores (an empty list: every one found)."""
    mteb: str | None = None
    """``--mteb TASK[,TASK…]`` (translate, eval, compare): MTEB tasks instead of the data."""
    mteb_data: str | None = None
    """``--mteb-data DIR``: local copies of the MTEB tasks."""
    paper_tables: bool = False
    """``compare --paper-tables``: also print paper 004's Tables 1, 2 and 16."""
    methods: list[str] | None = None
    """``baseline --methods``: the methods to train (default ``baselines.methods``)."""
    rows: list[str] | None = None
    """``ablate --rows``: the Table 5 rows to train (default all)."""
    evaluate: bool = False
    """``tune-translator --evaluate``: compare base and tuned translator instead of tuning."""
    pairs: int = 20
    """``tune-translator --evaluate --pairs``: random (source, base, tuned) triples shown."""
    split: str = "validation"
    """``tune-translator --evaluate --split``: validation (where the pool is decided) or test."""

    @classmethod
    def from_args(cls, args: Namespace) -> Options:
        """The options of a parsed command line (the flags the command does not define: defaults)."""
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in vars(args).items() if k in known})


def translate(cfg: RunConfig, opts: Options) -> dict[str, object]:
    """``lira translate``: fill the translation store from the data (or the ``--mteb`` tasks)."""
    if opts.mteb:
        return translate_tasks(cfg, mteb=opts.mteb, mteb_data=opts.mteb_data)
    return run_translate(
        cfg,
        import_file=opts.import_file,
        translator=opts.translator,
        shard=opts.shard,
        merge=opts.merge,
        shard_from_launcher=opts.command == "translate",
        g=critic_g(cfg.models, cfg.output_dir),  # the embedding critic reads g's cache
    )


def arca(cfg: RunConfig, opts: Options) -> dict[str, object]:
    """``lira arca``: train Arca."""
    return run_arca(cfg, resume=opts.resume)


def lasr(cfg: RunConfig, opts: Options) -> dict[str, object]:
    """``lira lasr``: train LaSR on the trained Arca (none under ``output_dir``: refused)."""
    return run_lasr(cfg, resume=opts.resume, arca_dir=trained_arca(cfg))


def baseline(cfg: RunConfig, opts: Options) -> dict[str, object]:
    """``lira baseline``: train the baselines."""
    return run_baselines(cfg, methods=opts.methods, resume=opts.resume)


def compare(cfg: RunConfig, opts: Options) -> object:
    """``lira compare``: evaluate every method, write the leaderboard."""
    return run_compare(
        cfg, mteb=opts.mteb, mteb_data=opts.mteb_data, paper_tables=opts.paper_tables
    )


def reason(cfg: RunConfig, opts: Options) -> dict[str, object]:
    """``lira reason``: reasoning accuracy through a frozen LLM (no options)."""
    return run_reason(cfg)


def evaluate(cfg: RunConfig, opts: Options) -> object:
    """``lira eval``: evaluate one model (``eval.model``)."""
    return run_eval(cfg, mteb=opts.mteb, mteb_data=opts.mteb_data)


def tune_translator(cfg: RunConfig, opts: Options) -> object:
    """``lira tune-translator``: GRPO-tune a translator, or (``--evaluate``) compare it to its base."""
    if opts.evaluate:
        return run_translator_eval(cfg, pairs=opts.pairs, split=opts.split)
    return run_tune_translator(cfg, resume=opts.resume)


def ablate(cfg: RunConfig, opts: Options) -> object:
    """``lira ablate``: paper 004's Table 5."""
    return run_ablate(cfg, rows=opts.rows)


def baseline_merge(checkpoints: list[str], weights: list[float] | None, out: str) -> None:
    """``lira baseline-merge``: average checkpoints into one folder (no config)."""
    merge_command(checkpoints, weights, out)


def run_stage(stage: str, cfg: RunConfig, opts: Options) -> object:
    """Run one stage of :data:`~pipeline.stages.STAGES` through its adapter."""
    match stage:
        case "translate":
            return translate(cfg, opts)
        case "arca":
            return arca(cfg, opts)
        case "lasr":
            return lasr(cfg, opts)
        case "baselines":
            return baseline(cfg, opts)
        case "compare":
            return compare(cfg, opts)
        case "reason":
            return reason(cfg, opts)
    raise ValueError(f"unknown stage {stage!r}; the stages are {ORDER}")


def run_command(cfg: RunConfig, opts: Options) -> object:
    """Run ``lira <opts.command>`` on ``cfg``: a stage alone, or a command outside the main job."""
    match opts.command:
        case "eval":
            return evaluate(cfg, opts)
        case "tune-translator":
            return tune_translator(cfg, opts)
        case "ablate":
            return ablate(cfg, opts)
        case "run":
            return run_pipeline(cfg, resume=opts.resume)
    stage = next((name for name, s in STAGES.items() if s.command == opts.command), None)
    if stage is None:
        raise ValueError(f"unknown command {opts.command!r}")
    return run_stage(stage, cfg, opts)


def run_pipeline(cfg: RunConfig, *, resume: bool = False) -> dict[str, object]:
    """Run the configured stages in order, skipping those already finished with this config
    (``resume``: each stage it re-runs continues from its checkpoints, ``lira run --resume``).

    Under a launcher every process runs the stages (the trainers share the work), except
    :data:`ONE_PROCESS`, which the main process runs alone; the main process writes the run's
    files."""
    out = Path(cfg.output_dir)
    main = main_process()
    (out / "stages").mkdir(parents=True, exist_ok=True)
    record = out / "config.yaml"
    previous = record.read_bytes() if record.is_file() else None
    if main:
        save_config(cfg, record)
    opts = Options(command="run", resume=resume)
    timings: dict[str, object] = {}
    ran = 0
    for stage in [s for s in ORDER if s in cfg.stages]:
        marker = out / "stages" / f"{stage}.json"
        fingerprint = stage_fingerprint(cfg, stage)
        done = read_marker(marker)
        if done.get("fingerprint") == fingerprint and not done.get("pending"):
            log.info("stage %s: already done with this config, skipped", stage)
            timings[stage] = "skipped"
            continue
        if stage in ONE_PROCESS and not main:
            log.info("stage %s: left to the main process (it does not split its work)", stage)
            timings[stage] = "main process"
            continue
        if done.get("pending"):
            log.info(
                "stage %s: %s item(s) failed last time; running it again", stage, done["pending"]
            )
        log.info("stage %s: starting", stage)
        start = time.perf_counter()
        try:
            result = run_stage(stage, cfg, opts)
        except LiRAError as e:
            # Refused (e.g. --resume onto checkpoints of another config, the message names the
            # changed keys and the fix; a damaged checkpoint; nothing translated) before this
            # run finished a stage: config.yaml goes back to the config of the outputs that are
            # still there.
            if not ran and previous is not None and main:
                record.write_bytes(previous)
            if isinstance(e, CheckpointError):
                raise CheckpointError(f"stage {stage}: {e}") from e
            raise
        ran += 1
        release_memory()  # the stage's models, before the next stage loads its own
        seconds = round(time.perf_counter() - start, 1)
        pending = result.get("pending", 0) if isinstance(result, dict) else 0
        if main:
            write_json(
                marker,
                {
                    "stage": stage,
                    "fingerprint": fingerprint,
                    "seconds": seconds,
                    "pending": pending,
                },
            )
        log.info("stage %s: done in %.1f s", stage, seconds)
        timings[stage] = seconds
    if main:
        scores = run_headline(out)
        write_json(out / "run_summary.json", {"stages": timings, "headline": scores})
    return timings


def run_headline(out: Path) -> dict[str, dict[str, float]]:
    """The headline nDCG@10 of ``<out>/compare/leaderboard.json`` (:func:`headline_scores`),
    printed as a short table; {} when compare wrote none (or it is unreadable: logged)."""
    board = out / "compare" / "leaderboard.json"
    if not board.is_file():
        return {}
    try:
        rows = json.loads(board.read_text(encoding="utf-8"))
        scores = headline_scores(rows)
    except (ValueError, UnicodeDecodeError, OSError, KeyError, TypeError) as e:
        log.warning("%s is unreadable (%s): no headline scores", board, e)
        return {}
    if table := headline_table(scores):
        print(f"{table}\n(every metric and interval: {board.with_suffix('.md')})")
    return scores
