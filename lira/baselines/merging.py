"""Weight-averaged model merging (paper 001, §4 "Model Merging"; Matena & Raffel 2022).

    θ_merged = Σ_k w_k θ_k,   Σ_k w_k = 1, w_k >= 0

Floating-point tensors are accumulated in fp32 and cast back to their own dtype (a model with
weight 1 is returned bit-exactly; zero-weight terms are skipped). Integer and boolean buffers
(position ids, counters) cannot be averaged: they are copied after checking they are equal in
every checkpoint. Different key sets, shapes or architectures, and weights that are not finite,
negative or do not sum to 1, raise a :class:`~lira.errors.UserInputError` (the CLI prints one
line, exits 1 and writes nothing).

``lira baseline-merge A B --weights 0.5 0.5 --out DIR`` calls :func:`merge_command`, which
writes a loadable HF folder: config.json + model.safetensors + tokenizer files + the lira
json of the first checkpoint.

:data:`METHOD` is the ``merging`` baseline: one or two :data:`GIST` fine-tunes, each a
:class:`~lira.baselines.contrastive.ContrastiveTrainer` run (the :class:`lira.training.Trainer`
loop), then the average; :data:`GIST` is the objective of each fine-tune.
"""

from __future__ import annotations

import json
import logging
import math
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import torch
from accelerate.utils import set_seed
from safetensors.torch import save_file
from torch import Tensor

from lira.baselines.composition import (
    CompositionExample,
    build_composition,
    gist_features,
    gist_loss,
)
from lira.baselines.config import BaselinesRun
from lira.baselines.contrastive import ContrastiveTrainer, fixed_batches, train_stats
from lira.baselines.export import baseline_fingerprint, save_baseline
from lira.baselines.method import BaselineMethod, Batch, Example, HookTrainer, english_rows
from lira.baselines.recipes import MergingConfig
from lira.checkpoint.state import load_safetensors
from lira.data.types import ParallelData, Record
from lira.data.xquad_r import XQuADR
from lira.errors import CheckpointError, UserInputError
from lira.jsonio import read_json_object
from lira.models import load_backbone
from lira.training import atomic_dir

log = logging.getLogger(__name__)

# Files of a checkpoint folder that the merge writes itself.
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")


def _check_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    if n < 1:
        raise UserInputError("average_state_dicts needs at least one state dict")
    if weights is None:
        return [1.0 / n] * n
    w = [float(x) for x in weights]
    if len(w) != n:
        raise UserInputError(f"got {len(w)} weights for {n} checkpoints; give one weight each")
    # NaN compares false with everything: test finiteness first, or NaN passes both checks
    if not all(math.isfinite(x) for x in w) or any(x < 0 for x in w) or abs(sum(w) - 1) > 1e-6:
        raise UserInputError(
            f"merging weights must be finite numbers >= 0 that sum to 1, got {w} "
            "(e.g. --weights 0.5 0.5)"
        )
    return w


def average_state_dicts(
    dicts: Sequence[dict[str, Tensor]], weights: Sequence[float] | None = None
) -> dict[str, Tensor]:
    """Weighted average of state dicts (fp32 accumulation, integer buffers copied if equal)."""
    w = _check_weights(weights, len(dicts))
    keys = list(dicts[0].keys())
    for k, d in enumerate(dicts[1:], start=1):
        if set(d) != set(keys):
            missing = sorted(set(keys) - set(d))[:5]
            extra = sorted(set(d) - set(keys))[:5]
            raise UserInputError(
                f"state dict {k} has different keys than state dict 0 (missing {missing}, "
                f"extra {extra}): the checkpoints are not the same architecture"
            )
    out: dict[str, Tensor] = {}
    for name in keys:
        ts = [d[name] for d in dicts]
        for k, t in enumerate(ts[1:], start=1):
            if t.shape != ts[0].shape:
                raise UserInputError(
                    f"'{name}' has shape {tuple(t.shape)} in state dict {k} but "
                    f"{tuple(ts[0].shape)} in state dict 0: the checkpoints cannot be merged"
                )
        if not ts[0].is_floating_point():
            for k, t in enumerate(ts[1:], start=1):
                if not torch.equal(t, ts[0]):
                    raise UserInputError(
                        f"integer buffer '{name}' differs between state dict 0 and {k}; "
                        "integer tensors cannot be averaged"
                    )
            out[name] = ts[0].clone()
            continue
        acc = torch.zeros(ts[0].shape, dtype=torch.float32)
        for wk, t in zip(w, ts):
            if wk != 0.0:
                acc += wk * t.detach().to(torch.float32)
        out[name] = acc.to(ts[0].dtype)
    return out


def load_checkpoint_state(path: str | Path) -> dict[str, Tensor]:
    """All tensors of a HF checkpoint folder (single or sharded safetensors)."""
    path = Path(path)
    files = sorted(path.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {path}: is it a saved HF checkpoint folder?")
    state: dict[str, Tensor] = {}
    for f in files:
        state.update(load_safetensors(f))  # a damaged file names itself
    return state


def _architecture(path: Path) -> tuple[str, list[str]]:
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{path} has no config.json: not a HF checkpoint folder")
    fix = "save the checkpoint again (save_pretrained), or leave it out of the merge"
    cfg = read_json_object(cfg_file, "checkpoint config", fix)
    if not isinstance(cfg.get("architectures") or [], list):
        raise CheckpointError(f"checkpoint config {cfg_file} is not a HF model config; {fix}")
    return str(cfg.get("model_type", "")), list(cfg.get("architectures") or [])


def merge_command(
    checkpoints: Sequence[str | Path], weights: Sequence[float] | None, out: str | Path
) -> Path:
    """Average checkpoint folders into ``out`` (config, safetensors, tokenizer, lira json)."""
    paths = [Path(p) for p in checkpoints]
    if len(paths) < 2:
        raise UserInputError(f"merging needs two or more checkpoints, got {len(paths)}")
    w = _check_weights(weights, len(paths))  # before reading anything
    same = [p for p in paths if Path(out).resolve() == p.resolve()]
    if same:
        raise UserInputError(
            f"--out {out} is one of the checkpoints being merged ({same[0]}): merging would "
            "replace it; choose another --out folder"
        )
    archs = [_architecture(p) for p in paths]
    for p, a in zip(paths[1:], archs[1:]):
        if a != archs[0]:
            raise UserInputError(
                f"cannot merge different architectures: {paths[0]} is {archs[0]} but {p} is {a}"
            )
    merged = average_state_dicts([load_checkpoint_state(p) for p in paths], w)
    with atomic_dir(out) as tmp:
        for f in paths[0].iterdir():
            if f.is_file() and f.suffix != ".safetensors" and f.name not in _WEIGHT_FILES:
                shutil.copy2(f, tmp / f.name)
        save_file(
            {k: v.contiguous() for k, v in merged.items()},
            str(tmp / "model.safetensors"),
            metadata={"format": "pt"},
        )
        (tmp / "merge.json").write_text(
            json.dumps({"checkpoints": [str(p) for p in paths], "weights": w}, indent=2),
            encoding="utf-8",
        )
    log.info("merged %s with weights %s into %s", [str(p) for p in paths], w, out)
    return Path(out)


# ------------------------------------------------------------------------ the baseline method
class GistMethod(BaselineMethod):
    """``gist``: one fine-tune of paper 001's merging, sentence-transformers'
    CachedGISTEmbedLoss on language-composition examples with a frozen guide model (the
    trainer's ``composition`` and ``guide``); not selectable on its own."""

    name = "gist"
    recipe = "merging"

    def check(self, trainer: HookTrainer) -> None:
        if trainer.composition is None or trainer.guide is None:
            raise ValueError("method 'gist' needs composition examples and a guide model")

    def n_rows(self, trainer: HookTrainer) -> int:
        return len(trainer.composition)

    def setup(self, trainer: HookTrainer) -> torch.nn.Module:
        bb = trainer.backbone
        return gist_loss(trainer.model, trainer.guide, bb.tokenizer, bb.max_length,
                         trainer.recipe.tau, trainer.cfg.recipe_of("merging", MergingConfig).mini_batch)  # fmt: skip

    def loss(self, trainer: HookTrainer, batch: Batch) -> Tensor:
        ex = [trainer.composition[i] for i in batch["rows"]]
        k = min(len(e.negatives) for e in ex)
        columns = [[e.query for e in ex], [e.positive for e in ex]]
        columns += [[e.negatives[j] for e in ex] for j in range(k)]
        kinds = ["query"] + ["document"] * (1 + k)
        feats = gist_features(trainer.objective, columns, kinds, trainer.accelerator.device)
        return trainer.objective(feats, None)


class MergingMethod(BaselineMethod):
    """``merging`` (paper 001): the D(l en en) fine-tune (every training language; App. B.2
    negatives mined from ranks 50-300 with its filters; :class:`GistMethod` with the frozen
    initial backbone as guide) weight-averaged with its partner, ``baselines.merging.partner``: the base
    model (default; the paper merges a CLIR fine-tune with the best mono-lingual model, the
    base model for 3 of its 4 backbones) or a D(en en en) fine-tune. Trained parts are kept
    under ``merging-parts/``."""

    name = "merging"
    config_class = MergingConfig
    negatives = ("composition",)
    own_loop = True

    def train(
        self,
        cfg: BaselinesRun,
        examples: Sequence[Example],
        corpus: Sequence[Record],
        dataset: XQuADR | None,
        out: Path,
    ) -> dict[str, object]:
        t0 = time.perf_counter()
        bc = cfg.baselines
        rc = bc.recipe_of("merging", MergingConfig)
        langs = sorted({e.lang for e in examples})

        def composition(rows: list[int], q_lang: str) -> list[CompositionExample]:
            ex = [examples[i] for i in rows]
            ids = [e.qid for e in ex]
            q = ParallelData(ids, {q_lang: [e.q_en if q_lang == "en" else e.q_tgt for e in ex]})
            p = ParallelData(ids, {"en": [e.pos_text for e in ex]})
            negs = {"en": [[corpus[j].text for j in e.gist_hn] for e in ex]}
            return build_composition(q, p, f"{q_lang}enen", negs)

        # D(l en en): target queries of every training language; D(en en en): each question once
        cross: list[CompositionExample] = []
        for lang in langs:
            cross += composition([i for i, e in enumerate(examples) if e.lang == lang], lang)
        todo = [(f"{'+'.join(langs)}-en-en", cross)]
        if rc.partner == "mono":
            todo.append(("en-en-en", composition(english_rows(examples), "en")))
        guide = load_backbone(cfg.models).eval().requires_grad_(False)  # the frozen base model
        fingerprint = baseline_fingerprint(cfg, "merging")
        parts: dict[str, dict[str, object]] = {}
        models, first = [], None
        for name, comp in todo:
            set_seed(bc.seed)
            part_dir = out.parent / "merging-parts" / name
            trainer = ContrastiveTrainer(
                bc, load_backbone(cfg.models), "gist", examples, [], part_dir,
                models_cfg=cfg.models, fingerprint=fingerprint, composition=comp, guide=guide,
                meta={"composition": name},
            )  # fmt: skip
            fixed = fixed_batches(trainer, bc.seed)
            before = trainer.measure(fixed)
            trainer.train()
            trainer.finalize()
            model = trainer.backbone
            after = trainer.measure(fixed)
            parts[name] = train_stats(trainer, before, after, part_dir)
            models.append(model)
            first = first or (trainer, fixed)
        assert first is not None
        partner = models[1] if rc.partner == "mono" else guide
        merged_state = average_state_dicts(
            [models[0].model.state_dict(), partner.model.state_dict()], rc.weights
        )
        merged = models[0]  # the cross-lingual part's backbone now holds the merged weights
        merged.model.load_state_dict(merged_state)
        trainer, fixed = first
        after = trainer.measure(fixed)
        partner_name = "en-en-en" if rc.partner == "mono" else "base"
        acc = trainer.accelerator
        if acc.is_main_process:  # one writer
            save_baseline(merged, out, cfg.models, {
                "method": "merging", "weights": rc.weights, "parts": [todo[0][0], partner_name],
            }, fingerprint)  # fmt: skip
        acc.wait_for_everyone()
        first_part = parts[todo[0][0]]
        return {
            "loss_before": first_part["loss_before"],
            "loss_after": after,
            "steps": first_part["steps"],
            "recipe": first_part["recipe"],
            "parts": parts,
            "partner": partner_name,
            "weights": list(rc.weights),
            "path": str(out),
            "seconds": round(time.perf_counter() - t0, 2),
        }


GIST = GistMethod()
METHOD = MergingMethod()
