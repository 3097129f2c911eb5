"""The same tiny job with 1 and 2 processes, per stage: wall time, examples/s, their ratio.

    .venv/bin/python benchmarks/processes.py [--stages translate arca lasr baseline]
        [--steps 8] [--batch 4] [--workdir DIR] [--keep]

Each stage runs as users run it: ``python -m lira <stage> CONFIG`` (1 process) and
``accelerate launch --config_file scripts/accelerate_cpu_2proc.yaml -m lira <stage> CONFIG``
(2 gloo processes on the CPU, a free port), on tiny random models (``random:tiny-*``, the
``paper_scale.py --tiny`` shapes), the shipped demo data (8 training questions per language),
reference translators only. A stage's inputs are prepared once by one process (the translation
store; Arca's final model for LaSR) and copied into a fresh folder per run, so a stage that
fails under 2 processes does not take the next ones with it.

Examples per run: translate, the source texts (the same work split over the processes);
Arca, LaSR and the baseline, steps x batch x processes (each process trains on its own batch
of the same size per step). Wall time is the whole command: start-up and model loading
included, as a user waits for it. Ratio = 2-process examples/s / 1-process examples/s (2.0 =
linear scaling; 1.0 = the second process adds nothing). A run that fails is reported on its row
with the last line of its error (the table still prints; the exit status is then 1).
On a CPU the two processes share the cores (and ``OMP_NUM_THREADS=1`` each): the ratio is
the parallel efficiency of the code path, not a GPU figure.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from arca.config import ArcaConfig  # noqa: E402
from lasr.config import LaSRConfig  # noqa: E402
from lira.baselines.config import BaselinesConfig  # noqa: E402
from lira.config import DataConfig, ModelsConfig, save_config  # noqa: E402
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig  # noqa: E402
from pipeline.runconfig import RunConfig  # noqa: E402

STAGES = ("translate", "arca", "lasr", "baseline")
"""The stages measured, in pipeline order (``lira <stage>`` subcommands)."""
INPUTS = {"translate": (), "arca": ("store",), "lasr": ("store", "arca"), "baseline": ("store",)}
"""What each stage reads from the prepared folder."""
LAUNCH_CONFIG = REPO / "scripts" / "accelerate_cpu_2proc.yaml"


@dataclass
class Run:
    """One stage run with ``procs`` processes."""

    stage: str
    procs: int
    wall: float = 0.0
    examples: int = 0
    error: str = ""

    @property
    def rate(self) -> float:
        """Examples per second (0 when it failed)."""
        return self.examples / self.wall if self.wall and not self.error else 0.0


def job_config(out: Path, steps: int, batch: int, procs: int = 1) -> RunConfig:
    """The tiny job: random tiny h and g, demo data, gold + one inference reference translator
    (a baseline's batch size is the global batch: ``batch`` per process)."""
    return RunConfig(
        output_dir=str(out),
        models=ModelsConfig(
            backbone="random:tiny-qwen3-embedding",
            backbone_pooling="last",
            encoder="random:tiny-mt5-encoder",
            backbone_max_length=64,
            encoder_max_length=64,
        ),
        data=DataConfig(
            train_languages=["de", "es"],
            eval_languages=["de"],
            max_train_queries=8,
            max_eval_queries=8,
            dev_fraction=0.25,
        ),
        translation=TranslationConfig(
            pass_at_k=0,
            num_candidates=2,
            llm_translators=[],
            mt_translators=[
                TranslatorConfig(name="xquad-en", kind="reference", role="mt", train_only=True),
                TranslatorConfig(name="mt", kind="reference", role="mt"),
            ],
            critic=CriticConfig(kind="none"),
        ),
        arca=ArcaConfig(
            pool_size=4,
            batch_size=batch,
            steps=steps,
            log_every=steps,
            save_every=steps,
            eval_batch_size=32,
        ),
        lasr=LaSRConfig(
            steps=steps,
            batch_size=batch,
            fusion_dim=32,
            fusion_layers=1,
            num_negatives=4,
            encode_batch_size=32,
            log_every=steps,
            save_every=steps,
        ),
        baselines=BaselinesConfig(methods=["clear"], steps=steps, batch_size=batch * procs),
    )


def examples(stage: str, cfg: RunConfig, procs: int) -> int:
    """Examples one run of ``stage`` processes (see the module docstring)."""
    if stage == "translate":
        from lira.data.splits import load_splits

        s = load_splits(cfg.data)
        return len({(r.text, r.lang) for r in (*s.train_sources, *s.dev_sources, *s.eval_sources)})
    section = {"arca": cfg.arca, "lasr": cfg.lasr, "baseline": cfg.baselines}[stage]
    accum = getattr(section, "grad_accum", 1)
    per_process = procs if stage != "baseline" else 1  # a baseline's batch_size is global
    return int(section.steps) * int(section.batch_size) * accum * per_process


def free_port() -> int:
    """A TCP port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command(stage: str, config: Path, procs: int) -> list[str]:
    """``python -m lira <stage> CONFIG``, under ``accelerate launch`` for 2 processes."""
    if procs == 1:
        return [sys.executable, "-m", "lira", stage, str(config)]
    accelerate = shutil.which("accelerate", path=str(Path(sys.executable).parent)) or "accelerate"
    return [accelerate, "launch", "--config_file", str(LAUNCH_CONFIG), "--num_processes",
            str(procs), "--main_process_port", str(free_port()), "-m", "lira", stage,
            str(config)]  # fmt: skip


ERROR_LINE = re.compile(r"^(\[rank\d+\]: )?([\w.]*(Error|Exception)|error): ")
"""A line that states an exception (``XError: ...``, under a launcher ``[rankN]: XError: ...``)
or the CLI's one-line ``error: ...``."""


def last_error(text: str) -> str:
    """The first line of a failed run's output that states its exception (the launcher's own
    ``ChildFailedError`` report comes after it), else its last line."""
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    named = [ln for ln in lines if ERROR_LINE.match(ln) and "ChildFailedError" not in ln]
    return (named[0] if named else (lines or ["(no output)"])[-1])[:160]


def run_stage(stage: str, procs: int, base: Path, work: Path, steps: int, batch: int) -> Run:
    """Copy ``stage``'s inputs from ``base`` into a fresh folder and time the command there."""
    from lira.translation.engine import store_path

    out = work / f"{stage}-p{procs}"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    cfg = job_config(out, steps, batch, procs)
    base_cfg = dataclasses.replace(cfg, output_dir=str(base))
    if "store" in INPUTS[stage]:
        shutil.copy2(store_path(base_cfg), store_path(cfg))
    if "arca" in INPUTS[stage]:
        shutil.copytree(base / "arca" / "final", out / "arca" / "final")
    config = out / "config.yaml"
    save_config(cfg, config)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(
        p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)}  # fmt: skip
    run = Run(stage, procs, examples=examples(stage, cfg, procs))
    t0 = time.perf_counter()
    res = subprocess.run(command(stage, config, procs), env=env, cwd=REPO, capture_output=True,
                         text=True)  # fmt: skip
    run.wall = time.perf_counter() - t0
    if res.returncode != 0:
        run.error = f"exit {res.returncode}: {last_error(res.stderr + res.stdout)}"
    (work / f"{stage}-p{procs}.log").write_text(res.stdout + res.stderr, encoding="utf-8")
    return run


def prepare(base: Path, steps: int, batch: int, stages: list[str]) -> None:
    """The inputs of the measured stages, by one process: the store, and Arca for LaSR."""
    cfg = job_config(base, steps, batch)
    base.mkdir(parents=True, exist_ok=True)
    config = base / "config.yaml"
    save_config(cfg, config)
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    needed = ["translate"] + (["arca"] if "lasr" in stages else [])
    for stage in needed:
        res = subprocess.run(command(stage, config, 1), env=env, cwd=REPO, capture_output=True,
                             text=True)  # fmt: skip
        if res.returncode != 0:
            raise SystemExit(f"preparing {stage} failed: {last_error(res.stderr + res.stdout)}")


def table(runs: list[Run]) -> str:
    """The printed table: one row per run, the ratio on the 2-process row."""
    head = ["stage", "procs", "wall s", "examples", "examples/s", "ratio 2p/1p", "status"]
    rows = [head]
    one = {r.stage: r for r in runs if r.procs == 1}
    for r in runs:
        ratio = "-"
        if r.procs > 1 and r.stage in one and one[r.stage].rate and r.rate:
            ratio = f"{r.rate / one[r.stage].rate:.2f}"
        rows.append([r.stage, str(r.procs), f"{r.wall:.1f}", str(r.examples),
                     f"{r.rate:.2f}" if r.rate else "-", ratio,
                     f"FAILED ({r.error})" if r.error else "ok"])  # fmt: skip
    widths = [max(len(row[i]) for row in rows) for i in range(len(head) - 1)]
    lines = []
    for row in rows:
        cells = [c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths))]
        lines.append("  ".join([*cells, row[-1]]))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> list[Run]:
    """Run every stage with 1 and 2 processes, print the table; returns the runs."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--stages", nargs="+", default=list(STAGES), choices=STAGES)
    ap.add_argument("--steps", type=int, default=8, help="training steps of arca/lasr/baseline")
    ap.add_argument("--batch", type=int, default=4, help="batch size per process")
    ap.add_argument("--workdir", default="", help="work folder (default: a temporary one)")
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    args = ap.parse_args(argv)
    work = Path(args.workdir or tempfile.mkdtemp(prefix="lira-multiprocess-"))
    work.mkdir(parents=True, exist_ok=True)
    runs: list[Run] = []
    try:
        prepare(work / "base", args.steps, args.batch, args.stages)
        for stage in [s for s in STAGES if s in args.stages]:
            for procs in (1, 2):
                run = run_stage(stage, procs, work / "base", work, args.steps, args.batch)
                runs.append(run)
                print(f"{stage} x{procs}: {run.wall:.1f} s {'FAILED' if run.error else 'ok'}",
                      flush=True)  # fmt: skip
        cores = os.cpu_count()
        print(f"\nprocesses: CPU ({cores} cores), gloo, OMP_NUM_THREADS=1 per process, tiny "
              f"random models, {args.steps} steps x batch {args.batch} per process")  # fmt: skip
        print(table(runs))
        if any(r.error for r in runs):
            print(f"(logs: {work})")
    finally:
        if not args.keep and not args.workdir and not any(r.error for r in runs):
            shutil.rmtree(work, ignore_errors=True)
    return runs


if __name__ == "__main__":
    sys.exit(1 if any(r.error for r in main()) else 0)
