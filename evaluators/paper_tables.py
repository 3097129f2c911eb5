"""Tables with the rows and columns of paper 004 (LiRA), filled with what this run measured.

``lira compare CONFIG --paper-tables`` prints three tables (and writes
``<output_dir>/compare/paper_tables.md``), read from the leaderboard rows under
``<output_dir>/compare/`` (``leaderboard.json`` of the configured data, ``mteb/leaderboard.json``
of ``--mteb`` tasks), so one GPU run per table section fills it:

- **Table 1** (LazRetrieval): nDCG@10 of each method per country, BD ID MY PK TH PH VN and AVG
  (countries as languages: bn id ms ur th tl vi); from the ``lazretrieval`` rows (released test
  split, each country's queries over its own items).
- **Table 2** (public benchmarks): MLQA-R and Bele-R nDCG@10 (MLQARetrieval,
  BelebeleRetrieval) and STS22 Pearson (cosine), each the mean over the evaluated subsets, and AVG;
  from ``--mteb`` rows.
- **Table 16** (pass@k): the backbone and LiRA at pass@0..4 on the same three columns. The
  backbone's value there varies with k in the paper, so it is read as the backbone on LiRA's
  chosen translation (our ``lira: h(translation)`` component); a run fills the row of its own
  ``translation.pass_at_k``.

Rows keep the paper's order and names. This run's backbone fills the paper row of the same model
(``models.backbone`` matched by hub id, e.g. ``Qwen/Qwen3-Embedding-8B`` → QWEN3-E-8B) and LiRA a
row ``↪ with LiRA (this run …)`` under it; the paper's LiRA-Base/Large/Max rows are distinct
configurations and stay "—". Other methods of the run (baselines, mE5-small, LiRA's components,
a backbone the paper did not evaluate) are listed below the paper's rows. A cell is "—" where
nothing was run; AVG only when every column of the row is filled. Values are percentages.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from evaluators.config import EvalRun
from evaluators.leaderboard import Row
from lira.errors import CheckpointError
from lira.jsonio import read_json

DASH = "—"
COUNTRIES = {"BD": "bn", "ID": "id", "MY": "ms", "PK": "ur", "TH": "th", "PH": "tl", "VN": "vi"}
"""Table 1's columns (paper order) -> the language of LazRetrieval's ``nation``."""
PUBLIC = {
    "MLQA-R": (("MLQARetrieval",), "ndcg@10"),
    "BELE-R": (("BelebeleRetrieval",), "ndcg@10"),
    "STS22": (("STS22", "STS22.v2"), "pearson"),
}
"""Table 2 / 16 columns -> (mteb task names, metric)."""
BACKBONE = "backbone"
LIRA = "lira"
TRANSLATION = "lira: h(translation)"
"""Method names of ``lira compare`` (lasr.eval_models.run_encoders)."""

# (label, hub id of the model the row reports, or None for a LiRA row of the paper)
TABLE1_ROWS: list[tuple[str, str | None]] = [
    ("SENTENCE-T5-XXL", "sentence-transformers/sentence-t5-xxl"),
    ("GTR-XXL", "sentence-transformers/gtr-t5-xxl"),
    ("SIMCSE", "princeton-nlp/sup-simcse-roberta-large"),
    ("CONTRIEVER", "facebook/contriever"),
    ("GTE-LARGE", "thenlper/gte-large"),
    ("BGE-EN-V1.5", "BAAI/bge-large-en-v1.5"),
    ("E5-LARGE-V2", "intfloat/e5-large-v2"),
    ("E5-MISTRAL-7B", "intfloat/e5-mistral-7b-instruct"),
    ("QWEN3-E-0.6B", "Qwen/Qwen3-Embedding-0.6B"),
    ("↪ WITH LIRA-LARGE", None),
    ("QWEN3-E-4B", "Qwen/Qwen3-Embedding-4B"),
    ("↪ WITH LIRA-LARGE", None),
    ("QWEN3-E-8B", "Qwen/Qwen3-Embedding-8B"),
    ("↪ WITH LIRA-BASE", None),
    ("↪ WITH LIRA-LARGE", None),
    ("↪ WITH LIRA-MAX", None),
]
TABLE2_ROWS: list[tuple[str, str | None]] = [
    ("SIMCSE", "princeton-nlp/sup-simcse-roberta-large"),
    ("ST5-XXL", "sentence-transformers/sentence-t5-xxl"),
    ("GTR-XXL", "sentence-transformers/gtr-t5-xxl"),
    ("CONTRIEVER", "facebook/contriever"),
    ("GTE-LARGE", "thenlper/gte-large"),
    ("↪ WITH LIRA", None),
    ("BGE-EN-1.5", "BAAI/bge-large-en-v1.5"),
    ("↪ WITH LIRA", None),
    ("E5-LARGE", "intfloat/e5-large-v2"),
    ("E5-MISTRAL", "intfloat/e5-mistral-7b-instruct"),
    ("↪ WITH LIRA", None),
    ("LUSIFER", None),
    ("QWEN3-E-8B", "Qwen/Qwen3-Embedding-8B"),
    ("↪ WITH LIRA", None),
]
PASS_AT_K = range(5)


def load_rows(compare_dir: str | Path) -> list[Row]:
    """Every leaderboard row saved under ``compare_dir`` (configured data, then ``--mteb``)."""
    rows: list[Row] = []
    for path in (
        Path(compare_dir) / "leaderboard.json",
        Path(compare_dir) / "mteb" / "leaderboard.json",
    ):
        if path.is_file():
            fix = "run `lira compare` again (it rewrites the leaderboard), or delete the file"
            got = read_json(path, "leaderboard", fix)
            if not isinstance(got, list) or not all(isinstance(r, dict) for r in got):
                raise CheckpointError(f"leaderboard {path} is not a list of rows; {fix}")
            rows += got
    return rows


def _same_model(a: str, b: str) -> bool:
    """Hub ids (or folders named after them) that name the same model."""
    return a.rstrip("/").split("/")[-1].lower() == b.rstrip("/").split("/")[-1].lower()


def _fmt(v: float | None) -> str:
    return DASH if v is None else f"{v:.2f}"


def _table(header: list[str], lines: list[list[str]]) -> str:
    out = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    out += ["| " + " | ".join(cells) + " |" for cells in lines]
    return "\n".join(out)


class _Values:
    """Look-ups of one value per (method, scenario, language, metric)."""

    def __init__(self, rows: list[Row]) -> None:
        self.v = {
            (r["method"], r["scenario"], r["language"], r["metric"]): r["value"] for r in rows
        }
        self.methods = list(dict.fromkeys(r["method"] for r in rows))

    def country(self, method: str, code: str) -> float | None:
        return self.v.get((method, "lazretrieval", COUNTRIES[code], "ndcg@10"))

    def public(self, method: str, column: str) -> float | None:
        tasks, metric = PUBLIC[column]
        return next((self.v[k] for t in tasks if (k := (method, t, "all", metric)) in self.v), None)


def _extra_label(method: str, backbone_ref: str) -> str:
    """A row label for a method of this run that has no row in the paper."""
    return f"{backbone_ref} (this run: backbone)" if method == BACKBONE else f"{method} (this run)"


def _cells(values: list[float | None]) -> list[str]:
    avg = None if any(v is None for v in values) else sum(values) / len(values)  # type: ignore[arg-type]
    return [_fmt(v) for v in values] + [_fmt(avg)]


def _paper_block(
    paper_rows: list[tuple[str, str | None]],
    get: Callable[[str | None], list[float | None]],
    backbone_ref: str,
    lira_label: str,
    used: set[str],
) -> list[tuple[str, list[float | None]]]:
    """The paper's rows in order; this run's backbone fills the row of the same model and LiRA
    gets a row after the paper's LiRA rows of that backbone (``used`` records both)."""
    out = [(label, get(None)) for label, _ in paper_rows]
    at = next((i for i, (_, hub) in enumerate(paper_rows)
               if hub is not None and _same_model(hub, backbone_ref)), None)  # fmt: skip
    if at is None:
        return out
    end = at + 1
    while end < len(paper_rows) and paper_rows[end][0].startswith("↪"):
        end += 1
    out[at] = (paper_rows[at][0], get(BACKBONE))
    out.insert(end, (lira_label, get(LIRA)))
    used.update((BACKBONE, LIRA))
    return out


def _method_table(
    title: str,
    header: list[str],
    val: _Values,
    paper_rows: list[tuple[str, str | None]],
    get: Callable[[str | None], list[float | None]],
    labels: tuple[str, str],
) -> list[str]:
    """A table's Markdown lines under ``title``: the paper's method rows (:func:`_paper_block`,
    ``labels`` = (backbone ref, LiRA row label)), then every other method of this run with a
    value."""
    backbone_ref, lira_label = labels
    used: set[str] = set()
    block = _paper_block(paper_rows, get, backbone_ref, lira_label, used)
    extra = [m for m in val.methods if m not in used and any(v is not None for v in get(m))]
    lines = [[label, *_cells(v)] for label, v in block]
    lines += [[_extra_label(m, backbone_ref), *_cells(get(m))] for m in extra]
    return ["", title, "", _table(header, lines)]


def render(
    rows: list[Row], backbone_ref: str, pass_at_k: int, encoder_ref: str = "", note: str = ""
) -> str:
    """The three paper-shaped tables as Markdown (see the module docstring)."""
    val = _Values(rows)
    lira_label = f"↪ with LiRA (this run: g={encoder_ref or '?'}, pass@{pass_at_k})"
    parts = [
        "# Paper 004 tables, filled with this run",
        "",
        f"This run: backbone {backbone_ref}, pass@{pass_at_k}. Values in percent; {DASH} = not run. "
        "Rows and columns as printed in the paper; the paper's own numbers are not repeated here.",
    ]
    if note:
        parts.append(f"Data: {note}.")
    # ---------------------------------------------------------------- Table 1
    cols = list(COUNTRIES)

    def t1(method: str | None) -> list[float | None]:
        return [None if method is None else val.country(method, c) for c in cols]

    parts += _method_table(
        "## Table 1. LazRetrieval (nDCG@10 per country: its test queries over its own items)",
        ["METHOD", *cols, "AVG."], val, TABLE1_ROWS, t1, (backbone_ref, lira_label),
    )  # fmt: skip
    # ---------------------------------------------------------------- Table 2
    pcols = list(PUBLIC)

    def t2(method: str | None) -> list[float | None]:
        return [None if method is None else val.public(method, c) for c in pcols]

    parts += _method_table(
        "## Table 2. Public benchmarks (MLQA-R, Bele-R: nDCG@10; STS22: Pearson of cosine; "
        "mean over the evaluated subsets)",
        ["METHOD", "MLQA-R", "BELE-R", "STS22", "AVG."], val, TABLE2_ROWS, t2,
        (backbone_ref, lira_label),
    )  # fmt: skip
    # ---------------------------------------------------------------- Table 16
    base = "QWEN3-8B" if _same_model("Qwen/Qwen3-Embedding-8B", backbone_ref) else backbone_ref
    lines = []
    for label, method in ((base, TRANSLATION), ("WITH LIRA", LIRA)):
        for k in PASS_AT_K:
            v = t2(method) if k == pass_at_k else t2(None)
            lines.append([label if k == 0 else "", f"PASS@{k}", *[_fmt(x) for x in v]])
    parts += [
        "",
        "## Table 16. pass@k (the backbone row is the backbone on LiRA's chosen translation)",
        "",
        _table(["METHOD", "PASS@K", "MLQA-R", "BELE-R", "STS22"], lines),
        "",
    ]
    return "\n".join(parts)


def write_paper_tables(compare_dir: str | Path, cfg: EvalRun, note: str = "") -> str:
    """Render the tables from the rows under ``compare_dir`` and write ``paper_tables.md``."""
    md = render(
        load_rows(compare_dir),
        cfg.models.backbone,
        cfg.translation.pass_at_k,
        cfg.models.encoder,
        note,
    )
    path = Path(compare_dir) / "paper_tables.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(md, encoding="utf-8")
    return md
