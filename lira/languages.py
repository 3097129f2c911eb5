"""Language codes: the ISO 639-1 codes LiRA accepts, and the code of a text of unknown language.

Every language a user gives (``data.*_languages``, ``query_language``, ``encode(langs=...)``,
``lang=``) is an ISO 639-1 code: the translation store is keyed by it and the translators'
prompts name the language from it. :func:`language_problem` says why a code is not one, in
words a one-line error can carry.
"""

from __future__ import annotations

ISO_639_1 = frozenset(
    """
    aa ab ae af ak am an ar as av ay az ba be bg bi bm bn bo br bs ca ce ch co cr cs cu cv
    cy da de dv dz ee el en eo es et eu fa ff fi fj fo fr fy ga gd gl gn gu gv ha he hi ho
    hr ht hu hy hz ia id ie ig ii ik io is it iu ja jv ka kg ki kj kk kl km kn ko kr ks ku
    kv kw ky la lb lg li ln lo lt lu lv mg mh mi mk ml mn mr ms mt my na nb nd ne ng nl nn
    no nr nv ny oc oj om or os pa pi pl ps pt qu rm rn ro ru rw sa sc sd se sg si sk sl sm
    sn so sq sr ss st su sv sw ta te tg th ti tk tl tn to tr ts tt tw ty ug uk ur uz ve vi
    vo wa wo xh yi yo za zh zu
    """.split()
)
"""The 183 ISO 639-1 language codes (two lower-case letters)."""
UNKNOWN_LANG = "xx"
"""Language of texts given without one: never translated (the store keys on language)."""


def language_problem(code: object) -> str | None:
    """Why ``code`` is not an ISO 639-1 language code (None when it is one)."""
    if not isinstance(code, str):
        return f"{code!r} is not a language code (a {type(code).__name__})"
    if code in ISO_639_1:
        return None
    if code.strip().lower() in ISO_639_1:
        return f"{code!r} is not an ISO 639-1 code: write it in lower case without spaces"
    fix = "use the 2-letter one, e.g. de for deu" if len(code) == 3 else "e.g. de, en, zh"
    return f"{code[:20]!r} is not an ISO 639-1 language code ({fix})"
