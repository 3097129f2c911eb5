"""Trainer state without pickle: a codec of nested containers into safetensors + JSON.

Trainer state (optimizer state dicts, counters, histories, RNG states) is stored with
:func:`save_state` as ``<name>.safetensors`` (every tensor) + ``<name>.json`` (everything else),
and read back with :func:`load_state`: neither format can run code, unlike pickle /
``torch.load(weights_only=False)``. :func:`load_torch_safe` reads a legacy ``.pt`` file with
``weights_only=True`` only. Damaged or missing files raise :class:`~lira.errors.CheckpointError`
(or :class:`~lira.errors.MissingFileError`) naming the file and the fix.
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from lira.checkpoint.folders import DiskFullError, is_disk_full
from lira.checkpoint.manifest import safetensors_problem
from lira.errors import CheckpointError, MissingFileError
from lira.jsonio import read_json

if TYPE_CHECKING:
    from torch import Tensor

STATE_FORMAT = "lira-state/1"
STATE_NAME = "trainer_state"


def state_mismatch(path: str | Path, what: str, error: Exception) -> CheckpointError:
    """The error for a trainer state at ``path`` that does not fit the model being resumed."""
    return CheckpointError(
        f"{path}: the {what} trainer state does not fit this model ({type(error).__name__}: "
        f"{str(error)[:200]}); delete this checkpoint to resume from the previous one, or run "
        "without --resume"
    )


_RESERVED = (
    "__tensor__",
    "__ndarray__",
    "__np__",
    "__float__",
    "__tuple__",
    "__dict__",
    "__bytes__",
)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def _encode(obj: object, tensors: dict[str, Tensor], where: str, seen: set[int]) -> object:
    import torch

    if obj is None or isinstance(obj, (bool, str)):
        return obj
    if isinstance(obj, int):
        return int(obj)
    if isinstance(obj, float):
        return float(obj) if math.isfinite(obj) else {"__float__": repr(float(obj))}
    if isinstance(obj, torch.Tensor):
        t = obj.detach()
        t = t.cpu() if t.device.type != "cpu" else t
        ptr = t.untyped_storage().data_ptr() if t.numel() else None
        if not t.is_contiguous() or (ptr is not None and ptr in seen):
            t = t.contiguous().clone()  # safetensors refuses views and shared storage
        if ptr is not None:
            seen.add(t.untyped_storage().data_ptr())
        name = f"t{len(tensors)}"
        tensors[name] = t
        return {"__tensor__": name}
    if isinstance(obj, np.ndarray):
        if obj.dtype.hasobject:
            raise TypeError(f"{where}: object arrays cannot be stored safely")
        a = np.ascontiguousarray(obj)
        return {"__ndarray__": a.dtype.str, "shape": list(a.shape), "data": _b64(a.tobytes())}
    if isinstance(obj, np.generic):
        return {"__np__": obj.dtype.str, "data": _b64(obj.tobytes())}
    if isinstance(obj, (bytes, bytearray)):
        return {"__bytes__": _b64(bytes(obj))}
    if isinstance(obj, tuple):
        return {
            "__tuple__": [_encode(v, tensors, f"{where}[{i}]", seen) for i, v in enumerate(obj)]
        }
    if isinstance(obj, list):
        return [_encode(v, tensors, f"{where}[{i}]", seen) for i, v in enumerate(obj)]
    if isinstance(obj, dict):
        if all(isinstance(k, str) and k not in _RESERVED for k in obj):
            return {k: _encode(v, tensors, f"{where}[{k!r}]", seen) for k, v in obj.items()}
        return {
            "__dict__": [
                [
                    _encode(k, tensors, f"{where} key", seen),
                    _encode(v, tensors, f"{where}[{k!r}]", seen),
                ]
                for k, v in obj.items()
            ]
        }
    raise TypeError(
        f"{where}: cannot store a {type(obj).__name__} safely; use tensors, NumPy arrays, "
        "numbers, strings, bytes, lists, tuples and dicts"
    )


def _decode(obj: object, tensors: dict[str, Tensor], where: str) -> object:
    if isinstance(obj, list):
        return [_decode(v, tensors, where) for v in obj]
    if not isinstance(obj, dict):
        return obj
    if "__tensor__" in obj:
        name = obj["__tensor__"]
        if name not in tensors:
            raise CheckpointError(f"{where}: tensor {name!r} is missing from the tensor file")
        return tensors[name]
    if "__ndarray__" in obj:
        flat = np.frombuffer(base64.b64decode(obj["data"]), dtype=np.dtype(obj["__ndarray__"]))
        return flat.reshape(obj["shape"]).copy()
    if "__np__" in obj:
        return np.frombuffer(base64.b64decode(obj["data"]), dtype=np.dtype(obj["__np__"]))[0]
    if "__float__" in obj:
        return float(obj["__float__"])
    if "__bytes__" in obj:
        return base64.b64decode(obj["__bytes__"])
    if "__tuple__" in obj:
        return tuple(_decode(v, tensors, where) for v in obj["__tuple__"])
    if "__dict__" in obj:
        return {
            _as_key(_decode(k, tensors, where)): _decode(v, tensors, where)
            for k, v in obj["__dict__"]
        }
    return {k: _decode(v, tensors, where) for k, v in obj.items()}


def _as_key(k: object) -> object:
    return tuple(_as_key(x) for x in k) if isinstance(k, list) else k


def save_state(folder: str | Path, state: object, name: str = STATE_NAME) -> None:
    """Write ``state`` as ``<name>.safetensors`` (tensors) + ``<name>.json`` (the rest).

    ``state`` may nest dicts (any hashable keys, e.g. optimizer ``state_dict()``), lists,
    tuples, numbers (NaN/inf kept), strings, bytes, torch tensors (any device; loaded on CPU)
    and NumPy arrays/scalars (e.g. :func:`~lira.checkpoint.rng.rng_state`). Nothing in it can
    run code on load.
    """
    from safetensors.torch import save_file

    folder = Path(folder)
    tensors: dict[str, Tensor] = {}
    doc = {"format": STATE_FORMAT, "state": _encode(state, tensors, "state", set())}
    bad = _nonfinite_names(tensors)
    if bad:
        where = _tensor_paths(doc["state"], "state", {})
        raise CheckpointError(
            f"refusing to save a trainer state with NaN or inf in "
            f"{', '.join(where.get(n, n) for n in bad[:3])}: training diverged; lower the "
            "learning rate (or resume from the last checkpoint)"
        )
    try:
        save_file(tensors, str(folder / f"{name}.safetensors"), metadata={"format": STATE_FORMAT})
    except Exception as e:
        if is_disk_full(e):
            need = sum(t.numel() * t.element_size() for t in tensors.values())
            raise DiskFullError(folder / f"{name}.safetensors", need) from None
        raise
    (folder / f"{name}.json").write_text(json.dumps(doc, allow_nan=False), encoding="utf-8")


def _nonfinite_names(tensors: Mapping[str, Tensor]) -> list[str]:
    """The names of the floating-point tensors that hold NaN or inf."""
    import torch

    return [
        k
        for k, t in tensors.items()
        if (t.is_floating_point() or t.is_complex()) and not bool(torch.isfinite(t).all())
    ]


def _tensor_paths(obj: object, where: str, out: dict[str, str]) -> dict[str, str]:
    """{tensor name: where it sits in the state} of an encoded state (for messages)."""
    if isinstance(obj, list):
        for i, v in enumerate(obj):
            _tensor_paths(v, f"{where}[{i}]", out)
    elif isinstance(obj, dict):
        if "__tensor__" in obj:
            out[str(obj["__tensor__"])] = where
        for k, v in obj.items():
            if k in ("__tuple__", "__dict__"):
                _tensor_paths(v, where, out)
            elif not k.startswith("__"):
                _tensor_paths(v, f"{where}[{k!r}]", out)
    return out


def load_state(folder: str | Path, name: str = STATE_NAME) -> Any:
    """Read what :func:`save_state` wrote (tensors on CPU); damage raises CheckpointError."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    folder = Path(folder)
    fix = (
        f"the checkpoint {folder} is damaged: delete it to resume from the previous one, or "
        "start without --resume"
    )
    doc = read_json(folder / f"{name}.json", "trainer state", fix)
    if not isinstance(doc, dict) or doc.get("format") != STATE_FORMAT or "state" not in doc:
        raise CheckpointError(
            f"{folder / f'{name}.json'}: not a LiRA trainer state (format "
            f"{doc.get('format') if isinstance(doc, dict) else None!r}, expected {STATE_FORMAT}); "
            f"{fix}"
        )
    tf = folder / f"{name}.safetensors"
    if not tf.is_file():
        raise MissingFileError(f"trainer state {tf} does not exist; {fix}")
    try:
        tensors = load_file(str(tf), device="cpu")
    except (SafetensorError, OSError, ValueError) as e:
        raise CheckpointError(f"{tf} is not a readable safetensors file ({e}); {fix}") from None
    bad = _nonfinite_names(tensors)
    if bad:
        raise CheckpointError(f"{tf}: tensor {bad[0]!r} holds NaN or inf; {fix}")
    try:
        return _decode(doc["state"], tensors, str(folder / f"{name}.json"))
    except CheckpointError:
        raise
    except (ValueError, TypeError, KeyError, IndexError) as e:
        raise CheckpointError(f"{folder / f'{name}.json'} is damaged ({e}); {fix}") from None


def load_safetensors(path: str | Path, device: str = "cpu") -> dict[str, Tensor]:
    """The tensors of a ``.safetensors`` file; a missing or damaged file names itself and the fix."""
    from safetensors import SafetensorError
    from safetensors.torch import load_file

    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"weights file {path} does not exist; save or train the model again")
    why = safetensors_problem(path)
    try:
        if why is None:
            tensors = load_file(str(path), device=device)
            bad = _nonfinite_names(tensors)
            if not bad:
                return tensors
            why = f"tensor {bad[0]!r} holds NaN or inf"
    except (SafetensorError, OSError, ValueError) as e:
        why = str(e)
    raise CheckpointError(
        f"weights file {path} is damaged ({why}); restore it, or save or train the model again"
    )


def load_torch_safe(path: str | Path) -> Any:
    """A legacy ``.pt`` file read with ``torch.load(weights_only=True)`` (no code can run)."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise MissingFileError(f"{path} does not exist")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # UnpicklingError, RuntimeError, EOFError, ... from untrusted bytes
        raise CheckpointError(
            f"{path} cannot be loaded safely ({type(e).__name__}: {str(e)[:200]}); it holds "
            "objects other than tensors and plain containers (or is damaged). LiRA never "
            "unpickles such files: delete the checkpoint and train without --resume"
        ) from None


def all_finite(*values: object) -> bool:
    """True when every value (tensor, number or None = finite) is finite: the trainers skip a
    step otherwise, so no NaN/inf reaches the weights, the optimizer state or a checkpoint."""
    import torch

    for v in values:
        if v is None:
            continue
        t = v.detach() if isinstance(v, torch.Tensor) else torch.as_tensor(v, dtype=torch.float64)
        if not bool(torch.isfinite(t).all()):
            return False
    return True
