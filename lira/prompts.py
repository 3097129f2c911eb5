"""The translation and critic prompts of LiRA (paper 004, App. C.2), versioned.

A prompt version is part of every translation-store key, so changing a prompt's text means
adding a new version here (never editing an old one): stored candidates stay attributable.

``paper-v1`` is the text printed in App. C.2. The PDF renders the quotes around ``{text}``,
``{sentence}`` and ``{translation}`` as typographic ’…’; they are the ASCII apostrophes of the
original prompt string, which is what we use.
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

PROMPTS: dict[str, dict[str, str]] = {
    "paper-v1": {
        "translate": (
            "You are a professional translator, proficient in various languages. "
            "Please translate the following phrase or sentence into English: '{text}'. "
            "Output only the translation results without any other explanations."
        ),
        "critic": (
            "Please strictly evaluate the following translation on three dimensions:\n"
            "• Semantic Fidelity (1–10): Accuracy in conveying original meaning\n"
            "• Emotional Consistency (1–10): Alignment with original emotional tone\n"
            "• Pragmatic Tone (1–10): Appropriateness in contextual usage and style\n"
            "You MUST only output JSON format with keys 'semantic', 'emotional', 'pragmatic' "
            "and values 1–10, without any other explanations.\n"
            "Origin text in {lang}: '{sentence}'\n"
            "Translation in En: '{translation}'"
        ),
    },
}
"""prompt version -> {"translate": template, "critic": template}."""


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


def translation_prompt(text: str, lang: str, version: str = "paper-v1") -> str:
    """The user message asking for an English translation of ``text`` (in language ``lang``)."""
    language_name(lang)  # validate the code early, even though paper-v1 does not name it
    return _fill(_template(version, "translate"), {"text": text})


def critic_prompt(sentence: str, translation: str, lang: str, version: str = "paper-v1") -> str:
    """The user message asking the judge to score ``translation`` of ``sentence`` (in ``lang``)."""
    values = {"lang": language_name(lang), "sentence": sentence, "translation": translation}
    return _fill(_template(version, "critic"), values)
