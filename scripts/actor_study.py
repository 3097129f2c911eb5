"""How the Actor picks on the validation split (issue 39): Arca variants, ``eval.actor`` each.

Needs a filled translation store (SmolLM2 + the XQuAD-R reference on the training sources,
SmolLM2 on the validation sources) scored by the embedding critic, e.g. for a config CONFIG whose
``data.max_train_queries`` is 100 and ``translation.critic`` is ``{kind: embedding, cos_low: 0.8,
cos_high: 1.0}``: ``lira translate CONFIG``. Then

    python scripts/actor_study.py CONFIG [VARIANT ...]

trains Arca once per variant (into <output_dir>/arca, overwritten; each summary is copied to
<output_dir>/summary_<variant>.json) and prints its ``eval.actor`` and ``eval_gold`` anchor.
The numbers of 2026-11-26 are in docs/validation.md.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from pathlib import Path

from arca.engine import run_arca
from pipeline.runconfig import load_config

VARIANTS: dict[str, dict[str, object]] = {
    "A_shipped": {"use_llm_critic": False},
    "B_critic_raw_none": {"use_llm_critic": True},
    "C_critic_std_mean": {"use_llm_critic": True, "actor_features": "standardized",
                          "reward_baseline": "mean"},
    "D_C+distill_ridge": {"use_llm_critic": True, "actor_features": "standardized",
                          "reward_baseline": "mean", "objective": "distill",
                          "distill_solver": "ridge"},
    "E_critic_std_mean_lr1e-2": {"use_llm_critic": True, "actor_features": "standardized",
                                 "reward_baseline": "mean", "actor_lr": 1e-2},
}  # fmt: skip


def main() -> None:
    """Train each named variant (all by default) and print its selection metrics."""
    cfg = load_config(sys.argv[1])
    out = Path(cfg.output_dir)
    for name in sys.argv[2:] or list(VARIANTS):
        t0 = time.time()
        arca = dataclasses.replace(cfg.arca, save_every=10**6, **VARIANTS[name])
        s = run_arca(dataclasses.replace(cfg, arca=arca), resume=False)
        ev, gold = s.get("eval", {}), s.get("eval_gold", {})
        row = {"variant": name, "seconds": round(time.time() - t0), "actor": ev.get("actor"),
               "gold": {k: gold.get(k) for k in ("cos", "cos_shuffled", "n")}}  # fmt: skip
        print("RESULT", json.dumps(row), flush=True)
        shutil.copy(out / "arca" / "summary.json", out / f"summary_{name}.json")


if __name__ == "__main__":
    main()
