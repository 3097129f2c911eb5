"""MTEB tasks and their data, loaded through the real ``mteb`` package (the ``mteb`` extra, pinned
in pyproject.toml); :mod:`evaluators.mteb_eval` scores models on them.

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
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

from lira.errors import MissingFileError, UserInputError

if TYPE_CHECKING:  # mteb is optional (the ``mteb`` extra): its types for annotations only
    from mteb.abstasks import AbsTask

MTEB_PIN = "mteb==2.26.24"
"""The tested version (pyproject.toml's ``mteb`` extra)."""


def require_mteb() -> ModuleType:
    """The ``mteb`` module, or a UserInputError naming the extra to install."""
    try:
        import mteb
    except ImportError:
        raise UserInputError(
            "MTEB tasks need the `mteb` package, which is not installed: "
            f"`.venv/bin/pip install -e '.[mteb]'` (or `pip install {MTEB_PIN}`)"
        ) from None
    return mteb


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
    mteb = require_mteb()
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
