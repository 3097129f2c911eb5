"""The demo text: the shipped XQuAD-R subset that the demo tokenizers and translator learn."""

from __future__ import annotations

import json
from pathlib import Path

from lira.data import demo_path
from lira.data.xquad_r import load_xquad_r

LANGS = ("en", "de", "es", "ru", "zh")
SOURCE_LANGS = ("de", "es", "ru", "zh")
DEMO_SPLIT_SEED = 13  # DataConfig.split_seed's default
DEMO_HELDOUT_FRACTION = 0.5
DEMO_RESERVED_TRAIN = 64


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
    and the next DEMO_RESERVED_TRAIN ids of that shuffle, which hold the validation and
    training questions of any such split that takes at most DEMO_RESERVED_TRAIN of them
    (validation and caps take the front of the drawn order). So the demo MT model behaves on
    the questions that Arca and LaSR train on as it does on the held-out ones: it has seen
    neither."""
    ds = load_xquad_r(demo_path(), list(LANGS))
    rest, held = ds.split(DEMO_HELDOUT_FRACTION, DEMO_SPLIT_SEED)  # both in drawn order
    return set(held) | set(rest[:DEMO_RESERVED_TRAIN])


def demo_parallel_questions() -> list[tuple[str, str]]:
    """(source question, English question) pairs aligned by XQuAD-R question id, outside
    :func:`demo_heldout_ids`, and none whose source text a held question repeats."""
    en, _ = _read_squad("en")
    held = demo_heldout_ids()
    pairs: list[tuple[str, str]] = []
    for lang in SOURCE_LANGS:
        src, _ = _read_squad(lang)
        held_texts = {src[k] for k in held if k in src}
        pairs.extend(
            (src[k], en[k])
            for k in sorted(src)
            if k in en and k not in held and src[k] not in held_texts
        )
    return pairs
