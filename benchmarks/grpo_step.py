"""Cost of one ``lira tune-translator`` GRPO step: generation vs reward vs update.

    .venv/bin/python benchmarks/grpo_step.py CONFIG [overrides ...] [--steps 3]

Runs the real engine (:func:`arca.tuning.engine.run_tune_translator`: TRL's ``GRPOTrainer``,
LoRA through peft, the Arca anchor reward) for ``--steps`` steps into a temporary folder, with
timers around the three parts of a step: the policy sampling ``batch_size x num_generations``
completions (TRL's ``_generate_single_turn``), the reward (Arca's anchors of every completion)
and the rest (log-probabilities, the loss's forward and backward, the optimiser step). The
config needs its Arca checkpoint (``lira arca CONFIG`` first, or
``tune_translator.arca_checkpoint=...``). Prints per-step medians over the steps after the
first (warm-up) and each part's share, so a GPU user can size a run: generation scales with
completions x tokens, the update with the prompt + completion tokens.

Measured 2026-11-29 on the 2-core CPU (``configs/xquad_minilm.yaml output_dir=out/xq``,
Gemma-3-270M, 4 sources x 4 samples, ~15 completion tokens): see docs/tune-translator.md.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from pipeline.runconfig import load_config

PARTS = ("step", "generation", "reward")
"""What is timed: the whole training step, and the two parts of it measured directly."""


def timed(owner: type, name: str, spent: dict[str, list[float]], part: str) -> Callable[[], None]:
    """Wrap ``owner.name`` so each call adds its seconds to ``spent[part][-1]`` (the ``step``
    part first opens a new entry for every part); returns the undo."""
    original = getattr(owner, name)

    def wrapper(*args: Any, **kwargs: Any) -> Any:
        if part == "step":
            for p in PARTS:
                spent[p].append(0.0)
        t0 = time.perf_counter()
        try:
            return original(*args, **kwargs)
        finally:
            spent[part][-1] += time.perf_counter() - t0

    setattr(owner, name, wrapper)
    return lambda: setattr(owner, name, original)


def main() -> None:
    """Run ``--steps`` GRPO steps of the config's translator and print the cost split."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("config")
    ap.add_argument("overrides", nargs="*", help="dotted overrides, e.g. output_dir=out/xq")
    ap.add_argument("--steps", type=int, default=3, help="GRPO steps (the first is warm-up)")
    args = ap.parse_args()
    if args.steps < 2:
        raise SystemExit("--steps must be >= 2 (the first step is warm-up)")
    from trl import GRPOTrainer

    from arca.tuning.engine import run_tune_translator
    from arca.tuning.reward import AnchorReward
    from lira.translation.tuning import base_translator

    spent: dict[str, list[float]] = defaultdict(list)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = load_config(
            args.config,
            [*args.overrides, f"tune_translator.steps={args.steps}",
             f"tune_translator.output={tmp}", "tune_translator.save_steps=100000"],
        )  # fmt: skip
        tc = cfg.tune_translator
        undo = [
            timed(GRPOTrainer, "training_step", spent, "step"),
            timed(GRPOTrainer, "_generate_single_turn", spent, "generation"),
            timed(AnchorReward, "score", spent, "reward"),
        ]
        try:
            run_tune_translator(cfg)
        finally:
            for u in undo:
                u()
    steady = {k: v[1:] for k, v in spent.items()}
    med = {k: statistics.median(v) for k, v in steady.items()}
    update = [s - g - r for s, g, r in zip(steady["step"], steady["generation"], steady["reward"])]
    med["update"] = statistics.median(update)
    n = tc.batch_size * tc.num_generations
    print(f"GRPO step, {base_translator(cfg).model}: "
          f"{tc.batch_size} sources x {tc.num_generations} samples = {n} completions, "
          f"LoRA r {tc.lora_r}, median of {len(update)} steps after warm-up")  # fmt: skip
    for part in ("generation", "reward", "update"):
        print(f"  {part:<10} {med[part]:7.2f} s  ({med[part] / med['step']:.0%} of the step)")
    print(f"  {'step':<10} {med['step']:7.2f} s  ({med['step'] / n:.2f} s per completion)")
    print(f"  generation / update = {med['generation'] / med['update']:.2f}")


if __name__ == "__main__":
    main()
