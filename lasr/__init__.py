"""LaSR: fusion head and FIFO-queue objectives (LiRA paper §4.2, App. D.4).

The public API of a trained model is one line: ``from lasr import LiRAModel``.
"""

__all__ = ["LiRAModel"]


def __getattr__(name: str) -> object:
    """``lasr.LiRAModel``, imported on first use (``import lasr.config`` stays without torch)."""
    if name == "LiRAModel":
        # on use: the CLI imports lasr.config for --help and must start without torch
        from lasr.model import LiRAModel

        return LiRAModel
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
