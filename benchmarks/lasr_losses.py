"""Forward+backward time and peak memory of the LaSR losses as the queue / candidate list grows.

    .venv/bin/python benchmarks/lasr_losses.py

corr_loss runs on N = K + B items (K = CorrQueue size, B = 32); soft_ndcg_loss on Q = 32
queries × C candidates. Peak memory is the growth of the process's peak RSS during one
forward+backward (each config in a fresh subprocess). Expected growth: ~quadratic in N
(one N×N matrix) and ~quadratic in C (Q×C×C), never worse.
"""

from __future__ import annotations

import json
import resource
import subprocess
import sys
import time

import torch

from lasr.losses import corr_loss, soft_ndcg_loss


def _peak_bytes(fn) -> int:
    """Extra resident memory (bytes) at the peak of one call of ``fn``.

    Measured as the growth of the process's maximum RSS (``ru_maxrss``), so every config runs
    in a fresh subprocess (see ``main``); large tensors are mmap-backed and returned to the OS
    when freed, so the RSS peak is the allocator's peak.
    """
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    fn()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024


def _time(fn, repeats: int = 5) -> float:
    fn()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    return (time.perf_counter() - start) / repeats


def bench_corr(k: int, b: int = 32) -> tuple[float, int]:
    """(seconds, peak bytes) of corr_loss forward+backward on N = k + b items."""
    g = torch.Generator().manual_seed(0)
    hist, gold = torch.randn(k, generator=g), torch.rand(k + b, generator=g)
    batch = torch.randn(b, generator=g, requires_grad=True)

    def step() -> None:
        corr_loss(torch.cat([hist, batch]), gold, 0.5, 0.1).backward()

    peak = _peak_bytes(step)
    return _time(step), peak


def bench_ndcg(c: int, q: int = 32) -> tuple[float, int]:
    """(seconds, peak bytes) of soft_ndcg_loss forward+backward on [q, c] scores."""
    g = torch.Generator().manual_seed(0)
    scores = torch.randn(q, c, generator=g).requires_grad_()
    labels = torch.zeros(q, c)
    labels[:, 0] = 1

    def step() -> None:
        soft_ndcg_loss(scores, labels, lambda_h=0.1, lambda_r=0.01).backward()

    peak = _peak_bytes(step)
    return _time(step), peak


def _run_one(kind: str, size: int) -> tuple[float, int]:
    """Run one config in a fresh interpreter (so ru_maxrss starts clean)."""
    out = subprocess.run(
        [sys.executable, __file__, "--one", kind, str(size)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    t, m = json.loads(out.strip().splitlines()[-1])
    return t, m


def main() -> None:
    """Print the table and the growth factors."""
    print("corr_loss (B = 32): N = K + B")
    print(f"{'K':>6} {'N':>6} {'ms':>9} {'peak MiB':>9} {'time x':>7} {'mem x':>7} {'(N/N0)^2':>9}")
    rows = [(k, *_run_one("corr", k)) for k in (256, 512, 1024, 2048, 4096)]
    k0, t0, m0 = rows[0]
    for k, t, m in rows:
        n_ratio = ((k + 32) / (k0 + 32)) ** 2
        print(
            f"{k:>6} {k + 32:>6} {1e3 * t:>9.2f} {m / 2**20:>9.2f} {t / t0:>7.1f} {m / m0:>7.1f} {n_ratio:>9.1f}"
        )
    print("\nsoft_ndcg_loss (Q = 32): Q x C x C pairwise")
    print(f"{'C':>6} {'ms':>9} {'peak MiB':>9} {'time x':>7} {'mem x':>7} {'(C/C0)^2':>9}")
    rows = [(c, *_run_one("ndcg", c)) for c in (16, 32, 64, 128, 256)]
    c0, t0, m0 = rows[0]
    for c, t, m in rows:
        print(
            f"{c:>6} {1e3 * t:>9.2f} {m / 2**20:>9.2f} {t / t0:>7.1f} {m / m0:>7.1f} {(c / c0) ** 2:>9.1f}"
        )


if __name__ == "__main__":
    if len(sys.argv) == 4 and sys.argv[1] == "--one":
        torch.set_num_threads(1)
        bench = bench_corr if sys.argv[2] == "corr" else bench_ndcg
        print(json.dumps(bench(int(sys.argv[3]))))
    else:
        main()
