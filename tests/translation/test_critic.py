"""The JSON-constrained critic (paper 004 App. C.2): validation, constrained decoding, failures."""

from __future__ import annotations

import os

import pytest

from lira.translation.config import CriticConfig
from lira.translation.critic import SCORE_SCHEMA, CriticParseError, build_critic, parse_scores

PAIRS = [
    ("Der Hund schläft im Garten.", "The dog sleeps in the garden."),
    ("Ich habe Hunger.", "I am hungry."),
    ("Wo ist der Bahnhof?", "Where is the train station?"),
    ("Das Wetter ist heute schön.", "The weather is nice today."),
    ("Sie liest ein Buch.", "She reads a book."),
    ("Wir fahren morgen nach Berlin.", "We are driving to Berlin tomorrow."),
]


@pytest.fixture(scope="module")
def critic_lm(request) -> str:
    if os.environ.get("LIRA_TEST_LM"):
        return os.environ["LIRA_TEST_LM"]
    try:
        from lira.demo.references import resolve_model
    except ImportError as e:
        pytest.skip(f"lira.demo is not available ({e}); set LIRA_TEST_LM")
    try:
        cache = str(request.getfixturevalue("demo_cache"))
    except pytest.FixtureLookupError:
        cache = os.environ.get("LIRA_CACHE", "")
    return resolve_model("demo:qwen3-lm", cache)


def test_parse_valid():
    assert parse_scores('{"semantic": 7, "emotional": 1, "pragmatic": 10}') == (7, 1, 10)


@pytest.mark.parametrize(
    ("raw", "match"),
    [
        ('{"semantic": 7, "emotional": 1, "prag', "not valid JSON"),  # truncated
        ('{"semantic": 0, "emotional": 1, "pragmatic": 10}', "outside 1-10"),
        ('{"semantic": 11, "emotional": 1, "pragmatic": 10}', "outside 1-10"),
        ('{"semantic": 7.5, "emotional": 1, "pragmatic": 10}', "not an integer"),
        ('{"semantic": true, "emotional": 1, "pragmatic": 10}', "not an integer"),
        ('{"semantic": "7", "emotional": 1, "pragmatic": 10}', "not an integer"),
        ('{"semantic": 7, "emotional": 1}', "missing keys"),
        ('{"semantic": 7, "emotional": 1, "pragmatic": 2, "note": 3}', "unexpected keys"),
        ("[7, 1, 10]", "expected a JSON object"),
        ("Sure! semantic 7", "not valid JSON"),
        ("", "not valid JSON"),
    ],
)
def test_parse_rejects(raw, match):
    with pytest.raises(CriticParseError, match=match):
        parse_scores(raw)


def test_schema_shape():
    assert SCORE_SCHEMA["required"] == ["semantic", "emotional", "pragmatic"]
    assert all(p == {"type": "integer", "minimum": 1, "maximum": 10}
               for p in SCORE_SCHEMA["properties"].values())  # fmt: skip


def test_kind_none_builds_no_critic():
    assert build_critic(CriticConfig(kind="none")) is None


@pytest.mark.slow
def test_constrained_output_is_always_valid(critic_lm):
    cfg = CriticConfig(kind="transformers", model=critic_lm, max_new_tokens=40, batch_size=6,
                       max_retries=0)  # fmt: skip
    results = build_critic(cfg).score([p[0] for p in PAIRS], [p[1] for p in PAIRS], "de")
    assert all(r.ok for r in results), [r.raw for r in results]
    for r in results:
        assert r.scores == parse_scores(r.raw) and r.attempts == 1
        assert all(1 <= s <= 10 for s in r.scores)


@pytest.mark.slow
def test_truncated_and_unconstrained_outputs_are_recorded_failures(critic_lm):
    # 16 new tokens cannot hold the whole object: the JSON is cut -> recorded, with raw text
    cfg = CriticConfig(kind="transformers", model=critic_lm, max_new_tokens=16, max_retries=1)
    results = build_critic(cfg).score([PAIRS[0][0]], [PAIRS[0][1]], "de")
    r = results[0]
    if r.ok:  # a tokenizer that packs the object into <= 16 tokens: nothing to test here
        pytest.skip(f"the object fits in 16 tokens: {r.raw!r}")
    assert r.scores is None and r.attempts == 2
    assert r.raw.startswith("{") and "not valid JSON" in r.error
    # without the grammar the tiny random LM does not write JSON: failure, raw text kept
    free = build_critic(CriticConfig(kind="transformers", model=critic_lm, max_new_tokens=16,
                                     max_retries=0), constrained=False)  # fmt: skip
    r = free.score([PAIRS[1][0]], [PAIRS[1][1]], "de")[0]
    assert r.scores is None and r.error.startswith("not valid JSON") and r.attempts == 1


# ------------------------------------------------------------------------------ fuzzing
def _oracle(raw) -> tuple[int, int, int] | None:
    """An independent check: the scores a reply may yield, or None when it must be rejected."""
    import json

    if isinstance(raw, (bytes, bytearray)):
        try:
            raw = bytes(raw).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if not isinstance(raw, str):
        return None
    try:
        parsed = json.loads(raw, object_pairs_hook=lambda p: ("OBJECT", p))
    except Exception:
        return None
    if not isinstance(parsed, tuple):
        return None
    pairs = parsed[1]
    if sorted(k for k, _ in pairs) != sorted(DIMS):  # also rejects duplicate keys
        return None
    obj = dict(pairs)
    vals = [obj[k] for k in DIMS]
    if any(type(v) is not int or not 1 <= v <= 10 for v in vals):
        return None
    return vals[0], vals[1], vals[2]


DIMS = ("semantic", "emotional", "pragmatic")
VALID = '{"semantic": 7, "emotional": 1, "pragmatic": 10}'
HAND = [
    None, 7, 7.5, ["semantic"], {"semantic": 7, "emotional": 1, "pragmatic": 10}, object(),
    b'{"semantic": 7, "emotional": 1, "pragmatic": 10}', b"\xff\xfe{", bytearray(b"{}"),
    "1" * 5000, '{"semantic": ' + "9" * 5000 + ', "emotional": 1, "pragmatic": 1}',
    '{"semantic": ' + "9" * 4000 + ', "emotional": 1, "pragmatic": 1}',
    '{"semantic": 1' + "0" * 40 + ', "emotional": 1, "pragmatic": 1}',
    "[" * 100_000, "[" * 3000 + "]" * 3000, '{"a":' * 2000 + "1" + "}" * 2000,
    '{"semantic": ' + "[" * 1500 + "]" * 1500 + ', "emotional": 1, "pragmatic": 1}',
    "NaN", "Infinity", '{"semantic": NaN, "emotional": 1, "pragmatic": 1}',
    '{"semantic": -Infinity, "emotional": 1, "pragmatic": 1}',
    '{"semantic": 1e400, "emotional": 1, "pragmatic": 1}',
    '{"semantic": 7.0, "emotional": 1, "pragmatic": 1}', '{"semantic": 7e0, "emotional": 1, "pragmatic": 1}',
    '{"semantic": -0, "emotional": 1, "pragmatic": 1}', '{"semantic": 1, "emotional": 1, "pragmatic": 1} x',
    '{"semantic": 1, "semantic": 1, "emotional": 1, "pragmatic": 1}',
    '{"semantic": 11, "semantic": 1, "emotional": 1, "pragmatic": 1}',
    '{"semantic": {"value": 7}, "emotional": 1, "pragmatic": 1}',
    '{"scores": {"semantic": 7, "emotional": 1, "pragmatic": 1}}',
    '{"semantic": 7, "emotional": 1, "pragmatic": 1, "', '"', '"\\ud800"', '"\\u0000"',
    '{"semantic": null, "emotional": 1, "pragmatic": 1}', "\x00" * 10, " " * 5000, "{" + " " * 4090 + "}",
]  # fmt: skip


def _random_replies(n: int, seed: int = 0) -> list:
    import json
    import random

    rng = random.Random(seed)
    values = [0, 1, 10, 11, -1, 5.5, 7.0, "7", True, False, None, [], {}, [7], {"v": 7},
              10**20, -(10**30), 1e308, float("nan"), "", "\u00e9", 2**63]  # fmt: skip
    out: list = []
    for i in range(n):
        kind = i % 8
        if kind == 0:  # random bytes, as bytes or decoded
            b = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 80)))
            out.append(b if rng.random() < 0.5 else b.decode("latin-1"))
        elif kind == 1:  # truncated valid JSON
            out.append(VALID[: rng.randrange(len(VALID))])
        elif kind == 2:  # a mutated value
            obj = {k: rng.randint(1, 10) for k in DIMS}
            obj[rng.choice(DIMS)] = rng.choice(values)
            out.append(json.dumps(obj, allow_nan=True))
        elif kind == 3:  # extra or missing keys
            obj = {k: rng.randint(1, 10) for k in DIMS}
            if rng.random() < 0.5:
                del obj[rng.choice(DIMS)]
            else:
                obj[rng.choice(["note", "Semantic", "semantic ", "", "0"])] = rng.randint(1, 10)
            out.append(json.dumps(obj))
        elif kind == 4:  # nested objects / arrays around or inside
            obj: object = {k: rng.randint(1, 10) for k in DIMS}
            for _ in range(rng.randrange(1, 6)):
                obj = rng.choice([[obj], {"scores": obj}, {"semantic": obj, "emotional": 1,
                                                           "pragmatic": 1}])  # fmt: skip
            out.append(json.dumps(obj))
        elif kind == 5:  # random printable noise with JSON characters
            out.append("".join(rng.choice('{}[]":,0123456789-+.eE semanticNaIfy') for _ in
                               range(rng.randrange(1, 60))))  # fmt: skip
        elif kind == 6:  # byte flips of a valid reply
            b = bytearray(VALID.encode())
            for _ in range(rng.randrange(1, 4)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            out.append(
                bytes(b).decode("utf-8", errors="replace") if rng.random() < 0.5 else bytes(b)
            )
        else:  # non-str Python values
            out.append(rng.choice(values))
    return out


def test_fuzz_parser_never_crashes_and_never_accepts_an_invalid_score():
    replies = HAND + _random_replies(2000)
    assert len(replies) >= 1000
    accepted = rejected = 0
    for raw in replies:
        expected = _oracle(raw)
        try:
            got = parse_scores(raw)
        except CriticParseError as e:
            assert str(e), raw
            assert expected is None or len(raw) > 4096, f"valid reply rejected: {raw!r:.200}"
            rejected += 1
            continue
        # anything other than CriticParseError propagates and fails the test
        assert got == expected, f"accepted {got} for {raw!r:.200}"
        assert all(type(v) is int and 1 <= v <= 10 for v in got)
        accepted += 1
    assert rejected > 1500 and accepted > 10  # both paths are exercised


def test_scores_of_a_valid_reply_with_whitespace_and_key_order():
    assert parse_scores(' {"pragmatic":3,"semantic":1,\n"emotional":2} ') == (1, 2, 3)
    assert parse_scores(b'{"semantic": 7, "emotional": 1, "pragmatic": 10}') == (7, 1, 10)
