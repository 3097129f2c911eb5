"""Data loaders: XQuAD-R, LazRetrieval, BEIR/MTEB folders, STS pairs; one in-memory form."""

from __future__ import annotations

from pathlib import Path


def demo_path() -> Path:
    """The XQuAD-R subset shipped inside the package (en, de, es, ru, zh; CC BY-SA 4.0)."""
    return Path(__file__).parent / "demo" / "xquad-r"
