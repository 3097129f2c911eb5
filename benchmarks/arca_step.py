"""Arca step time: offline (store) vs online translation, and vs the backbone forward alone.

    .venv/bin/python benchmarks/arca_step.py [--steps 8] [--batch-size 8] [--critic none]

Demo models (g = demo:mt5, h = demo:minilm, translator = demo:marian), XQuAD-R German
questions from the shipped demo subset. Offline: the store is filled before training and each
step only reads it. Online: every step sends its (new) sources through the pool
(``fill_store``: translate, clean, score, store) before the Arca step. The backbone-forward
reference is one frozen forward of the same step's candidate texts (``Backbone.token_stream``
with ``last_hidden``). Figures are medians over the timed steps (the first step is warm-up).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import tempfile
import time
from pathlib import Path

import torch

from arca.config import ArcaConfig
from arca.data import ArcaItem, StoreCandidates, build_items
from arca.model import ArcaModel
from arca.trainer import ArcaTrainer
from lira.config import from_dict, to_dict
from lira.data.types import Record
from lira.models import load_backbone, load_encoder
from lira.translation.config import TranslatorConfig
from lira.translation.engine import fill_store
from lira.translation.store import TranslationStore
from pipeline.runconfig import RunConfig


def german_questions(n: int) -> list[str]:
    """The first n distinct German questions of the demo (or shared) XQuAD-R file."""
    import lira

    for folder in (
        Path(lira.__file__).parent / "data/demo/xquad-r",
        Path(
            os.environ.get(
                "LIRA_XQUAD_R", Path(__file__).resolve().parents[2] / "shared/data/xquad-r"
            )
        ),
    ):
        f = folder / "de.json"
        if f.is_file():
            data = json.loads(f.read_text(encoding="utf-8"))
            qs = [q["question"] for a in data["data"] for p in a["paragraphs"] for q in p["qas"]]
            return list(dict.fromkeys(qs))[:n]
    raise SystemExit(
        "no XQuAD-R de.json found (demo subset, $LIRA_XQUAD_R or ../shared/data/xquad-r)"
    )


def run_config(out: Path, critic: str) -> RunConfig:
    """pass@0 with the demo Marian MT model; critic none (default) or the SmolLM2 judge."""
    cfg = RunConfig(output_dir=str(out))
    data = to_dict(cfg)
    data["translation"].update(
        pass_at_k=0,
        num_candidates=1,
        mt_translators=[
            to_dict(
                TranslatorConfig(
                    name="demo-marian",
                    kind="transformers",
                    role="mt",
                    model="demo:marian",
                    max_new_tokens=48,
                    batch_size=16,
                )
            )
        ],
        critic={"kind": critic, "model": "demo:smollm2", "batch_size": 16},
    )
    return from_dict(RunConfig, data)


def time_steps(trainer: ArcaTrainer, steps: int) -> list[float]:
    """Wall time of each optimisation step."""
    out = []
    for _ in range(steps):
        t0 = time.perf_counter()
        trainer.train_step()
        out.append(time.perf_counter() - t0)
    return out


def main() -> None:
    """Run both modes and print the ratios."""
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--batch-size", type=int, default=8)
    ap.add_argument("--critic", choices=["none", "transformers"], default="none")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    n = (args.steps + 1) * args.batch_size
    sources = german_questions(n)
    arca_cfg = ArcaConfig(batch_size=args.batch_size, steps=args.steps + 1, train_encoder=True)
    with tempfile.TemporaryDirectory() as tmp:
        cfg = run_config(Path(tmp), args.critic)
        active = cfg.translation.active_translators()
        backbone = load_backbone(cfg.models)

        def trainer_for(items, fn, name):
            torch.manual_seed(0)
            model = ArcaModel.from_config(cfg.models, arca_cfg, backbone, load_encoder(cfg.models))
            return ArcaTrainer(arca_cfg, model, items, Path(tmp) / name, candidate_fn=fn)

        # offline: fill the store first, then read only
        store = TranslationStore(Path(tmp) / "offline.sqlite")
        t0 = time.perf_counter()
        fill_store(cfg, {"de": sources}, store)
        fill_s = time.perf_counter() - t0
        fetch = StoreCandidates(cfg, store, active, online=False)
        items = build_items(
            [Record(str(i), s, "de") for i, s in enumerate(sources)], fetch, online=False
        )
        off = trainer_for(items, None, "offline")
        off_times = time_steps(off, args.steps + 1)[1:]

        # online: empty store, every step translates its own sources through the pool
        online_store = TranslationStore(Path(tmp) / "online.sqlite")
        fetch_on = StoreCandidates(cfg, online_store, active, online=True)
        on = trainer_for([ArcaItem(s, "de", None) for s in sources], fetch_on, "online")
        on_times = time_steps(on, args.steps + 1)[1:]

        # backbone forward alone on one step's candidate texts
        texts = [c.text for it in off.batch_items(1, 0) for c in it.candidates]
        bb_times = []
        for _ in range(args.steps + 1):
            t0 = time.perf_counter()
            with torch.no_grad():
                backbone.token_stream(texts, stream="last_hidden")
            bb_times.append(time.perf_counter() - t0)
        bb_times = bb_times[1:]
        store.close()
        online_store.close()

    off_s, on_s, bb_s = (statistics.median(x) for x in (off_times, on_times, bb_times))
    print(f"Arca step (batch {args.batch_size}, critic={args.critic}, threads={args.threads}), "
          f"median of {args.steps} steps")  # fmt: skip
    print(f"  offline (store read)      : {off_s * 1000:8.1f} ms/step  "
          f"(store filled beforehand in {fill_s:.1f} s)")  # fmt: skip
    print(f"  online (pool per step)    : {on_s * 1000:8.1f} ms/step")
    print(f"  backbone forward alone    : {bb_s * 1000:8.1f} ms ({len(texts)} candidate texts)")
    print(f"ratio online / offline          : {on_s / off_s:6.2f}x")
    print(f"ratio Arca step / backbone fwd  : {off_s / bb_s:6.2f}x")


if __name__ == "__main__":
    main()
