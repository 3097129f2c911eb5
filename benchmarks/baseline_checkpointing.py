"""Peak memory and time of one baseline training step with and without activation checkpointing.

    .venv/bin/python benchmarks/baseline_checkpointing.py [--model demo:minilm] [--batch 16]
        [--negatives 4] [--tokens 256]

``baselines.gradient_checkpointing`` recomputes h's layers in the backward pass instead of
keeping their activations. One step here is what a baseline's step costs in h: B queries and
B × (1 + K) passages through the trained backbone (:class:`lira.models.Backbone`, with
:func:`lira.baselines.contrastive.enable_activation_checkpointing` exactly as the trainer calls
it), an in-batch InfoNCE loss (paper 000 Eq. 1) and its backward. Each setting runs in a fresh
subprocess: the peak is the first step's growth of ``torch.cuda.max_memory_allocated`` on a
GPU, else of the process's peak RSS (``ru_maxrss`` over the resident size before the step; the
optimizer's new state is in both); the time is the second step's. Printed: peak and seconds per setting and the
ratios on / off (expected: memory well below 1, time above 1, about one extra forward).
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time

import torch
import torch.nn.functional as F

from lira.baselines.contrastive import enable_activation_checkpointing
from lira.config import ModelsConfig
from lira.models import load_backbone
from lira.models.devices import resolve_device

WORDS = "the river flows past the old mill where children play in summer light".split()


def texts(n: int, tokens: int, seed: int) -> list[str]:
    """``n`` distinct texts of about ``tokens`` word-piece tokens (each is cut at the limit)."""
    g = torch.Generator().manual_seed(seed)
    picks = torch.randint(len(WORDS), (n, tokens), generator=g).tolist()
    return [f"{i} " + " ".join(WORDS[j] for j in row) for i, row in enumerate(picks)]


def rss_now() -> int:
    """This process's resident memory now (bytes), from /proc/self/statm."""
    with open("/proc/self/statm", encoding="ascii") as f:
        return int(f.read().split()[1]) * resource.getpagesize()


def one_step(args: argparse.Namespace, checkpointing: bool) -> dict[str, float]:
    """Peak bytes and seconds of one forward + backward + optimizer step (this process)."""
    device = resolve_device()
    models = ModelsConfig(backbone=args.model, backbone_max_length=args.tokens)
    h = load_backbone(models, device=device)
    if checkpointing:
        enable_activation_checkpointing(h.model)
    h.train()
    opt = torch.optim.AdamW([p for p in h.parameters() if p.requires_grad], lr=2e-5)
    queries = texts(args.batch, args.tokens // 4, 0)
    passages = texts(args.batch * (1 + args.negatives), args.tokens, 1)

    def step() -> None:
        q = h(queries, kind="query")  # [B, d]
        p = h(passages, kind="document")  # [B(1+K), d]; row i's positive is passage i
        loss = F.cross_entropy(q @ p.T / 0.05, torch.arange(len(q), device=q.device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    cuda = torch.device(device).type == "cuda"
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
    else:
        base, load_peak = rss_now(), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    step()  # the first step: its peak (activations, gradients, the optimizer's new state)
    if cuda:
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
    else:
        after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # a step that stays under the model-loading peak leaves ru_maxrss unchanged: unmeasured
        peak = (after * 1024 - base) if after > load_peak else float("nan")
    t0 = time.perf_counter()
    step()  # the second: its time
    if cuda:
        torch.cuda.synchronize()
    seconds = time.perf_counter() - t0
    return {"peak_bytes": float(peak), "seconds": seconds, "cuda": float(cuda)}


def measure(args: argparse.Namespace, checkpointing: bool) -> dict[str, float]:
    """:func:`one_step` in a fresh interpreter (so the peak starts clean)."""
    cmd = [sys.executable, __file__, "--model", args.model, "--batch", str(args.batch),
           "--negatives", str(args.negatives), "--tokens", str(args.tokens),
           "--one", "on" if checkpointing else "off"]  # fmt: skip
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> dict[str, float]:
    """Measure both settings, print the table and the ratios; returns the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="demo:minilm", help="backbone h (hub id, folder, demo:)")
    ap.add_argument("--batch", type=int, default=16, help="queries per step (B)")
    ap.add_argument("--negatives", type=int, default=4, help="hard negatives per query (K)")
    ap.add_argument("--tokens", type=int, default=256, help="passage length in tokens")
    ap.add_argument("--one", choices=["on", "off"], default=None, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one is not None:  # the subprocess: one setting, one JSON line
        print(json.dumps(one_step(args, args.one == "on")))
        return {}
    off, on = measure(args, False), measure(args, True)
    where = "GPU allocated" if on["cuda"] else "CPU peak RSS growth"
    print(f"one baseline step of {args.model}: {args.batch} queries, "
          f"{args.batch * (1 + args.negatives)} passages x {args.tokens} tokens ({where})")  # fmt: skip
    print("| checkpointing | peak MB | seconds |\n|---|---|---|")
    for name, r in (("off", off), ("on", on)):
        print(f"| {name} | {r['peak_bytes'] / 2**20:.0f} | {r['seconds']:.2f} |")
    ratios = {
        "memory_on_over_off": on["peak_bytes"] / off["peak_bytes"],
        "time_on_over_off": on["seconds"] / off["seconds"],
    }
    if ratios["memory_on_over_off"] != ratios["memory_on_over_off"]:  # NaN
        print("a step stayed under the model-loading peak: raise --batch or --tokens")
    print(f"memory on/off = {ratios['memory_on_over_off']:.2f}x, "
          f"time on/off = {ratios['time_on_over_off']:.2f}x")  # fmt: skip
    return ratios


if __name__ == "__main__":
    main()
