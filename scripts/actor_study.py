"""How the Actor picks on the validation split (issue 39): Arca variants, ``eval.actor`` each.

Needs a filled translation store (SmolLM2 + the XQuAD-R reference on the training sources,
SmolLM2 on the validation sources) scored by the embedding critic, e.g. for a config CONFIG whose
``data.max_train_queries`` is 100 and ``translation.critic`` is ``{kind: embedding, cos_low: 0.8,
cos_high: 1.0}``: ``lira translate CONFIG``. Then

    python scripts/actor_study.py CONFIG [VARIANT ...]

trains Arca once per variant (into <output_dir>/arca, overwritten; each summary is copied to
<output_dir>/summary_<variant>.json) and prints its ``eval.actor`` and ``eval_gold`` anchor, and
per-source figures over the validation sources with K >= 2 candidates: the share where the
Actor's arg-max is the reference (Wilson 95% interval), the mean entropy (bootstrap 95%
interval) and the critic's ceiling (the share where the critic scores the reference above every
other candidate; ties counted apart). The numbers of 2026-11-26 are in docs/validation.md.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from arca import engine
from arca.data import ArcaItem
from arca.engine import run_arca
from arca.metrics import evaluate_actor
from arca.model import ArcaModel
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
    "F_critic_raw_none_lr1e-2": {"use_llm_critic": True, "actor_lr": 1e-2},
}  # fmt: skip


def wilson(hits: float, n: int, z: float = 1.96) -> tuple[float, float]:
    """Wilson score 95% interval of a share of ``n`` trials."""
    if n == 0:
        return (float("nan"), float("nan"))
    p = hits / n
    mid, half = p + z * z / (2 * n), z * (p * (1 - p) / n + z * z / (4 * n * n)) ** 0.5
    return ((mid - half) / (1 + z * z / n), (mid + half) / (1 + z * z / n))


def per_source(
    model: ArcaModel, items: Sequence[ArcaItem], batch_size: int, reference: Sequence[str]
) -> dict[str, object]:
    """Per-source selection on the items with >= 2 candidates and a reference among them."""
    picks, ent, above, tie = [], [], 0, 0
    for it in items:
        cands = it.candidates or []
        ref = [c for c in cands if c.translator in reference]
        if len(cands) < 2 or not ref or any(c.scores is None for c in cands):
            continue
        m = evaluate_actor(model, [it], batch_size, reference)
        if not m.get("n"):
            continue
        picks.append(m["argmax_reference"])
        ent.append(m["entropy"])
        best_other = max(sum(c.scores) for c in cands if c.translator not in reference)
        above += sum(ref[0].scores) > best_other
        tie += sum(ref[0].scores) == best_other
    n = len(picks)
    if not n:
        return {"n": 0}
    e = torch.tensor(ent)
    boot = e[torch.randint(n, (2000, n), generator=torch.Generator().manual_seed(0))].mean(1)
    return {
        "n": n,
        "argmax_reference": sum(picks) / n,
        "argmax_reference_ci": wilson(sum(picks), n),
        "entropy": float(e.mean()),
        "entropy_ci": (float(boot.quantile(0.025)), float(boot.quantile(0.975))),
        "critic_reference_above": above / n,
        "critic_reference_above_ci": wilson(above, n),
        "critic_tie": tie / n,
    }


def main() -> None:
    """Train each named variant (all by default) and print its selection metrics."""
    cfg = load_config(sys.argv[1])
    out = Path(cfg.output_dir)
    found: dict[str, object] = {}

    def measured(
        model: ArcaModel, items: Sequence[ArcaItem], batch_size: int, reference: Sequence[str] = ()
    ) -> dict[str, object]:
        found.update(per_source(model, items, batch_size, reference))
        return evaluate_actor(model, items, batch_size, reference)

    engine.evaluate_actor = measured  # the engine's call, also measured per source
    for name in sys.argv[2:] or list(VARIANTS):
        t0 = time.time()
        found.clear()
        arca = dataclasses.replace(cfg.arca, save_every=10**6, **VARIANTS[name])
        s = run_arca(dataclasses.replace(cfg, arca=arca), resume=False)
        ev, gold = s.get("eval", {}), s.get("eval_gold", {})
        row = {"variant": name, "seconds": round(time.time() - t0), "actor": ev.get("actor"),
               "gold": {k: gold.get(k) for k in ("cos", "cos_shuffled", "n")},
               "per_source": dict(found)}  # fmt: skip
        print("RESULT", json.dumps(row), flush=True)
        shutil.copy(out / "arca" / "summary.json", out / f"summary_{name}.json")


if __name__ == "__main__":
    main()
