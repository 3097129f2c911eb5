"""``lira reason``: MGSM / X-CSQA accuracy through a frozen LLM fed [g(x); h(y)].

Zero-shot as in paper 004 §5.1: Arca is trained on a retrieval set with the reasoning LLM as
its backbone h (``models.backbone`` = ``reason.llm``, stream ``input_embeddings``), so its
Adaptor maps g(x) into the LLM's input-embedding space; LaSR is not used. For every item:
- ``direct``: the question in its own language (baseline);
- ``translate-en``: the Arca-selected English translation only (the Translate-En baseline);
- ``soft_only``: the S Adaptor vectors of g(x) as soft tokens only;
- ``both``: soft tokens + the selected translation (LiRA).
Translations come from the translation store, filled online under the pass@k budget
(translators marked ``train_only`` are never used here). Generation: transformers
``generate(inputs_embeds=...)``, or (``reason.engine: vllm``) vLLM's ``prompt_embeds`` input
(``LLM(..., enable_prompt_embeds=True)``, vLLM >= 0.9), the same spliced prompts in both.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from tqdm import tqdm

from arca.model import ArcaModel, load_arca
from evaluators.bootstrap import bootstrap_ci
from lira.config import ConfigError
from lira.models import load_causal_lm
from lira.models.devices import resolve_device
from lira.reasoning.answers import extract_choice, extract_number, numbers_equal
from lira.reasoning.data import ChoiceItem, MathItem, demo_reasoning_path, load_mgsm, load_xcsqa
from lira.reasoning.soft_prompt import SoftPromptBuilder, VLLMSoftPromptGenerator, user_message
from lira.translation.engine import fill_store, store_path
from lira.translation.store import TranslationStore
from pipeline.runconfig import RunConfig

log = logging.getLogger(__name__)

INSTRUCTIONS = {
    "mgsm": "Solve the problem step by step. End with 'The answer is N.' where N is a number.",
    "xcsqa": "Reply with the letter (A, B, C, D or E) of the correct choice.",
}


def load_items(task: str, folder: str, lang: str, max_items: int) -> list[MathItem | ChoiceItem]:
    """The items of one task and language (``folder`` 'demo' = the shipped files)."""
    root = demo_reasoning_path() if folder == "demo" else Path(folder)
    path = root / (f"mgsm_{lang}.tsv" if task == "mgsm" else f"xcsqa_{lang}.jsonl")
    if not path.is_file():
        raise FileNotFoundError(f"no {task} file for language {lang!r}: {path}")
    items = load_mgsm(path, lang) if task == "mgsm" else load_xcsqa(path, lang)
    return items[:max_items] if max_items else items


def question_text(item: MathItem | ChoiceItem) -> str:
    """The text that is translated, encoded by g and (mode direct) shown to the LLM."""
    if isinstance(item, MathItem):
        return item.question
    choices = " ".join(f"({label}) {text}" for label, text in item.choices)
    return f"{item.stem} {choices}"


def is_correct(item: MathItem | ChoiceItem, generation: str) -> tuple[bool, float | str | None]:
    """(correct?, extracted answer) for one generation."""
    if isinstance(item, MathItem):
        pred = extract_number(generation)
        return numbers_equal(pred, item.answer), pred
    letters = "".join(label for label, _ in item.choices)
    pred = extract_choice(generation, letters)
    return pred == item.answer, pred


def selected_translations(
    cfg: RunConfig, texts: list[str], lang: str, arca: ArcaModel | None
) -> list[str]:
    """The Arca-selected English candidate of each text (the pool fills missing ones online)."""

    active = cfg.translation.required_translators(test_time=True)
    with TranslationStore(store_path(cfg), cfg.translation.commit_every) as store:
        fill_store(cfg, {lang: texts}, store=store)
        cands = store.candidates(texts, lang, active)
    out = []
    picks = arca.select(texts, cands) if arca is not None and all(cands) else None
    for i, c in enumerate(cands):
        if not c:
            log.warning("no translation for %r: the source text is used", texts[i][:60])
            out.append(texts[i])
        else:
            out.append(c[picks[i]].text if picks is not None else c[0].text)
    return out


def run_reason(cfg: RunConfig) -> dict[str, Any]:
    """Engine of ``lira reason``: accuracy per task x language x mode -> <output_dir>/reason/."""

    rc = cfg.reason
    if any(lang != "en" for lang in rc.languages):  # before loading the LLM: a config error
        cfg.translation.required_translators(test_time=True)
    needs_arca = any(m in ("soft_only", "both", "translate-en") for m in rc.modes)
    ckpt = Path(rc.arca_checkpoint or Path(cfg.output_dir) / "arca" / "final")
    if needs_arca and not ckpt.is_dir():  # before loading the LLM
        raise FileNotFoundError(
            f"no Arca checkpoint at {ckpt}: train one with `lira arca` using "
            f"models.backbone={rc.llm} (reason.arca_checkpoint names another folder)"
        )
    out = Path(cfg.output_dir) / "reason"
    out.mkdir(parents=True, exist_ok=True)
    lm, tok = load_causal_lm(rc.llm, cfg.models.cache_dir, dtype=cfg.models.dtype)
    device = resolve_device()  # CUDA when available
    if rc.engine != "vllm":  # with vLLM this copy only embeds prompt tokens: its GPU is vLLM's
        lm.to(device)
    lm.eval()
    d_llm = lm.get_input_embeddings().embedding_dim
    arca = None
    if needs_arca:
        arca = load_arca(ckpt).to(device)  # g, Adaptor, Actor and its backbone h
        if arca.dim != d_llm:
            raise ConfigError(
                "reason.arca_checkpoint",
                f"the Arca checkpoint {ckpt} maps into d={arca.dim} but reason.llm {rc.llm} "
                f"embeds tokens in d={d_llm}: train Arca with models.backbone={rc.llm}, or "
                "name a checkpoint trained for it in reason.arca_checkpoint",
            )
    builder = SoftPromptBuilder(lm, tok)
    generator: SoftPromptBuilder | VLLMSoftPromptGenerator = builder
    if rc.engine == "vllm":  # the transformers model above only embeds the prompt tokens
        generator = VLLMSoftPromptGenerator(
            builder, rc.llm, rc.tensor_parallel_size, cfg.models.cache_dir
        )
    results: dict[str, Any] = {"rows": [], "generations": []}
    for task in rc.tasks:
        folder = rc.mgsm_path if task == "mgsm" else rc.xcsqa_path
        for lang in rc.languages:
            items = load_items(task, folder, lang, rc.max_items)
            texts = [question_text(it) for it in items]
            english = selected_translations(cfg, texts, lang, arca) if lang != "en" else texts
            soft = arca.bins_lr(texts) if arca is not None else None  # [N, S, d_llm]
            for mode in rc.modes:
                correct = []
                for i in tqdm(range(0, len(items), rc.batch_size), desc=f"{task}/{lang}/{mode}"):
                    sl = slice(i, i + rc.batch_size)
                    msgs = [
                        user_message(mode, q, y, INSTRUCTIONS[task])
                        for q, y in zip(texts[sl], english[sl])
                    ]
                    gens = generator.generate(
                        msgs, soft[sl] if soft is not None else None, rc.max_new_tokens
                    )
                    for item, gen in zip(items[sl], gens):
                        ok, pred = is_correct(item, gen)
                        correct.append(100.0 * ok)
                        results["generations"].append({
                            "task": task, "lang": lang, "mode": mode, "id": item.id,
                            "generation": gen, "extracted": pred, "correct": ok,
                        })  # fmt: skip
                mean, lo, hi = bootstrap_ci(correct, rc.bootstrap, seed=cfg.seed)
                results["rows"].append({"task": task, "language": lang, "mode": mode,
                                        "accuracy": mean, "ci_low": lo, "ci_high": hi,
                                        "n": len(correct)})  # fmt: skip
    (out / "results.json").write_text(json.dumps(results, indent=1, default=str), "utf-8")
    table = markdown(results["rows"])
    (out / "results.md").write_text(table + "\n", encoding="utf-8")
    print(table)
    return results


def markdown(rows: list[dict[str, Any]]) -> str:
    """Accuracy table: rows = task/language, columns = modes, values with 95% CIs."""
    modes = list(dict.fromkeys(r["mode"] for r in rows))
    keys = list(dict.fromkeys((r["task"], r["language"]) for r in rows))
    by = {(r["task"], r["language"], r["mode"]): r for r in rows}
    lines = ["| task | lang | " + " | ".join(modes) + " |", "|---|---|" + "---|" * len(modes)]
    for task, lang in keys:
        cells = []
        for m in modes:
            r = by.get((task, lang, m))
            cells.append(
                f"{r['accuracy']:.1f} [{r['ci_low']:.0f}, {r['ci_high']:.0f}]" if r else "–"
            )
        lines.append(f"| {task} | {lang} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
