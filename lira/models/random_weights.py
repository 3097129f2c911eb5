"""``random:<folder>``: a model in a shipped architecture with random weights, for cost only.

``random:qwen3-embedding-8b`` (a name under ``configs/arch/``) or ``random:<folder>`` (any
folder with a transformers ``config.json``) builds the architecture without downloading any
weight: parameters are allocated on the target device and initialised there by transformers'
own ``_init_weights`` (N(0, initializer_range) for most), so a GPU builds an 8B model in
seconds. The tokenizer is the folder's own when it
has one, else all-MiniLM-L6-v2's WordPiece (ids < 30522, which every shipped vocabulary
covers; realistic token counts for English), else a byte-level tokenizer built with
``tokenizers``.

**Cost-only, never a result**: such a model measures time and memory at the paper's shapes
(``benchmarks/paper_scale.py``); its embeddings, translations and scores are noise. Every load
logs a warning saying so.
"""

from __future__ import annotations

import logging
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers
from torch import nn
from transformers import (
    AutoConfig,
    AutoTokenizer,
    PretrainedConfig,
    PreTrainedTokenizerBase,
    PreTrainedTokenizerFast,
)

from lira.demo.packages import minilm_folder
from lira.models.devices import resolve_device
from lira.models.loading import load_checked

log = logging.getLogger(__name__)

PREFIX = "random:"
ARCH_DIR = Path(__file__).resolve().parents[2] / "configs" / "arch"
"""The shipped architectures (``configs/arch/<name>/config.json``)."""
COST_ONLY = (
    "random:%s has RANDOM WEIGHTS (architecture from %s): for cost measurements only; its "
    "outputs are noise, never a result"
)


def is_random_ref(ref: str) -> bool:
    """True for a ``random:<folder or configs/arch name>`` model reference."""
    return ref.startswith(PREFIX)


def arch_names() -> list[str]:
    """The architectures shipped under ``configs/arch/``."""
    return sorted(p.parent.name for p in ARCH_DIR.glob("*/config.json"))


def random_folder(ref: str) -> Path:
    """The config folder of ``random:<name or folder>``; FileNotFoundError naming the choices."""
    name = ref[len(PREFIX) :]
    for folder in (Path(name).expanduser(), ARCH_DIR / name):
        if (folder / "config.json").is_file():
            return folder
    raise FileNotFoundError(
        f"{ref}: no config.json in {name!r} or {ARCH_DIR / name}; use a folder holding a "
        f"transformers config.json or one of {', '.join(PREFIX + n for n in arch_names())}"
    )


def random_config(ref: str) -> PretrainedConfig:
    """The transformers config of ``random:<...>`` (a folder asking for its own code is refused)."""
    folder = str(random_folder(ref))
    return load_checked(
        lambda: AutoConfig.from_pretrained(folder, trust_remote_code=False), ref, folder, "minilm"
    )


def _byte_tokenizer() -> PreTrainedTokenizerFast:
    """A byte-level tokenizer (256 byte ids + [PAD] [UNK] [CLS] [SEP] [EOS]), built offline."""
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[EOS]"]
    vocab = {t: i for i, t in enumerate(specials)}
    for b in pre_tokenizers.ByteLevel.alphabet():
        vocab.setdefault(b, len(vocab))
    tok = Tokenizer(models.WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
            pre_tokenizers.Split("", "isolated"),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]",
        unk_token="[UNK]",
        cls_token="[CLS]",
        sep_token="[SEP]",
        eos_token="[EOS]",
    )


def random_tokenizer(ref: str) -> PreTrainedTokenizerBase:
    """A tokenizer whose ids the random model covers (see the module docstring)."""
    folder = random_folder(ref)
    if (folder / "tokenizer_config.json").is_file():
        where = str(folder)
        return load_checked(
            lambda: AutoTokenizer.from_pretrained(where, trust_remote_code=False),
            ref,
            where,
            "minilm",
        )
    try:
        return AutoTokenizer.from_pretrained(str(minilm_folder()), trust_remote_code=False)
    except (FileNotFoundError, OSError):
        return _byte_tokenizer()


def build_random(
    cls: type,
    ref: str,
    dtype: torch.dtype | str = torch.float32,
    device: str | torch.device | None = None,
    config: PretrainedConfig | None = None,
) -> nn.Module:
    """``cls`` (an Auto* or model class) built from ``random:<...>``'s config with random
    weights on ``device`` (default: :func:`default_device`, where an 8B model takes a second
    on a GPU and minutes on the CPU), in ``dtype``; logs that it is cost-only."""
    config = config if config is not None else random_config(ref)
    dtype = torch.float32 if dtype == "auto" else dtype
    builder = getattr(cls, "from_config", None) or cls._from_config
    with resolve_device(device):  # allocated and initialised there
        model = builder(config, dtype=dtype)
    log.warning(COST_ONLY, ref[len(PREFIX) :], random_folder(ref))
    return model.eval()
