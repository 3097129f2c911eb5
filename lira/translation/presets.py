"""pass@k translator presets of paper 004, Table 15 (App. D.3).

=======  ======  ======  ======  ======
pass@k   T1      T2      T3      T4
=======  ======  ======  ======  ======
pass@0   OPUS    M2M     N600    N3B
pass@1   LLAMA   OPUS    M2M     N3B
pass@2   LLAMA   GEMMA   M2M     N3B
pass@3   LLAMA   GEMMA   QWEN    N3B
pass@4   LLAMA   GEMMA   QWEN    DS-R1
=======  ======  ======  ======  ======

``TranslationConfig.active_translators()`` takes the first k LLMs and then the first 4-k MT
models, so the MT list is ordered N3B, M2M, OPUS, N600 — which reproduces every row above.
The table names model families only; the checkpoints below are our choice (the LLMs of
LiRA-Max, §5 / D.1, and App. C.1's Llama-3.3-70B), overridable through the returned config.
"""

from __future__ import annotations

from lira.translation.config import CriticConfig, TranslationConfig, TranslatorConfig

NLLB_CODES: dict[str, str] = {
    "ar": "arb_Arab", "de": "deu_Latn", "el": "ell_Grek", "en": "eng_Latn", "es": "spa_Latn",
    "fr": "fra_Latn", "hi": "hin_Deva", "it": "ita_Latn", "ja": "jpn_Jpan", "ko": "kor_Hang",
    "pt": "por_Latn", "ro": "ron_Latn", "ru": "rus_Cyrl", "sw": "swh_Latn", "th": "tha_Thai",
    "tr": "tur_Latn", "vi": "vie_Latn", "zh": "zho_Hans",
}  # fmt: skip
"""ISO 639-1 -> NLLB-200 (FLORES-200) codes for the languages of our benchmarks."""

M2M_CODES: dict[str, str] = {k: k for k in NLLB_CODES}
"""M2M100 uses ISO 639-1 codes."""

LLMS: list[tuple[str, str]] = [
    ("llama", "meta-llama/Llama-3.3-70B-Instruct"),
    ("gemma", "google/gemma-2-27b-it"),
    ("qwen", "Qwen/Qwen3-32B"),
    ("ds-r1", "deepseek-ai/DeepSeek-R1-Distill-Qwen-32B"),
]
MTS: list[tuple[str, str, dict[str, str]]] = [
    ("n3b", "facebook/nllb-200-3.3B", NLLB_CODES),
    ("m2m", "facebook/m2m100_418M", M2M_CODES),
    ("opus", "Helsinki-NLP/opus-mt-mul-en", {}),
    ("n600", "facebook/nllb-200-distilled-600M", NLLB_CODES),
]


def pass_at_k_preset(k: int, llm_kind: str = "vllm") -> TranslationConfig:
    """The Table 15 pool for pass@``k`` (0-4): k LLM translators + 4-k MT models."""
    if not 0 <= k <= 4:
        raise ValueError(f"pass@{k} is not in Table 15; choose k in 0..4")
    llms = [
        TranslatorConfig(name=name, kind=llm_kind, role="llm", model=model)  # type: ignore[arg-type]
        for name, model in LLMS
    ]
    mts = [
        TranslatorConfig(name=name, kind="transformers", role="mt", model=model, lang_codes=codes)
        for name, model, codes in MTS
    ]
    return TranslationConfig(
        llm_translators=llms,
        mt_translators=mts,
        pass_at_k=k,
        num_candidates=4,
        critic=CriticConfig(kind=llm_kind, model="Qwen/Qwen3-32B"),  # type: ignore[arg-type]
    )
