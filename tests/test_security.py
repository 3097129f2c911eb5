"""Security defaults, pinned by reading the package sources (AST, plus a grep for the two
literal patterns): no remote code from model repositories unless a config field asks for it,
no shell, no eval / exec, and no loading that can unpickle code.

Each check is a function over one file's source; the ``*_catches_*`` tests feed it the lines it
must reject, so a check cannot pass by matching nothing.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("lira", "arca", "lasr", "evaluators", "pipeline")

Check = Callable[[str, str], list[str]]
"""(label, source text) -> the offending lines, as ``label:line: what``."""


def _sources() -> list[tuple[str, str]]:
    files = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    assert len(files) > 50, "the package sources were not found"
    return [(str(p.relative_to(ROOT)), p.read_text(encoding="utf-8")) for p in files]


def _aliases(tree: ast.AST) -> dict[str, str]:
    """Local name -> the dotted name it stands for (``import torch as th``, ``from os import
    system``)."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for a in node.names:
                out[a.asname or a.name] = f"{node.module}.{a.name}"
    return out


def _dotted(node: ast.AST, aliases: dict[str, str]) -> str:
    """``torch.load`` for ``torch.load`` / ``th.load`` / ``load`` (from torch); '' otherwise."""
    if isinstance(node, ast.Name):
        return aliases.get(node.id, node.id)
    if isinstance(node, ast.Attribute):
        base = _dotted(node.value, aliases)
        return f"{base}.{node.attr}" if base else ""
    return ""


def _calls(text: str) -> list[tuple[ast.Call, str]]:
    tree = ast.parse(text)
    aliases = _aliases(tree)
    return [(n, _dotted(n.func, aliases)) for n in ast.walk(tree) if isinstance(n, ast.Call)]


def _is_const(node: ast.AST | None, value: object) -> bool:
    return isinstance(node, ast.Constant) and node.value is value


def _kw(call: ast.Call, name: str) -> ast.keyword | None:
    return next((k for k in call.keywords if k.arg == name), None)


# ------------------------------------------------------------------------- trust_remote_code
_REMOTE_TEXT = re.compile(r"""trust_remote_code["']?\s*[=:]\s*True\b""")


def _from_config(node: ast.AST) -> bool:
    """False, or a value read from a config field named ``trust_remote_code``."""
    return _is_const(node, False) or (
        isinstance(node, ast.Attribute) and node.attr == "trust_remote_code"
    )


def remote_code_problems(label: str, text: str) -> list[str]:
    out = [f"{label}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
           for m in _REMOTE_TEXT.finditer(text)]  # fmt: skip
    for node in ast.walk(ast.parse(text)):
        values: list[ast.AST] = []
        if isinstance(node, ast.keyword) and node.arg == "trust_remote_code":
            values = [node.value]
        elif isinstance(node, ast.Dict):
            values = [v for k, v in zip(node.keys, node.values)
                      if k is not None and _is_const_str(k, "trust_remote_code")]  # fmt: skip
        elif isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Subscript) and _is_const_str(t.slice, "trust_remote_code")
                   for t in targets):  # fmt: skip
                values = [node.value]
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            args = node.args
            pos = args.posonlyargs + args.args
            pairs = list(zip(pos[len(pos) - len(args.defaults) :], args.defaults))
            pairs += [(a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults) if d is not None]
            values = [d for a, d in pairs if a.arg == "trust_remote_code"]
        out += [f"{label}:{v.lineno}: trust_remote_code = {ast.unparse(v)}"
                for v in values if not _from_config(v)]  # fmt: skip
    return out


def _is_const_str(node: ast.AST, value: str) -> bool:
    return isinstance(node, ast.Constant) and node.value == value


# ------------------------------------------------------------------- shell, eval and exec
_SHELL_TEXT = re.compile(r"\bshell\s*=\s*True\b")
_SHELL_CALLS = {"os.system", "os.popen", "subprocess.getoutput", "subprocess.getstatusoutput",
                "eval", "exec", "builtins.eval", "builtins.exec"}  # fmt: skip


def shell_eval_problems(label: str, text: str) -> list[str]:
    out = [f"{label}:{text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}"
           for m in _SHELL_TEXT.finditer(text)]  # fmt: skip
    for call, name in _calls(text):
        shell = _kw(call, "shell")
        if shell is not None and not _is_const(shell.value, False):
            out.append(f"{label}:{call.lineno}: shell={ast.unparse(shell.value)}")
        if name in _SHELL_CALLS or name.startswith(("os.exec", "os.spawn")):
            out.append(f"{label}:{call.lineno}: {name}(...)")
    return out


# ------------------------------------------------------------------------------ unpickling
_UNPICKLE = {"pickle.load", "pickle.loads", "pickle.Unpickler", "dill.load", "dill.loads",
             "cloudpickle.load", "cloudpickle.loads", "joblib.load", "pandas.read_pickle"}  # fmt: skip


def unsafe_load_problems(label: str, text: str) -> list[str]:
    out = []
    for call, name in _calls(text):
        if name in ("torch.load", "torch.serialization.load"):
            only = _kw(call, "weights_only")
            if only is None or not _is_const(only.value, True):
                out.append(f"{label}:{call.lineno}: {ast.unparse(call)} without weights_only=True")
        elif name in _UNPICKLE:
            out.append(f"{label}:{call.lineno}: {name}(...) can run code")
        elif name in ("numpy.load", "np.load"):
            allow = _kw(call, "allow_pickle")
            if allow is not None and not _is_const(allow.value, False):
                out.append(f"{label}:{call.lineno}: numpy.load(allow_pickle=...)")
    return out


# ----------------------------------------------------------------------------------- tests
CHECKS: dict[str, Check] = {
    "trust_remote_code": remote_code_problems,
    "shell_eval_exec": shell_eval_problems,
    "torch_load": unsafe_load_problems,
}


@pytest.mark.parametrize("check", list(CHECKS))
def test_package_sources_keep_the_security_defaults(check):
    problems = [p for label, text in _sources() for p in CHECKS[check](label, text)]
    assert problems == []


def test_config_never_trusts_remote_code_by_default():
    """A config field may switch trust_remote_code on; its default must be off."""
    from pipeline.runconfig import config_sections

    found = [
        (cls.__name__, f.default)
        for cls in config_sections()
        for f in dataclasses.fields(cls)
        if f.name == "trust_remote_code"
    ]
    assert all(default is False for _, default in found), found


BAD = {
    "trust_remote_code": [
        "AutoModel.from_pretrained(p, trust_remote_code=True)",
        "kw = {'trust_remote_code': True}",
        "kw['trust_remote_code'] = True",
        "x = dict(trust_remote_code=1)",
        "def load(p, trust_remote_code=True):\n    pass",
        "code = 'AutoModel.from_pretrained(p, trust_remote_code = True)'",
    ],
    "shell_eval_exec": [
        "subprocess.run('ls', shell=True)",
        "import subprocess as sp\nsp.Popen(cmd, shell=flag)",
        "import os\nos.system('ls')",
        "from os import system\nsystem('ls')",
        "import os\nos.popen('ls')",
        "eval('1 + 1')",
        "exec(code)",
        "import os\nos.execv('/bin/sh', [])",
    ],
    "torch_load": [
        "import torch\ntorch.load(p)",
        "import torch\ntorch.load(p, weights_only=False)",
        "import torch as th\nth.load(p, map_location='cpu')",
        "from torch import load\nload(p)",
        "import torch\ntorch.load(p, weights_only=flag)",
        "import pickle\npickle.loads(b)",
        "import numpy as np\nnp.load(p, allow_pickle=True)",
    ],
}
GOOD = [
    "model.eval()",
    "evaluate_retrieval(models)",
    "AutoModel.from_pretrained(p, trust_remote_code=cfg.models.trust_remote_code)",
    "AutoModel.from_pretrained(p, trust_remote_code=False)",
    "import subprocess\nsubprocess.run(['ls'], check=True, shell=False)",
    "import torch\ntorch.load(p, map_location='cpu', weights_only=True)",
    "import numpy as np\nnp.load(p)",
]


@pytest.mark.parametrize("check", list(CHECKS))
def test_each_check_catches_what_it_pins(check):
    for line in BAD[check]:
        assert CHECKS[check]("probe.py", line), f"{check} missed: {line!r}"
    for line in GOOD:
        assert CHECKS[check]("probe.py", line) == [], f"{check} flagged a safe line: {line!r}"
