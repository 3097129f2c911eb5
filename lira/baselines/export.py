"""Saved baselines: loadable HF folders that are also sentence-transformers models.

:func:`save_baseline` writes config + safetensors + tokenizer + ``lira_baseline.json``
(:data:`META_FILE`: pooling, prompts, max length, the method's details) and the run
fingerprint (:func:`baseline_fingerprint`: the config values that shape the method's model,
which ``--resume`` checks); :func:`write_sentence_transformers_modules` adds the Pooling / Normalize modules;
:func:`load_baseline` loads a saved folder as a Backbone (:func:`baseline_models_config`).
"""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from torch import nn

from lira.baselines.config import MEMORY_ONLY, BaselinesRun, flat_recipe
from lira.baselines.data import NEGATIVES
from lira.baselines.registry import get_method
from lira.checkpoint.manifest import checkpoint_problem
from lira.config import ModelsConfig
from lira.errors import CheckpointError
from lira.jsonio import read_json
from lira.models import load_backbone
from lira.training import atomic_dir, config_fingerprint, write_fingerprint

META_FILE = "lira_baseline.json"

BASELINE_UNSHAPING = (
    "baselines.report_to",
    "baselines.save_every",
    *(f"baselines.{name}" for name in MEMORY_ONLY),
)
"""``baselines`` fields left out of the run fingerprint: where the terms are logged, how often
checkpoints are written and :data:`~lira.baselines.config.MEMORY_ONLY` change nothing in the
trained model."""


def baseline_fingerprint(cfg: BaselinesRun, method: str) -> dict[str, object]:
    """The config values that shape ``method``'s model: ``models.*`` (less cache settings),
    ``data.*``, the shared budget / seed / LoRA fields, the method's own recipe fields
    (``baselines.<recipe>.*``) and the fields of the negatives it mines (CLEAR's for InfoNCE,
    CLEAR and LANCER). Recipe fields are fingerprinted by their flat names
    (``baselines.clear_lr``), the names every saved baseline folder's fingerprint holds."""
    bc = cfg.baselines
    spec = get_method(method)
    keep = {k: v for k, v in asdict(bc).items() if k not in ("methods", "recipes")}
    own = spec.recipe_section()
    if own:
        keep.update(flat_recipe(bc, own))
    for kind in spec.negatives:
        _, section, keys = NEGATIVES[kind]
        keep.update(flat_recipe(bc, section, keys))
    stage = f"baseline {method}"
    return config_fingerprint(stage, cfg, ("models", "data"), BASELINE_UNSHAPING, baselines=keep)


def save_baseline(
    backbone: nn.Module,
    path: str | Path,
    mcfg: ModelsConfig,
    meta: dict[str, object],
    fingerprint: dict[str, object] | None = None,
) -> Path:
    """Write a loadable HF folder: config + safetensors + tokenizer + lira_baseline.json (+ the
    run fingerprint that ``--resume`` checks, see :func:`baseline_fingerprint`)."""
    with atomic_dir(path) as tmp:
        if fingerprint is not None:
            write_fingerprint(tmp, fingerprint)
        backbone.model.save_pretrained(str(tmp), safe_serialization=True)
        backbone.tokenizer.save_pretrained(str(tmp))
        info = {
            "pooling": mcfg.backbone_pooling,
            "query_prompt": mcfg.query_prompt,
            "document_prompt": mcfg.document_prompt,
            "max_length": mcfg.backbone_max_length,
            "dtype": mcfg.dtype,
            "base": mcfg.backbone,
            **meta,
        }
        (tmp / META_FILE).write_text(json.dumps(info, indent=2), encoding="utf-8")
        write_sentence_transformers_modules(tmp, backbone.dim, mcfg)
    return Path(path)


ST_POOLING = {"mean": "mean", "cls": "cls", "last": "lasttoken"}
"""Our ``models.backbone_pooling`` names -> sentence-transformers' ``Pooling`` modes."""


def write_sentence_transformers_modules(folder: Path, dim: int, mcfg: ModelsConfig) -> None:
    """Make a saved HF folder an ordinary sentence-transformers model (same pooling, prompts).

    ``SentenceTransformer(folder)`` then embeds as :func:`load_baseline` does: Transformer
    (truncation at ``backbone_max_length``) -> Pooling -> Normalize, with the query/document
    prompts as its ``prompts`` (``encode(..., prompt_name="query")``).
    """
    from sentence_transformers.models import Normalize, Pooling, Transformer

    # the Transformer module is the HF folder itself (path ""); the other two get sub-folders
    for sub, module in (("1_Pooling", Pooling(dim, ST_POOLING[mcfg.backbone_pooling])),
                        ("2_Normalize", Normalize())):  # fmt: skip
        (folder / sub).mkdir()
        module.save(str(folder / sub))
    layout = (("", Transformer), ("1_Pooling", Pooling), ("2_Normalize", Normalize))
    modules = [{"idx": i, "name": str(i), "path": sub, "type": f"{c.__module__}.{c.__name__}"}
               for i, (sub, c) in enumerate(layout)]  # fmt: skip
    files = {
        "modules.json": modules,
        "sentence_bert_config.json": {"max_seq_length": mcfg.backbone_max_length,
                                      "do_lower_case": False},
        "config_sentence_transformers.json": {
            "prompts": {"query": mcfg.query_prompt, "document": mcfg.document_prompt},
            "default_prompt_name": None,
            "similarity_fn_name": "cosine",
        },
    }  # fmt: skip
    for name, content in files.items():
        (folder / name).write_text(json.dumps(content, indent=2), encoding="utf-8")


def baseline_models_config(path: str | Path) -> ModelsConfig:
    """The ModelsConfig that loads a saved baseline folder as the backbone, once the folder is
    verified like a checkpoint (manifest, sha256, parsing, finite tensors: no manifest =
    damaged); a damaged folder or metadata file is one :class:`CheckpointError`."""
    path = Path(path)
    meta_file = path / META_FILE
    if not meta_file.is_file():
        raise FileNotFoundError(f"{path} has no {META_FILE}: not a saved lira baseline folder")
    fix = "restore it, or train the baseline again with `lira baseline`"
    problem = checkpoint_problem(path, verify=True)
    if problem is not None:
        raise CheckpointError(f"baseline folder {path} is damaged ({problem}); {fix}")
    meta = read_json(meta_file, "baseline metadata", fix)
    try:
        return ModelsConfig(
            backbone=str(path),
            backbone_pooling=meta["pooling"],
            query_prompt=meta["query_prompt"],
            document_prompt=meta["document_prompt"],
            backbone_max_length=int(meta["max_length"]),
            dtype=meta.get("dtype", "float32"),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        raise CheckpointError(
            f"{meta_file} is damaged ({type(e).__name__}: {str(e)[:200]}); {fix}"
        ) from None


def load_baseline(path: str | Path) -> nn.Module:
    """Load a saved baseline as a Backbone (satisfies the ``encode(texts, langs, kind)`` protocol)."""

    return load_backbone(baseline_models_config(path))
