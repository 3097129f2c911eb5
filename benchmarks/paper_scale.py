"""Cost of LiRA's stages at the paper's model sizes, with random weights (issue 31).

    .venv/bin/python benchmarks/paper_scale.py                 # GPU: paper shapes
    .venv/bin/python benchmarks/paper_scale.py --tiny          # CPU: tiny shapes (CI runs it)
    .venv/bin/python benchmarks/paper_scale.py --lasr-steps 1000 --data /path/to/xquad-r

Models are ``random:`` references (``configs/arch/``): h = Qwen3-Embedding-8B's shape (36
layers, d 4096, bf16, frozen, last-token pooling), g = mT5-XL's encoder (24 layers, d 2048,
fp32, fine-tuned in full under bf16 autocast); ``--tiny`` uses 2-layer, d 64 shapes in fp32.
**Cost only, never a result**: the weights are random, so every score the stages print is noise.

Stages (the real engines of ``lira run``, on the paths users run): translate with reference
translators only (no model generates: XQuAD-R's gold English as Arca's train-only anchor, and
two inference translators, so the Actor picks between two candidates whenever LiRA embeds a
foreign text), Arca with Table 9's settings (pool 4, batch 1, 120 steps), LaSR for a fixed
number of steps (its validation split: the fixed-fusion fit, evaluations every half run and the
selection; queue re-scoring on), one baseline (CLEAR; LoRA at paper shapes) and compare
(backbone, LiRA, its components, the fixed fusion and the baseline on XQuAD-R de's validation
and test questions against the English sentences, no bootstrap, no diagnostics). Per stage it
prints wall time, time per optimisation step, h's encode throughput (texts/s through h's
forward batches), peak GPU memory (``torch.cuda.max_memory_allocated``), GPU memory allocated
when the stage starts (the previous stage's leftovers) and after they are released
(:func:`lira.models.devices.release_memory`, as ``lira run`` does), and mean GPU utilisation
(pynvml or nvidia-smi, sampled every 0.2 s; "n/a" without a GPU). A stage that fails is
reported on its row and the run goes on (the exit status is then 1). Then the ratios against
paper 004's Tables 13-14
(pass@0 offline on A100: Arca 0.15 h, LaSR 0.20 h) and h's encode throughput against a plain
transformers forward loop over the same length-sorted batches (1.0 is the physical floor: the
loop does nothing but the forward).
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from argparse import Namespace
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:  # run as a script from anywhere
    sys.path.insert(0, str(REPO))

from arca.config import ArcaConfig  # noqa: E402
from evaluators.config import EvalConfig  # noqa: E402
from lasr.config import LaSRConfig  # noqa: E402
from lira.baselines.config import BaselinesConfig  # noqa: E402
from lira.config import DataConfig, ModelsConfig  # noqa: E402
from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig  # noqa: E402
from pipeline.runconfig import RunConfig  # noqa: E402

PAPER_SECONDS = {"arca": 0.15 * 3600, "lasr": 0.20 * 3600}
"""Paper 004 Tables 13-14, pass@0 offline on A100: Arca 0.15 h, LaSR 0.20 h."""
COST_ONLY = "random weights: cost only, never a result"


@dataclass
class StageCost:
    """What one stage cost."""

    name: str
    wall: float = 0.0
    steps: int = 0
    step_seconds: float = 0.0
    encoded: int = 0
    encode_seconds: float = 0.0
    peak_gb: float | None = None
    util: list[float] = field(default_factory=list)
    held_gb: float | None = None
    """GPU memory allocated when the stage started, before the previous stage was released."""
    released_gb: float | None = None
    """GPU memory allocated after the previous stage was released (what the stage started on)."""
    error: str = ""
    """Why the stage failed ('' when it ran)."""

    def row(self) -> list[str]:
        """The printed cells."""
        step = f"{self.step_seconds / self.steps:.3f}" if self.steps else "-"
        tps = f"{self.encoded / self.encode_seconds:.1f}" if self.encode_seconds else "-"
        util = f"{sum(self.util) / len(self.util):.0f}%" if self.util else "n/a"
        gb = [f"{v:.2f}" if v is not None else "n/a"
              for v in (self.peak_gb, self.held_gb, self.released_gb)]  # fmt: skip
        return [self.name, f"{self.wall:.1f}", step, tps, gb[0], util, gb[1], gb[2],
                f"FAILED: {self.error}" if self.error else "ok"]  # fmt: skip


HEAD = ["stage", "wall s", "s/step", "h texts/s", "peak GPU GB", "GPU util", "GB at start",
        "GB released", "status"]  # fmt: skip
"""The table's columns (:meth:`StageCost.row`)."""


# ---------------------------------------------------------------------------- measuring
class Meter:
    """Counts the texts h encodes (``Backbone._encode``: the batches it runs, not memo hits)
    and the time of the trainers' loops."""

    def __init__(self) -> None:
        self.texts, self.seconds = 0, 0.0
        self.loop_seconds, self.loop_steps = 0.0, 0

    @contextlib.contextmanager
    def installed(self) -> Iterator[None]:
        """Wrap ``Backbone._encode`` and ``LaSRTrainer.train`` while the stages run."""
        from lasr.trainer import LaSRTrainer
        from lira.models.backbone import Backbone

        encode, train = Backbone._encode, LaSRTrainer.train
        meter = self

        def timed_encode(self: Any, texts: list[str], *args: Any, **kwargs: Any) -> Any:
            t0 = _now()
            out = encode(self, texts, *args, **kwargs)
            meter.texts += len(texts)
            meter.seconds += _now() - t0
            return out

        def timed_train(self: Any, *args: Any, **kwargs: Any) -> Any:
            t0, s0 = _now(), self.step
            out = train(self, *args, **kwargs)
            meter.loop_seconds += _now() - t0
            meter.loop_steps += self.step - s0
            return out

        Backbone._encode, LaSRTrainer.train = timed_encode, timed_train  # type: ignore[method-assign]
        try:
            yield
        finally:
            Backbone._encode, LaSRTrainer.train = encode, train  # type: ignore[method-assign]


def _now() -> float:
    """perf_counter after the GPU has finished its queued work."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    return time.perf_counter()


class UtilSampler:
    """Mean GPU utilisation (%) while a stage runs: pynvml, else nvidia-smi, else nothing."""

    def __init__(self, interval: float = 0.2) -> None:
        self.interval, self.samples = interval, []
        self._stop = threading.Event()
        self._read = self._reader()

    @staticmethod
    def _reader() -> Any:
        if not torch.cuda.is_available():
            return None
        index = torch.cuda.current_device()
        try:
            import pynvml

            pynvml.nvmlInit()
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
            return lambda: float(pynvml.nvmlDeviceGetUtilizationRates(handle).gpu)
        except Exception:  # not installed, or no NVML: try the CLI
            if shutil.which("nvidia-smi") is None:
                return None
            cmd = ["nvidia-smi", f"--id={index}", "--query-gpu=utilization.gpu",
                   "--format=csv,noheader,nounits"]  # fmt: skip
            return lambda: float(subprocess.run(cmd, capture_output=True, text=True).stdout)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.samples.append(self._read())
            except (ValueError, OSError):
                pass

    @contextlib.contextmanager
    def running(self) -> Iterator[list[float]]:
        """Sample in a thread while the block runs; yields the samples list."""
        thread = None
        if self._read is not None:
            thread = threading.Thread(target=self._loop, daemon=True)
            thread.start()
        try:
            yield self.samples
        finally:
            self._stop.set()
            if thread is not None:
                thread.join()


def run_stage(name: str, fn: Any, meter: Meter) -> tuple[StageCost, Any]:
    """Release the previous stage (as ``lira run`` does), run ``fn()`` and measure it; a stage
    that raises is recorded in ``error`` (its result is None)."""
    from lira.models.devices import release_memory

    gpu = torch.cuda.is_available()
    held = torch.cuda.memory_allocated() / 2**30 if gpu else None
    release_memory()
    released = torch.cuda.memory_allocated() / 2**30 if gpu else None
    if gpu:
        torch.cuda.reset_peak_memory_stats()
    meter.texts, meter.seconds, meter.loop_seconds, meter.loop_steps = 0, 0.0, 0.0, 0
    sampler = UtilSampler()
    t0 = _now()
    result, error = None, ""
    with sampler.running() as util:
        try:
            result = fn()
        except Exception as e:  # reported on the stage's row; the next stages still run
            error = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200]
            logging.getLogger(__name__).exception("stage %s failed", name)
    cost = StageCost(name, wall=_now() - t0, util=list(util), held_gb=held,
                     released_gb=released, error=error)  # fmt: skip
    cost.encoded, cost.encode_seconds = meter.texts, meter.seconds
    if torch.cuda.is_available():
        cost.peak_gb = torch.cuda.max_memory_allocated() / 2**30
    return cost, result


# ---------------------------------------------------------------------------- the run
def bench_config(out: Path, tiny: bool, lasr_steps: int, arca_steps: int, data: str) -> RunConfig:
    """The run: random paper-shape (or tiny) models, gold references only, Table 9's Arca."""
    gpu = torch.cuda.is_available()
    if tiny:
        models = ModelsConfig(backbone="random:tiny-qwen3-embedding", backbone_pooling="last",
                              encoder="random:tiny-mt5-encoder", backbone_max_length=64,
                              encoder_max_length=64)  # fmt: skip
    else:
        models = ModelsConfig(backbone="random:qwen3-embedding-8b", backbone_pooling="last",
                              encoder="random:mt5-xl-encoder", backbone_max_length=512,
                              encoder_max_length=512, dtype="bfloat16",
                              encoder_dtype="float32")  # fmt: skip
    train = ["de"] if tiny else ["en", "de", "es"]  # the XQuAD-R en/de/es
    data_cfg = DataConfig(path=data, train_languages=train, eval_languages=["de"],
                          max_train_queries=8 if tiny else 0, max_eval_queries=8 if tiny else 0,
                          dev_fraction=0.25)  # fmt: skip
    translation = TranslationConfig(  # gold anchors for Arca, two candidates at inference
        pass_at_k=0,
        num_candidates=3,
        llm_translators=[],
        mt_translators=[
            TranslatorConfig(name="xquad-en", kind="reference", role="mt", train_only=True),
            TranslatorConfig(name="mt-a", kind="reference", role="mt"),
            TranslatorConfig(name="mt-b", kind="reference", role="mt"),
        ],
        critic=CriticConfig(kind="none"),
    )
    precision = "bf16" if gpu else "no"
    arca = ArcaConfig(pool_size=4, batch_size=1, steps=arca_steps, mixed_precision=precision,
                      eval_batch_size=32 if tiny else 64, log_every=max(arca_steps, 1),
                      save_every=max(arca_steps, 1))  # fmt: skip
    lasr = LaSRConfig(steps=lasr_steps, mixed_precision=precision, encode_batch_size=32 if tiny
                      else 64, fusion_dim=32 if tiny else 256, log_every=max(lasr_steps, 1),
                      save_every=max(lasr_steps, 1), eval_every=max(lasr_steps // 2, 1),
                      queue_rescore=True)  # fmt: skip
    baselines = BaselinesConfig(methods=["clear"], steps=2 if tiny else 10, batch_size=4,
                                lora=not tiny, gradient_checkpointing=not tiny)  # fmt: skip
    return RunConfig(
        output_dir=str(out),
        models=models,
        data=data_cfg,
        translation=translation,
        arca=arca,
        lasr=lasr,
        baselines=baselines,
        eval=EvalConfig(
            scenarios=["lang-en"], bootstrap=0, diagnostics=False, batch_size=32 if tiny else 64
        ),  # XQuAD-R de -> English sentences
    )


def import_candidates(cfg: RunConfig) -> int:
    """Stand in for imported machine translations (``lira translate --import``): every active
    inference ``reference`` translator gets a candidate for every train, validation and test
    question (XQuAD-R's English original, word order rotated by the translator's position so
    the candidates differ; cost only), so the Actor picks at inference; returns the rows."""
    from lira.data.splits import load_splits
    from lira.data.xquad_r import plain_qid
    from lira.translation.engine import store_path
    from lira.translation.store import TranslationStore

    splits = load_splits(cfg.data)
    ds = splits.dataset
    refs = [t for t in cfg.translation.active_translators()
            if t.kind == "reference" and not t.train_only]  # fmt: skip
    if ds is None or not refs:
        return 0
    records = [*splits.train_sources, *splits.dev_sources, *splits.eval_sources]
    n = 0
    with TranslationStore(store_path(cfg)) as store:
        for k, t in enumerate(refs):
            rows = []
            for r in records:
                try:
                    words = ds.question("en", plain_qid(r.id)).text.split()
                except KeyError:  # no English original: no candidate
                    continue
                rows.append((r.text, r.lang, " ".join(words[k:] + words[:k]), r.id))
            n += store.add_reference(t, rows)
    return n


def plain_forward_ratio(cfg: RunConfig, n: int, batch_size: int) -> tuple[float, float]:
    """h's texts/s through ``Backbone.encode`` and through a plain transformers forward loop
    over the same length-sorted batches, on the default device."""
    from lira.data.splits import load_splits
    from lira.models import load_backbone
    from lira.models.devices import resolve_device

    device = resolve_device()
    backbone = load_backbone(cfg.models, device=device)
    corpus = load_splits(cfg.data).eval.corpus
    texts = [d.text for d in corpus][:n]
    order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))
    batches = [
        [texts[i] for i in order[s : s + batch_size]] for s in range(0, len(texts), batch_size)
    ]

    def plain() -> None:
        with torch.inference_mode():
            for batch in batches:
                enc = backbone.tokenizer(batch, padding=True, truncation=True,
                                         max_length=backbone.max_length, return_tensors="pt")  # fmt: skip
                enc = {k: v.to(device) for k, v in enc.items() if k != "token_type_ids"}
                _ = backbone.model(**enc).last_hidden_state  # [B, L, d]

    def lira() -> None:
        backbone.encode(texts, kind="document", batch_size=batch_size)

    lira()  # warm-up (kernels, allocator)
    timings = {}
    for name, fn in (("plain", plain), ("lira", lira)):
        t0 = _now()
        fn()
        timings[name] = len(texts) / (_now() - t0)
    return timings["lira"], timings["plain"]


def main(argv: list[str] | None = None) -> list[StageCost]:
    """Run the stages, print the table and the ratios; returns the per-stage costs."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tiny", action="store_true", help="tiny random shapes (CPU, CI)")
    ap.add_argument("--lasr-steps", type=int, default=None, help="LaSR steps (1000; tiny 4)")
    ap.add_argument(
        "--arca-steps", type=int, default=None, help="Arca steps (Table 9: 120; tiny 4)"
    )
    ap.add_argument("--data", default="demo", help="XQuAD-R folder (default: the shipped demo)")
    ap.add_argument("--out", default="", help="output folder (default: a temporary one)")
    ap.add_argument("--encode-texts", type=int, default=None, help="texts of the h/plain ratio")
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    lasr_steps = args.lasr_steps if args.lasr_steps is not None else (4 if args.tiny else 1000)
    arca_steps = args.arca_steps if args.arca_steps is not None else (4 if args.tiny else 120)
    threads = torch.get_num_threads()
    if args.tiny:  # d = 64 matmuls gain nothing from intra-op threads, and lose on a busy CPU
        torch.set_num_threads(1)
    try:
        return _run(args, lasr_steps, arca_steps)
    finally:
        torch.set_num_threads(threads)


def _run(args: Namespace, lasr_steps: int, arca_steps: int) -> list[StageCost]:
    """The stages, the table and the ratios of :func:`main`."""
    tmp = None
    if not args.out:
        tmp = tempfile.TemporaryDirectory(prefix="paper_scale-")
    out = Path(args.out or tmp.name)  # type: ignore[union-attr]
    cfg = bench_config(out, args.tiny, lasr_steps, arca_steps, args.data)

    from arca.engine import run_arca
    from evaluators.compare import run_compare
    from lasr.engine import run_lasr
    from lira.baselines.engine import run_baselines
    from lira.translation.engine import run_translate

    meter, costs = Meter(), []
    with meter.installed():
        stages = [("translate", lambda: (run_translate(cfg), import_candidates(cfg))),
                  ("arca", lambda: run_arca(cfg)),
                  ("lasr", lambda: run_lasr(cfg)),
                  ("baseline", lambda: run_baselines(cfg)),
                  ("compare", lambda: run_compare(cfg))]  # fmt: skip
        for name, fn in stages:
            cost, result = run_stage(name, fn, meter)
            if name == "arca" and result is not None:
                cost.steps = int(result.get("step", 0))
                cost.step_seconds = float(result.get("seconds", 0.0))
            if name == "lasr":
                cost.steps, cost.step_seconds = meter.loop_steps, meter.loop_seconds
            costs.append(cost)
    n = args.encode_texts or (64 if args.tiny else 1024)
    bs = cfg.eval.batch_size
    lira_tps, plain_tps = plain_forward_ratio(cfg, n, bs)

    device = torch.cuda.get_device_name() if torch.cuda.is_available() else "CPU only"
    shape = "tiny shapes" if args.tiny else "paper shapes (Qwen3-Embedding-8B h, mT5-XL g)"
    print(f"\npaper_scale: {device}, {shape}, {COST_ONLY}")
    print(f"Arca {arca_steps} steps (pool 4, batch 1), LaSR {lasr_steps} steps, "
          f"torch {torch.__version__}")  # fmt: skip
    head = HEAD
    rows = [head] + [c.row() for c in costs]
    widths = [max(len(r[i]) for r in rows) for i in range(len(head))]
    for r in rows:
        print("  ".join(cell.rjust(w) if i else cell.ljust(w)
                        for i, (cell, w) in enumerate(zip(r, widths))))  # fmt: skip
    print(f"{'total':<{widths[0]}}  {sum(c.wall for c in costs):>{widths[1]}.1f}")
    print("\nratios")
    for c in costs:
        if c.name in PAPER_SECONDS:
            hours = PAPER_SECONDS[c.name] / 3600
            print(f"  {c.name} wall / paper Tables 13-14 (pass@0 offline, A100, {hours:.2f} h): "
                  f"{c.wall / PAPER_SECONDS[c.name]:.3f}")  # fmt: skip
    print(f"  h encode / plain transformers forward ({n} texts, batch {bs}): "
          f"{lira_tps:.1f} / {plain_tps:.1f} texts/s = {lira_tps / plain_tps:.2f} "
          "(1.0 = the floor)")  # fmt: skip
    if tmp is not None:
        tmp.cleanup()
    return costs


if __name__ == "__main__":
    sys.exit(1 if any(c.error for c in main()) else 0)
