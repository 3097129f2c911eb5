"""The translation and critic prompts of LiRA (paper 004, App. C.2), versioned.

A prompt version is part of every translation-store key, so changing a prompt's text means
adding a new version here (never editing an old one): stored candidates stay attributable.

``paper-v1`` is the text printed in App. C.2. The PDF renders the quotes around ``{text}``,
``{sentence}`` and ``{translation}`` as typographic ’…’; they are the ASCII apostrophes of the
original prompt string, which is what we use. It is a chat prompt: the translator wraps it in
the model's chat template.

``fewshot-v1`` (beyond the paper) is for *base* (completion) models such as Gemma-3-270M, which
have no chat template and answer a chat prompt with more chat: four hand-written sentence pairs
(German, French, Japanese, Portuguese; none from any evaluation set) in ``Language: … /
English: …`` form, then ``{lang}: {text}\nEnglish:``. The model continues the pattern; the
translation is its first line (:func:`is_completion` versions stop at the first newline). Its
critic prompt is ``paper-v1``'s (a critic is a chat model).
"""

from __future__ import annotations

import re

from lira.errors import UserInputError

LANGUAGE_NAMES: dict[str, str] = {
    "af": "Afrikaans",
    "am": "Amharic",
    "ar": "Arabic",
    "az": "Azerbaijani",
    "bg": "Bulgarian",
    "bn": "Bengali",
    "ca": "Catalan",
    "cs": "Czech",
    "da": "Danish",
    "de": "German",
    "el": "Greek",
    "en": "English",
    "es": "Spanish",
    "et": "Estonian",
    "fa": "Persian",
    "fi": "Finnish",
    "fr": "French",
    "gu": "Gujarati",
    "ha": "Hausa",
    "he": "Hebrew",
    "hi": "Hindi",
    "hr": "Croatian",
    "hu": "Hungarian",
    "hy": "Armenian",
    "id": "Indonesian",
    "ig": "Igbo",
    "is": "Icelandic",
    "it": "Italian",
    "ja": "Japanese",
    "jv": "Javanese",
    "ka": "Georgian",
    "kk": "Kazakh",
    "km": "Khmer",
    "kn": "Kannada",
    "ko": "Korean",
    "lo": "Lao",
    "lt": "Lithuanian",
    "lv": "Latvian",
    "mk": "Macedonian",
    "ml": "Malayalam",
    "mn": "Mongolian",
    "mr": "Marathi",
    "ms": "Malay",
    "my": "Burmese",
    "ne": "Nepali",
    "nl": "Dutch",
    "no": "Norwegian",
    "pa": "Punjabi",
    "pl": "Polish",
    "ps": "Pashto",
    "pt": "Portuguese",
    "ro": "Romanian",
    "ru": "Russian",
    "si": "Sinhala",
    "sk": "Slovak",
    "sl": "Slovenian",
    "so": "Somali",
    "sq": "Albanian",
    "sr": "Serbian",
    "sv": "Swedish",
    "sw": "Swahili",
    "ta": "Tamil",
    "te": "Telugu",
    "th": "Thai",
    "tl": "Tagalog",
    "tr": "Turkish",
    "uk": "Ukrainian",
    "ur": "Urdu",
    "uz": "Uzbek",
    "vi": "Vietnamese",
    "wo": "Wolof",
    "xh": "Xhosa",
    "yo": "Yoruba",
    "zh": "Chinese",
    "zu": "Zulu",
}
"""ISO 639-1 code -> English language name used in the critic prompt."""

PAPER_CRITIC = (
    "Please strictly evaluate the following translation on three dimensions:\n"
    "• Semantic Fidelity (1–10): Accuracy in conveying original meaning\n"
    "• Emotional Consistency (1–10): Alignment with original emotional tone\n"
    "• Pragmatic Tone (1–10): Appropriateness in contextual usage and style\n"
    "You MUST only output JSON format with keys 'semantic', 'emotional', 'pragmatic' "
    "and values 1–10, without any other explanations.\n"
    "Origin text in {lang}: '{sentence}'\n"
    "Translation in En: '{translation}'"
)
"""The critic prompt printed in App. C.2 (every version's critic: a critic is a chat model)."""

PROMPTS: dict[str, dict[str, str]] = {
    "paper-v1": {
        "translate": (
            "You are a professional translator, proficient in various languages. "
            "Please translate the following phrase or sentence into English: '{text}'. "
            "Output only the translation results without any other explanations."
        ),
        "critic": PAPER_CRITIC,
    },
    "fewshot-v1": {
        "translate": (
            "Translate each sentence into English.\n\n"
            "German: Wie viele Menschen leben in Berlin?\n"
            "English: How many people live in Berlin?\n\n"
            "French: La tour a été construite en 1889 pour l'Exposition universelle.\n"
            "English: The tower was built in 1889 for the World's Fair.\n\n"
            "Japanese: 富士山の高さは何メートルですか？\n"
            "English: How many meters high is Mount Fuji?\n\n"
            "Portuguese: Quem escreveu o romance Dom Casmurro?\n"
            "English: Who wrote the novel Dom Casmurro?\n\n"
            "{lang}: {text}\n"
            "English:"
        ),
        "critic": PAPER_CRITIC,
    },
}
"""prompt version -> {"translate": template, "critic": template}."""

COMPLETION = frozenset({"fewshot-v1"})
"""Prompt versions for base (completion) models: sent as plain text, no chat template; the
translation is the output's first line."""


def language_name(code: str) -> str:
    """English name of an ISO 639-1 code; an unknown code raises naming the known ones."""
    base = code.strip().lower().replace("_", "-").split("-")[0]
    if base not in LANGUAGE_NAMES:
        raise ValueError(
            f"unknown language code {code!r}; known codes: {', '.join(sorted(LANGUAGE_NAMES))} "
            "(add it to lira.prompts.LANGUAGE_NAMES)"
        )
    return LANGUAGE_NAMES[base]


def unknown_prompt_version(version: str) -> str | None:
    """Why ``version`` names no prompt set in :data:`PROMPTS` (one line), else None."""
    if version in PROMPTS:
        return None
    return f"unknown prompt version {version!r}; choose from {sorted(PROMPTS)}"


def _template(version: str, kind: str) -> str:
    if problem := unknown_prompt_version(version):
        raise UserInputError(problem)
    return PROMPTS[version][kind]


def _fill(template: str, values: dict[str, str]) -> str:
    """Substitute ``{name}`` placeholders in one pass (a value containing braces stays as is)."""
    return re.sub(r"\{(\w+)\}", lambda m: values.get(m.group(1), m.group(0)), template)


def is_completion(version: str) -> bool:
    """True when prompt ``version`` is for a base (completion) model (:data:`COMPLETION`)."""
    return version in COMPLETION


def translation_prompt(text: str, lang: str, version: str = "paper-v1") -> str:
    """The prompt asking for an English translation of ``text`` (in language ``lang``): a chat
    user message, or the whole completion prompt for :func:`is_completion` versions."""
    name = language_name(lang)  # validated early, even where the prompt does not name it
    # a source line break would end the few-shot pattern's line: one line per source there
    if is_completion(version):
        text = " ".join(text.split())
    return _fill(_template(version, "translate"), {"text": text, "lang": name})


def first_line(output: str) -> str:
    """A completion prompt's translation: the output up to its first line break, stripped."""
    return output.strip().split("\n", 1)[0].strip()


def critic_prompt(sentence: str, translation: str, lang: str, version: str = "paper-v1") -> str:
    """The user message asking the judge to score ``translation`` of ``sentence`` (in ``lang``)."""
    values = {"lang": language_name(lang), "sentence": sentence, "translation": translation}
    return _fill(_template(version, "critic"), values)
