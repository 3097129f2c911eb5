"""LiRA: cross-lingual retrieval anchored to a strong English embedding space."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

if TYPE_CHECKING:
    from lira.model import LiRAModel

__all__ = ["LiRAModel", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "LiRAModel":  # lazy: keeps `import lira` light for the CLI
        from lira.model import LiRAModel

        return LiRAModel
    raise AttributeError(name)
