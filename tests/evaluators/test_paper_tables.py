"""Paper 004's Tables 1, 2 and 16 filled from leaderboard rows: where each value goes."""

from __future__ import annotations

from evaluators.paper_tables import render


def _row(method, scenario, language, metric, value):
    return {"method": method, "task": "t", "scenario": scenario, "language": language,
            "metric": metric, "value": value, "ci_low": value, "ci_high": value}  # fmt: skip


def _lines(md, start):
    """The table lines of the section whose title starts with ``start``."""
    part = md.split(start, 1)[1].split("\n## ", 1)[0]
    return [x for x in part.splitlines() if x.startswith("|")]


def test_a_qwen3_8b_run_fills_its_rows_and_nothing_else():
    countries = {"bn": 50.0, "id": 60.0, "ms": 55.0, "ur": 45.0, "th": 65.0, "tl": 80.0,
                 "vi": 70.0}  # fmt: skip
    rows = [_row("backbone", "lazretrieval", lang, "ndcg@10", v) for lang, v in countries.items()]
    rows += [_row("lira", "lazretrieval", "bn", "ndcg@10", 52.0)]
    rows += [_row("lira", "MLQARetrieval", "all", "ndcg@10", 81.0),
             _row("lira", "BelebeleRetrieval", "all", "ndcg@10", 86.0),
             _row("lira", "STS22", "all", "pearson", 74.0),
             _row("lira", "STS22", "de-en", "pearson", 10.0),  # a subset: never a table cell
             _row("lira: h(translation)", "STS22", "all", "pearson", 70.0),
             _row("clear", "BelebeleRetrieval", "all", "ndcg@10", 40.0)]  # fmt: skip
    md = render(rows, "Qwen/Qwen3-Embedding-8B", 2, "google/mt5-xl")
    t1 = _lines(md, "## Table 1.")
    assert t1[0] == "| METHOD | BD | ID | MY | PK | TH | PH | VN | AVG. |"
    i = t1.index("| QWEN3-E-8B | 50.00 | 60.00 | 55.00 | 45.00 | 65.00 | 80.00 | 70.00 | 60.71 |")
    assert t1[i + 1 : i + 5] == [
        "| ↪ WITH LIRA-BASE | — | — | — | — | — | — | — | — |",
        "| ↪ WITH LIRA-LARGE | — | — | — | — | — | — | — | — |",
        "| ↪ WITH LIRA-MAX | — | — | — | — | — | — | — | — |",
        "| ↪ with LiRA (this run: g=google/mt5-xl, pass@2) | 52.00 | — | — | — | — | — | — | — |",
    ]
    assert "| GTE-LARGE | — | — | — | — | — | — | — | — |" in t1
    t2 = _lines(md, "## Table 2.")
    assert t2[0] == "| METHOD | MLQA-R | BELE-R | STS22 | AVG. |"
    assert t2[-3:] == [
        "| ↪ with LiRA (this run: g=google/mt5-xl, pass@2) | 81.00 | 86.00 | 74.00 | 80.33 |",
        "| lira: h(translation) (this run) | — | — | 70.00 | — |",
        "| clear (this run) | — | 40.00 | — | — |",
    ]
    t16 = _lines(md, "## Table 16.")
    assert t16[0] == "| METHOD | PASS@K | MLQA-R | BELE-R | STS22 |"
    assert t16[2] == "| QWEN3-8B | PASS@0 | — | — | — |"
    assert t16[4] == "|  | PASS@2 | — | — | 70.00 |"  # h on LiRA's chosen translation
    assert t16[7] == "| WITH LIRA | PASS@0 | — | — | — |"
    assert t16[9] == "|  | PASS@2 | 81.00 | 86.00 | 74.00 |"
    assert sum(x.count("—") for x in t16) == 10 * 3 - 4  # 4 cells filled
