"""kill -9 + resume: every stage of the real CLI reaches the uninterrupted run's result.

    .venv/bin/python benchmarks/kill_resume.py [--stages translate arca lasr baseline]
        [--trials 3] [--kills 1] [--jobs 1] [--after-checkpoint] [--seed 0]
        [--config configs/demo.yaml] [--workdir DIR] [--keep] [dotted.override=value ...]

For each stage it prepares a base output folder once (the translation store; Arca's final model
for LaSR), runs the stage uninterrupted (the reference: same config, same seed), then per
trial copies the base, starts ``python -m lira <stage> CONFIG ...`` as a subprocess and sends
it SIGKILL at a random moment: 1 kill in 4 ``uniform(0.3, 1) x`` the time the reference took
to put its first progress on disk (often during start-up), the others a random time (up to
the reference's remaining run time) after this run's own first progress on disk — a new step
folder (Arca, LaSR), a finished method (baselines), new store rows (translate).
``--after-checkpoint`` kills 0-0.3 s after the first new step folder instead. It re-runs the
stage with ``--resume`` (``translate``: re-runs it, as the README says), killing it again up to
``--kills`` times per trial, until it exits 0, and checks:

- final weights: every tensor of every ``.safetensors`` file of the stage's outputs
  (``arca/final``, ``lira-model``, ``baselines/<method>``) bit-identical to the reference or
  within ``--atol`` (1e-6); ``translate``: the store's rows (key, text, status, critic scores)
  equal the reference's, none lost or duplicated;
- no ``.tmp-`` leftovers, at most 2 ``step-*`` folders (Arca, LaSR), and Arca's ``log.jsonl``
  has each step once, as in the reference.

It prints, per stage, the trials, the kills, the failures, how many results were
bit-identical and the kill points (run, seconds after its start, early/progress, what was on
disk: the newest step folder, the methods done or the store rows, and whether a save was in
flight). The defaults make every stage take seconds on a CPU (tiny step counts, 8 training
questions per language, MT + reference translators, no critic); extra dotted overrides are
applied after them. The config file is copied first, so edits during a run do not mix
configs. Runs use ``OMP_NUM_THREADS=1``; the demo models come from ``--cache`` ($LIRA_CACHE,
else ``.pytest_cache/lira-models`` when present, else LiRA's default cache).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
DEFAULT_OVERRIDES = [
    "data.max_train_queries=8",
    "data.max_eval_queries=4",
    "translation.pass_at_k=0",  # demo-marian + the XQuAD-R references: no SmolLM2 generation
    "translation.critic.kind=none",
    "arca.steps=20",
    "arca.save_every=5",
    "arca.log_every=5",
    "lasr.steps=20",
    "lasr.save_every=5",
    "lasr.log_every=5",
    "lasr.batch_size=8",
    "baselines.methods=[infonce,jsd]",
    "baselines.steps=4",
    "baselines.batch_size=4",
]
STAGE_ORDER = ("translate", "arca", "lasr", "baseline")


@dataclass
class Stage:
    """How to run one CLI stage and where its results are."""

    name: str
    resume_args: list[str]
    outputs: list[str]
    """Folders (relative to the output dir) whose .safetensors are compared."""
    ckpt_root: str = ""
    """Folder of its step-* checkpoints ("" = none)."""


def stages_for(methods: list[str]) -> dict[str, Stage]:
    """The stage table (``baseline`` compares one folder per method)."""
    return {
        "translate": Stage("translate", [], []),
        "arca": Stage("arca", ["--resume"], ["arca/final"], "arca"),
        "lasr": Stage("lasr", ["--resume"], ["lira-model"], "lasr"),
        "baseline": Stage("baseline", ["--resume"], [f"baselines/{m}" for m in methods]),
    }


@dataclass
class Trial:
    """One trial's record."""

    kills: list[dict[str, Any]] = field(default_factory=list)
    runs: int = 0
    ok: bool = False
    identical: bool = False
    max_diff: float = 0.0
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


# ---------------------------------------------------------------------------------- processes
def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", TOKENIZERS_PARALLELISM="false",
               PYTHONUNBUFFERED="1")  # fmt: skip
    return env


def _start(stage: str, config: Path, overrides: list[str], out: Path, extra: list[str],
           log_file: Path) -> subprocess.Popen:  # fmt: skip
    cmd = [sys.executable, "-m", "lira", stage, str(config), *overrides, "--output-dir", str(out)]
    fh = open(log_file, "ab")
    try:
        return subprocess.Popen(cmd + extra, stdout=fh, stderr=subprocess.STDOUT, env=_env(),
                                cwd=str(REPO), start_new_session=True)  # fmt: skip
    finally:
        fh.close()


def _tail(path: Path, n: int = 1500) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-n:]
    except OSError:
        return ""


def _step_dirs(root: Path) -> list[Path]:
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-"))


def _leftovers(out: Path) -> list[str]:
    return [str(p.relative_to(out)) for p in out.rglob("*") if ".tmp-" in p.name]


def progress(stage: Stage, out: Path) -> int:
    """How far a run has got on disk: the newest step (Arca, LaSR), the methods done
    (baselines) or the store's rows (translate)."""
    if stage.ckpt_root:
        steps = _step_dirs(out / stage.ckpt_root)
        return int(steps[-1].name.split("-")[1]) if steps else 0
    if stage.name == "baseline":
        return len(list((out / "baselines").glob("*/lira_baseline.json")))
    return _row_count(out)


def _kill_point(stage: Stage, out: Path, delay: float, mode: str) -> dict[str, Any]:
    """What was on disk when the process was killed."""
    point: dict[str, Any] = {"at_s": round(delay, 2), "mode": mode,
                             "saving": bool(_leftovers(out))}  # fmt: skip
    if stage.ckpt_root:
        steps = _step_dirs(out / stage.ckpt_root)
        point["latest"] = steps[-1].name if steps else None
    if stage.name == "baseline":
        point["done"] = sorted(
            p.parent.name for p in (out / "baselines").glob("*/lira_baseline.json")
        )
    if stage.name == "translate":
        point["rows"] = _row_count(out)
    return point


def run_reference(stage: Stage, config: Path, overrides: list[str], base: Path, dst: Path,
                  timeout: float) -> dict[str, float]:  # fmt: skip
    """Run ``stage`` uninterrupted in a copy of ``base``: {"seconds", "anchor"}, the anchor
    being when its first progress (:func:`progress`) reached the disk."""
    if dst.exists():
        shutil.rmtree(dst)
    shutil.copytree(base, dst, symlinks=True)
    log = dst.parent / f"{dst.name}.log"
    start = progress(stage, dst)
    t0 = time.monotonic()
    p = _start(stage.name, config, overrides, dst, [], log)
    anchor = None
    while p.poll() is None:
        if anchor is None and progress(stage, dst) > start:
            anchor = time.monotonic() - t0
        if time.monotonic() - t0 > timeout:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            raise RuntimeError(f"reference {stage.name} run exceeded {timeout}s")
        time.sleep(0.05 if stage.ckpt_root else 0.2)
    total = time.monotonic() - t0
    if p.returncode != 0:
        raise RuntimeError(f"reference {stage.name} run failed (rc {p.returncode}):\n{_tail(log)}")
    return {"seconds": total, "anchor": anchor if anchor is not None else 0.5 * total}


# ------------------------------------------------------------------------------- comparisons
def _tensors(folder: Path) -> dict[str, Any]:
    from safetensors.torch import load_file

    out = {}
    for f in sorted(folder.rglob("*.safetensors")):
        for k, v in load_file(str(f)).items():
            out[f"{f.relative_to(folder)}:{k}"] = v
    return out


def compare_weights(ref: Path, got: Path, folders: list[str]) -> tuple[bool, float, list[str]]:
    """(bit-identical, max |diff|, problems) over every tensor of ``folders``."""
    identical, worst, problems = True, 0.0, []
    for rel in folders:
        a, b = _tensors(ref / rel), _tensors(got / rel) if (got / rel).is_dir() else {}
        if not a:
            problems.append(f"reference {rel} has no weights")
            continue
        if set(a) != set(b):
            problems.append(f"{rel}: tensors differ in names ({len(set(a) ^ set(b))} mismatched)")
            identical = False
            continue
        for k in a:
            x, y = a[k], b[k]
            if x.shape != y.shape or x.dtype != y.dtype:
                problems.append(f"{rel}:{k} shape/dtype {tuple(x.shape)} vs {tuple(y.shape)}")
                identical = False
                continue
            if not bool((x == y).all()) or not (x.isfinite().all() and y.isfinite().all()):
                identical = False
                if x.is_floating_point():
                    d = (x.double() - y.double()).abs().nan_to_num(float("inf")).max().item()
                else:
                    d = float("inf")
                worst = max(worst, d)
    return identical, worst, problems


def _store_rows(out: Path) -> list[tuple]:
    path = out / "translations.sqlite"
    if not path.is_file():
        return []
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return sorted(con.execute(
            "SELECT key, text, status, semantic, emotional, pragmatic, critic_status "
            "FROM translations"
        ).fetchall())  # fmt: skip
    except sqlite3.Error:
        return []
    finally:
        con.close()


def _row_count(out: Path) -> int:
    path = out / "translations.sqlite"
    if not path.is_file():
        return 0
    try:
        con = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1.0)
        try:
            return int(con.execute("SELECT COUNT(*) FROM translations").fetchone()[0])
        finally:
            con.close()
    except sqlite3.Error:
        return 0


def _log_steps(out: Path) -> list[int]:
    path = out / "arca" / "log.jsonl"
    if not path.is_file():
        return []
    return [json.loads(line)["step"] for line in path.read_text().splitlines() if line.strip()]


def check_trial(stage: Stage, ref: Path, got: Path, atol: float, t: Trial) -> None:
    """Fill ``t`` with the comparison of a finished trial against the reference."""
    if stage.name == "translate":
        a, b = _store_rows(ref), _store_rows(got)
        t.identical = a == b
        if not t.identical:
            lost = len({r[0] for r in a} - {r[0] for r in b})
            t.problems.append(f"store rows differ: {len(a)} vs {len(b)} rows, {lost} keys lost")
    else:
        t.identical, t.max_diff, probs = compare_weights(ref, got, stage.outputs)
        t.problems += probs
        if not t.identical and t.max_diff > atol:
            t.problems.append(f"weights differ: max |diff| {t.max_diff:.3g} > {atol:g}")
    left = _leftovers(got)
    if left:
        t.problems.append(f"leftovers: {left[:3]}")
    if stage.ckpt_root:
        n = len(_step_dirs(got / stage.ckpt_root))
        if n > 2:
            t.problems.append(f"{n} step folders kept (expected <= 2)")
    if stage.name == "arca":
        steps = _log_steps(got)
        if len(steps) != len(set(steps)) or steps != _log_steps(ref):
            t.problems.append(f"log.jsonl steps {steps} vs reference {_log_steps(ref)}")
    t.ok = not t.problems


def _wait_kill(p: subprocess.Popen, stage: Stage, out: Path, tm: dict[str, float],
               rng: random.Random, after_checkpoint: bool, timeout: float) -> str:  # fmt: skip
    """Wait until the moment to kill ``p``; returns the mode used.

    ``early`` (1 in 4): ``uniform(0.3, 1) x`` the reference's anchor time after the start, so
    often before any progress; ``progress``: once this run has made progress on disk (a new
    step folder, a finished method, new store rows), ``uniform(0, span)`` s later, span = the
    reference's time from anchor to end. ``after_checkpoint``: ``progress`` with span 0.3 s.
    """
    start = time.monotonic()
    if not after_checkpoint and rng.random() < 0.25:
        delay = rng.uniform(0.3, 1.0) * tm["anchor"]
        while p.poll() is None and time.monotonic() - start < delay:
            time.sleep(0.02)
        return "early"
    span = 0.3 if after_checkpoint else max(tm["seconds"] - tm["anchor"], 0.5)
    base, deadline = progress(stage, out), None
    while p.poll() is None and time.monotonic() - start < timeout:
        now = time.monotonic()
        if deadline is None and progress(stage, out) > base:
            deadline = now + rng.uniform(0.0, span)
        if deadline is not None and now >= deadline:
            break
        time.sleep(0.02 if stage.ckpt_root else 0.1)
    return "progress"


def run_trial(stage: Stage, config: Path, overrides: list[str], base: Path, ref: Path,
              tdir: Path, tm: dict[str, float], kills: int, rng: random.Random,
              atol: float, timeout: float, after_checkpoint: bool = False,
              check: bool = True) -> Trial:  # fmt: skip
    """Copy ``base``, run / kill (see :func:`_wait_kill`) / resume ``stage`` until it exits 0,
    then compare with ``ref``. ``tm`` is the reference's timing (:func:`run_reference`)."""
    if tdir.exists():
        shutil.rmtree(tdir)
    shutil.copytree(base, tdir, symlinks=True)
    log = tdir.parent / f"{tdir.name}.log"
    t = Trial()
    t0 = time.monotonic()
    while True:
        extra = stage.resume_args if t.runs else []
        start = time.monotonic()
        p = _start(stage.name, config, overrides, tdir, extra, log)
        t.runs += 1
        if len(t.kills) < kills:
            mode = _wait_kill(p, stage, tdir, tm, rng, after_checkpoint, timeout)
            if p.poll() is None:
                at = time.monotonic() - start
                os.killpg(p.pid, signal.SIGKILL)
                p.wait()
                t.kills.append({**_kill_point(stage, tdir, at, mode), "run": t.runs})
                continue
            if p.returncode != 0:
                t.problems.append(f"run {t.runs} exited {p.returncode}: {_tail(log, 600)}")
                break
            t.kills.append({"at_s": None, "finished_first": True, "run": t.runs})
            break
        try:
            rc = p.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            t.problems.append(f"run {t.runs} exceeded {timeout}s")
            break
        if rc != 0:
            t.problems.append(f"run {t.runs} exited {rc}: {_tail(log, 600)}")
        break
    t.seconds = time.monotonic() - t0
    if check and not t.problems:
        check_trial(stage, ref, tdir, atol, t)
    return t


# --------------------------------------------------------------------------------- the bench
def prepare_base(config: Path, overrides: list[str], work: Path, need_arca: bool,
                 timeout: float) -> tuple[Path, Path | None, dict[str, float]]:  # fmt: skip
    """``work/base`` = the translated store (this is also translate's reference) and, when
    ``need_arca``, ``work/ref-arca`` = base + an uninterrupted Arca run."""
    st = stages_for([])
    empty = work / "empty"
    empty.mkdir(parents=True, exist_ok=True)
    times = {"translate": run_reference(st["translate"], config, overrides, empty,
                                        work / "base", timeout)}  # fmt: skip
    ref_arca = None
    if need_arca:
        times["arca"] = run_reference(st["arca"], config, overrides, work / "base",
                                      work / "ref-arca", timeout)  # fmt: skip
        ref_arca = work / "ref-arca"
    return work / "base", ref_arca, times


def run_benchmark(
    config: Path,
    overrides: list[str],
    stages: list[str],
    trials: int,
    kills: int = 1,
    seed: int = 0,
    workdir: Path | None = None,
    atol: float = 1e-6,
    timeout: float = 600.0,
    after_checkpoint: bool = False,
    base: tuple[Path, Path | None] | None = None,
    report: Any = print,
    jobs: int = 1,
) -> dict[str, Any]:
    """Run the trials; returns {stage: {"trials", "failures", "identical", "killed", ...}}.

    ``base`` = (a folder with the translation store, a copy of it after an uninterrupted Arca
    run or None) skips the preparation (tests build a store in-process). ``jobs`` > 1 runs
    that many CLI processes at once (references and trials in separate folders; with
    ``after_checkpoint`` a trial does not wait for its reference run).
    """
    from concurrent.futures import Future, ThreadPoolExecutor

    work = Path(workdir or tempfile.mkdtemp(prefix="lira-kill-"))
    work.mkdir(parents=True, exist_ok=True)
    snapshot = work / "config.yaml"  # every run reads the same config, even if the file changes
    if Path(config).resolve() != snapshot.resolve():
        shutil.copyfile(config, snapshot)
    config = snapshot
    table = stages_for(_methods(config, overrides))
    times: dict[str, dict[str, float]] = {}
    if base is None:
        need_arca = any(s in ("arca", "lasr") for s in stages)
        b, ref_arca, times = prepare_base(config, overrides, work, need_arca, timeout)
    else:
        b, ref_arca = base
    pool = ThreadPoolExecutor(max_workers=max(jobs, 1))
    pending: list[tuple[str, Stage, Path, Future | None, list[Future]]] = []
    arca_ref: Future | None = None
    try:
        for name in [s for s in STAGE_ORDER if s in stages]:
            stage = table[name]
            fut: Future | None = None
            if name == "translate":
                src, ref = work / "empty", b  # the base is an uninterrupted translate run
                src.mkdir(exist_ok=True)
                if name not in times:
                    ref = work / "ref-translate"
            elif name == "arca":
                src, ref = b, work / "ref-arca"
                ref_arca = ref_arca or ref
            else:
                src = ref_arca if name == "lasr" else b
                if src is None:
                    raise ValueError("lasr needs a base folder with Arca's final model")
                if name == "lasr" and arca_ref is not None:
                    arca_ref.result()  # LaSR starts from the reference Arca's final model
                ref = work / f"ref-{name}"
            if name not in times:
                fut = pool.submit(run_reference, stage, config, overrides, src, ref, timeout)
                arca_ref = fut if name == "arca" else arca_ref
            tm = {"seconds": 0.0, "anchor": 0.0}
            if not (after_checkpoint and stage.ckpt_root):  # the kill times need its timing
                tm = fut.result() if fut is not None else times[name]
                times[name] = tm
            args = (stage, config, overrides, src, ref)
            rngs = [random.Random(f"{seed}-{name}-{i}") for i in range(trials)]
            trial_args = [(work / f"{name}-t{i}", tm, kills, rngs[i]) for i in range(trials)]
            tfuts = [
                pool.submit(run_trial, *args, *ta, atol, timeout, after_checkpoint, False)
                for ta in trial_args
            ]
            pending.append((name, stage, ref, fut, tfuts))
        results: dict[str, Any] = {}
        for name, stage, ref, fut, tfuts in pending:
            tm = fut.result() if fut is not None else times[name]
            report(f"[{name}] reference run {tm['seconds']:.1f}s (first progress on disk at "
                   f"{tm['anchor']:.1f}s)")  # fmt: skip
            rows = []
            for i, f in enumerate(tfuts):
                t = f.result()
                if not t.problems:
                    check_trial(stage, ref, work / f"{name}-t{i}", atol, t)
                rows.append(t)
                kp = ", ".join(_fmt_kill(k) for k in t.kills) or "none"
                report(f"[{name}] trial {i + 1}/{trials}: {'ok' if t.ok else 'FAILED'} "
                       f"({'bit-identical' if t.identical else f'max|diff| {t.max_diff:.2g}'}, "
                       f"{t.runs} runs, {t.seconds:.1f}s); kills: {kp}"
                       + (f"; problems: {t.problems}" if t.problems else ""))  # fmt: skip
            results[name] = {
                "trials": len(rows),
                "failures": sum(not t.ok for t in rows),
                "identical": sum(t.identical for t in rows),
                "killed": sum(1 for t in rows for k in t.kills if k.get("at_s") is not None),
                "max_diff": max((t.max_diff for t in rows), default=0.0),
                "kill_points": [k for t in rows for k in t.kills],
                "problems": [p for t in rows for p in t.problems],
                "reference_s": round(tm["seconds"], 2),
            }
        return results
    finally:
        pool.shutdown(wait=True, cancel_futures=True)


def _fmt_kill(k: dict[str, Any]) -> str:
    if k.get("at_s") is None:
        return f"run {k['run']} finished before its kill"
    where = k.get("latest") or ("no checkpoint" if "latest" in k else "")
    if "done" in k:
        where = f"done {k['done'] or 'none'}"
    if "rows" in k:
        where = f"{k['rows']} store rows"
    saving = ", saving" if k.get("saving") else ""
    return f"run {k['run']} @{k['at_s']}s {k.get('mode', '')} ({where}{saving})"


def _methods(config: Path, overrides: list[str]) -> list[str]:
    from pipeline.runconfig import load_config

    return list(load_config(config, overrides).baselines.methods)


def summary_table(results: dict[str, Any]) -> str:
    """The per-stage figures as a fixed-width table."""
    lines = [f"{'stage':<10} {'trials':>6} {'killed':>6} {'failures':>8} {'bit-identical':>13} "
             f"{'max|diff|':>9} {'ref s':>6}"]  # fmt: skip
    for name, r in results.items():
        lines.append(f"{name:<10} {r['trials']:>6} {r['killed']:>6} {r['failures']:>8} "
                     f"{r['identical']:>13} {r['max_diff']:>9.2g} {r['reference_s']:>6.1f}")  # fmt: skip
    return "\n".join(lines)


def default_cache() -> str:
    """$LIRA_CACHE, else the test suite's demo-model folder when present, else ''."""
    env = os.environ.get("LIRA_CACHE", "")
    if env:
        return env
    suite = REPO / ".pytest_cache" / "lira-models"
    return str(suite) if suite.is_dir() else ""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("overrides", nargs="*", help="extra dotted overrides (after the defaults)")
    ap.add_argument("--config", default=str(REPO / "configs" / "demo.yaml"))
    ap.add_argument("--stages", nargs="+", default=["arca", "lasr", "baseline"],
                    choices=list(STAGE_ORDER))  # fmt: skip
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--kills", type=int, default=1, help="kills per trial (resumed runs too)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--atol", type=float, default=1e-6)
    ap.add_argument("--timeout", type=float, default=900.0, help="seconds per run")
    ap.add_argument("--cache", default=default_cache(), help="demo model folder")
    ap.add_argument(
        "--after-checkpoint",
        action="store_true",
        help="kill 0-0.3 s after the first step folder appears (Arca, LaSR)",
    )
    ap.add_argument("--jobs", type=int, default=1, help="CLI processes at once")
    ap.add_argument("--workdir", default=None)
    ap.add_argument("--keep", action="store_true", help="keep the work folder")
    a = ap.parse_args()
    overrides = list(DEFAULT_OVERRIDES)
    if a.cache:
        overrides.append(f"models.cache_dir={a.cache}")
    overrides += a.overrides
    work = Path(a.workdir or tempfile.mkdtemp(prefix="lira-kill-"))
    print(f"config {a.config}; overrides {' '.join(overrides)}; work {work}", flush=True)
    t0 = time.monotonic()
    try:
        res = run_benchmark(Path(a.config), overrides, a.stages, a.trials, a.kills, a.seed, work,
                            a.atol, a.timeout, a.after_checkpoint,
                            report=lambda m: print(m, flush=True), jobs=a.jobs)  # fmt: skip
    finally:
        if not a.keep and a.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    print()
    print(summary_table(res))
    print(
        f"total {time.monotonic() - t0:.0f}s; failures: {sum(r['failures'] for r in res.values())}"
    )
    return 1 if any(r["failures"] for r in res.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
