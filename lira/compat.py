"""Every migration, in one place: config keys that moved or were renamed, retired model-folder
formats, and the layout of older model folders.

Plain tables and functions on plain mappings, with no project imports, so the config loader
(:func:`lira.config.from_dict`) and the model-folder reader (:mod:`lasr.folder`) read the same
tables; whoever has the current names (a dataclass's fields) passes them in.
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Iterable, Mapping
from pathlib import Path

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------
# Config keys (YAML files and ``key=value`` overrides)
# --------------------------------------------------------------------------------------------

MOVED_KEYS = {
    "lasr.use_llm_critic": "arca.use_llm_critic",
    "lasr.use_embedding_critic": "arca.use_embedding_critic",
}
"""Keys that moved: the critic ablations are trained into Arca (Table 5), not masked in LaSR."""


def flat_key(name: str, sections: Mapping[str, type]) -> str | None:
    """``sec.field`` for the flat key ``sec_field`` of an open section (``baselines.clear_lr``
    is ``baselines.clear.lr``); each section's ``old_names`` maps suffixes that are not a field's
    name. None when ``name`` is no such key."""
    for sec, tp in sections.items():
        rest = name.removeprefix(f"{sec}_")
        rest = getattr(tp, "old_names", {}).get(rest, rest)
        if rest != name and rest in {f.name for f in dataclasses.fields(tp)}:
            return f"{sec}.{rest}"
    return None


# --------------------------------------------------------------------------------------------
# Model folders (``lira_config.json`` of :class:`lasr.model.LiRAModel`)
# --------------------------------------------------------------------------------------------

_RETRAIN = (
    "train LaSR again (`lira lasr CONFIG`; the Arca checkpoint and the store are still valid)"
)
RETIRED_FORMATS = {
    "lira-v1": f"its fusion head predates the raw-view gate and the 9th gate feature; {_RETRAIN}",
    "lira-v2": f"its fusion head predates the per-type block weights and g's own block; {_RETRAIN}",
}
"""Older model-folder formats and the fix named when one is loaded
(:func:`lira.checkpoint.read_meta`)."""

MOVED_LASR_KEYS = ("use_llm_critic", "use_embedding_critic")
"""LaSR keys of older model folders, now ``arca.*`` (an ablation trains Arca without the critic)."""


def current_folder_meta(
    meta: Mapping[str, object], path: Path, architecture_keys: Iterable[str]
) -> dict[str, object]:
    """A model folder's ``lira_config.json`` in today's layout: its ``lasr`` section without the
    keys that moved to ``arca`` (a warning when one was false), and the ``architecture`` section
    apart from it (older folders hold the ``architecture_keys`` inside ``lasr``)."""
    out = dict(meta)
    lasr = out.get("lasr")
    if not isinstance(lasr, dict):
        return out
    lasr = dict(lasr)
    off = [k for k in MOVED_LASR_KEYS if lasr.pop(k, True) is False]
    if off:
        log.warning(
            "%s was saved with lasr.%s = false (an inference-time mask, since moved to arca.*): "
            "the gate and the selection now use what its Arca was trained with",
            path,
            "/".join(off),
        )
    if "architecture" not in out:
        out["architecture"] = {k: lasr.pop(k) for k in architecture_keys if k in lasr}
    out["lasr"] = lasr
    return out


HEAD_BLOCK_COLUMNS = ("type_logw", "type_on", "gate_mlp.2.weight", "gate_mlp.2.bias")
"""Fusion-head tensors with one entry per block of ẑ (a column of the tables, a row of the
per-text MLP's last layer)."""


def head_state_with_blocks(state: Mapping[str, object], blocks: int) -> dict[str, object]:
    """A fusion head's saved tensors with ``blocks`` blocks: a ``lira-v3`` folder saved before
    g's translation block (3 blocks) or before h's block on the untranslated text (4 blocks)
    gets each missing block off (``type_on`` 0; zero log-weights and MLP row), so it loads and
    embeds exactly as it was saved."""
    import torch

    out = dict(state)
    for name in HEAD_BLOCK_COLUMNS:
        t = out.get(name)
        if not isinstance(t, torch.Tensor):
            continue
        dim = 1 if name.startswith("type_") else 0
        missing = blocks - t.shape[dim]
        if missing > 0:
            shape = list(t.shape)
            shape[dim] = missing
            out[name] = torch.cat([t, t.new_zeros(shape)], dim=dim)
    return out
