"""Worker for test_ddp.py: ``accelerate launch ... tests/lasr/ddp_worker.py SPEC OUT`` (or plain
``python`` for one process).

SPEC is a JSON file: {"models": ModelsConfig dict, "base": LaSRConfig overrides shared by every
case, "cases": [{"name", "lasr": overrides, "resume_at": step or absent}], "finalize": bool}.
Every case trains a fresh head of one LiRA model (demo models, a small German XQuAD-R split) and
writes OUT/<name>-<rank>.pt: the net's and EMA's weights (g's too when it trains), the history
and the keys this process trained on at each step. A case with ``resume_at`` runs twice: once
through, then again from its step-``resume_at`` checkpoint with ``--resume`` (OUT/<name>-
resumed-<rank>.pt). ``finalize`` ends with :meth:`LaSRTrainer.finalize` and the barrier after
it, as ``lira lasr`` does.
"""

from __future__ import annotations

import gc
import json
import shutil
import sys
from pathlib import Path

import torch
from accelerate.utils import set_seed

from lasr.config import LaSRConfig
from lasr.model import LiRAModel
from lasr.trainer import LaSRTrainer
from lira.checkpoint.folders import step_dir
from lira.config import DataConfig, ModelsConfig, from_dict
from lira.data.splits import load_splits
from lira.data.types import PairData, RetrievalData
from pipeline.runconfig import RunConfig


def small_data() -> tuple[RetrievalData, PairData]:
    """16 German queries, their gold sentences and 16 other sentences; STS-like pairs of them."""
    train = load_splits(DataConfig(train_languages=["de"], eval_languages=["de"])).train
    queries = train.queries[:16]
    gold = {d for q in queries for d, v in train.qrels[q.id].items() if v > 0}
    corpus = [d for d in train.corpus if d.id in gold]
    corpus += [d for d in train.corpus if d.id not in gold][:16]
    data = RetrievalData(queries, corpus, train.qrels)
    text = {d.id: d.text for d in corpus}
    s1, s2, scores = [], [], []
    for i, q in enumerate(queries):
        g = next(d for d, v in train.qrels[q.id].items() if v > 0 and d in text)
        s1 += [q.text, q.text]
        s2 += [text[g], corpus[-1 - i].text]
        scores += [1.0, 0.0]
    return data, PairData(s1, s2, scores, ["de"] * len(s1), ["en"] * len(s1))


def train_case(
    model: LiRAModel,
    start: dict[str, dict[str, torch.Tensor]],
    cfg: LaSRConfig,
    data: RetrievalData,
    pairs: PairData | None,
    out: Path,
    resume: bool = False,
) -> tuple[LaSRTrainer, list[list[str]]]:
    """Train a fresh head (``cfg``) from the same start on every process; the keys drawn per step."""
    model.arca.encoder.load_state_dict(start["encoder"])
    model.arca.adaptor.load_state_dict(start["adaptor"])
    torch.manual_seed(cfg.seed + 7 * resume)  # a resumed run must load, not re-create, the head
    model.set_head(cfg)
    tr = LaSRTrainer(cfg, model, out, retrieval=data if cfg.task != "rank" else None, pairs=pairs)
    drawn: list[list[str]] = []
    step = tr.train_step

    def recording_step() -> dict[str, float]:
        row = step()
        drawn.append([k for keys in tr.drawn.values() for k in keys])
        return row

    tr.train_step = recording_step  # type: ignore[method-assign]
    set_seed(100, device_specific=True)  # dropout differs per process
    tr.train(resume=resume)
    return tr, drawn


def dump(tr: LaSRTrainer, drawn: list[list[str]], path: Path, start: dict) -> None:
    """This process's weights, history and drawn keys (and g's start when g trains)."""
    state = {f"net.{k}": v.detach().cpu().clone() for k, v in tr.net.state_dict().items()}
    state |= {f"ema.{k}": v.detach().cpu().clone() for k, v in tr.ema.shadow.state_dict().items()}
    if tr.train_g:
        enc = tr.model.arca.encoder.state_dict()
        state |= {f"g.{k}": v.detach().cpu().clone() for k, v in enc.items()}
    frozen = sorted(n for n, p in tr.net.named_parameters() if not p.requires_grad)
    torch.save(
        {"state": state, "history": tr.history, "drawn": drawn, "world": tr.world,
         "frozen": frozen, "g_start": start["encoder"] if tr.train_g else None},
        path,
    )  # fmt: skip


def main(spec_path: str, out: str) -> None:
    """Train every case of SPEC and dump each process's result under ``out``."""
    spec = json.loads(Path(spec_path).read_text(encoding="utf-8"))
    models = from_dict(ModelsConfig, spec["models"], "models")
    root = Path(out)
    set_seed(0)
    model = LiRAModel.from_config(RunConfig(output_dir=str(root), models=models), None)
    start = {
        "encoder": {k: v.clone() for k, v in model.arca.encoder.state_dict().items()},
        "adaptor": {k: v.clone() for k, v in model.arca.adaptor.state_dict().items()},
    }
    data, pairs = small_data()
    tr = None
    for case in spec["cases"]:
        cfg = LaSRConfig(**{**spec["base"], **case.get("lasr", {})})
        name, folder = case["name"], root / case["name"]
        with_pairs = pairs if cfg.task in ("auto", "rank") and case.get("pairs") else None
        tr = None
        gc.collect()  # the previous case's DDP wrapper (and its hooks on g) goes first
        tr, drawn = train_case(model, start, cfg, data, with_pairs, folder)
        rank = tr.accelerator.process_index
        dump(tr, drawn, root / f"{name}-{rank}.pt", start)
        if "resume_at" in case:
            if tr.accelerator.is_main_process:  # keep the checkpoint to resume from, only
                for later in range(case["resume_at"] + 1, cfg.steps + 1):
                    shutil.rmtree(step_dir(folder / "lasr", later), ignore_errors=True)
            tr.accelerator.wait_for_everyone()
            tr = None
            gc.collect()
            tr, drawn = train_case(model, start, cfg, data, with_pairs, folder, resume=True)
            dump(tr, drawn, root / f"{name}-resumed-{rank}.pt", start)
    if spec.get("finalize") and tr is not None:
        tr.finalize()
        tr.accelerator.wait_for_everyone()  # as lira lasr does after finalize


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
