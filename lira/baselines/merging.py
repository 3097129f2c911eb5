"""Weight-averaged model merging (paper 001, §4 "Model Merging"; Matena & Raffel 2022).

    θ_merged = Σ_k w_k θ_k,   Σ_k w_k = 1, w_k >= 0

Floating-point tensors are accumulated in fp32 and cast back to their own dtype (a model with
weight 1 is returned bit-exactly; zero-weight terms are skipped). Integer and boolean buffers
(position ids, counters) cannot be averaged: they are copied after checking they are equal in
every checkpoint. Different key sets, shapes or architectures raise a clear error.

``lira baseline-merge A B --weights 0.5 0.5 --out DIR`` calls :func:`merge_command`, which
writes a loadable HF folder: config.json + model.safetensors + tokenizer files + the lira
json of the first checkpoint.
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Sequence
from pathlib import Path

import torch
from safetensors.torch import load_file, save_file
from torch import Tensor

from lira.checkpoint import atomic_dir

log = logging.getLogger(__name__)

# Files of a checkpoint folder that the merge writes itself.
_WEIGHT_FILES = ("model.safetensors", "model.safetensors.index.json")


def _check_weights(weights: Sequence[float] | None, n: int) -> list[float]:
    if n < 1:
        raise ValueError("average_state_dicts needs at least one state dict")
    if weights is None:
        return [1.0 / n] * n
    w = [float(x) for x in weights]
    if len(w) != n:
        raise ValueError(f"got {len(w)} weights for {n} checkpoints; give one weight each")
    if any(x < 0 for x in w) or abs(sum(w) - 1.0) > 1e-6:
        raise ValueError(f"merging weights must be >= 0 and sum to 1, got {w}")
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
            raise ValueError(
                f"state dict {k} has different keys than state dict 0 (missing {missing}, "
                f"extra {extra}): the checkpoints are not the same architecture"
            )
    out: dict[str, Tensor] = {}
    for name in keys:
        ts = [d[name] for d in dicts]
        for k, t in enumerate(ts[1:], start=1):
            if t.shape != ts[0].shape:
                raise ValueError(
                    f"'{name}' has shape {tuple(t.shape)} in state dict {k} but "
                    f"{tuple(ts[0].shape)} in state dict 0: the checkpoints cannot be merged"
                )
        if not ts[0].is_floating_point():
            for k, t in enumerate(ts[1:], start=1):
                if not torch.equal(t, ts[0]):
                    raise ValueError(
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
        state.update(load_file(str(f)))
    return state


def _architecture(path: Path) -> tuple[str, list[str]]:
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{path} has no config.json: not a HF checkpoint folder")
    cfg = json.loads(cfg_file.read_text(encoding="utf-8"))
    return str(cfg.get("model_type", "")), list(cfg.get("architectures") or [])


def merge_command(
    checkpoints: Sequence[str | Path], weights: Sequence[float] | None, out: str | Path
) -> Path:
    """Average checkpoint folders into ``out`` (config, safetensors, tokenizer, lira json)."""
    paths = [Path(p) for p in checkpoints]
    if len(paths) < 2:
        raise ValueError(f"merging needs two or more checkpoints, got {len(paths)}")
    archs = [_architecture(p) for p in paths]
    for p, a in zip(paths[1:], archs[1:]):
        if a != archs[0]:
            raise ValueError(
                f"cannot merge different architectures: {paths[0]} is {archs[0]} but {p} is {a}"
            )
    w = _check_weights(weights, len(paths))
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
