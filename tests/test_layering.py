"""The import structure: data flows one way, core <- arca <- lasr <- evaluators <- entry points.

Every import is read from the source (module level, function level and ``TYPE_CHECKING``
blocks alike), so a lazy import cannot hide an upward dependency or a cycle.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lira", "arca", "lasr", "evaluators")
ENTRY_POINTS = (
    "lira.cli",
    "lira.pipeline",
    "lira.__main__",
    "lira.reasoning",
    "lira.ablate",
    "lira.runconfig",
)
LAYERS = {"core": 0, "arca": 1, "lasr": 2, "evaluators": 3, "entry": 4}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for pkg in PACKAGES for p in sorted((ROOT / pkg).rglob("*.py"))}


def layer(module: str) -> str:
    """The layer a module belongs to (``lira`` is the core but for its entry points)."""
    if any(module == e or module.startswith(e + ".") for e in ENTRY_POINTS):
        return "entry"
    top = module.split(".")[0]
    return "core" if top == "lira" else top


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


def test_every_import_points_down_or_sideways():
    """No module imports a module of a higher layer (core <- arca <- lasr <- evaluators <- entry)."""
    upward = [
        f"{m} ({layer(m)}) imports {d} ({layer(d)})"
        for m, deps in graph().items()
        for d in sorted(deps)
        if LAYERS[layer(d)] > LAYERS[layer(m)]
    ]
    assert upward == []


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
    assert found == {"lasr.model"} and layer("lira.x") == "core" and layer("lasr.model") == "lasr"


@pytest.mark.parametrize("package", ["arca", "lasr"])
def test_test_folders_do_not_shadow_the_packages(package):
    """``import arca`` in the suite is the real package, not ``tests/arca`` (tests/ is a package)."""
    mod = importlib.import_module(package)
    assert Path(mod.__file__).resolve().parent == ROOT / package
