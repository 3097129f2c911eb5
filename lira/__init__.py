"""LiRA: cross-lingual retrieval anchored to a strong English embedding space.

This package is the core (configs, data, checkpoints, model loaders, translation pool, critic
and store, baselines) plus the entry points (``lira.cli``, ``lira.pipeline``, ``lira.reasoning``).
The composed model lives one layer up: ``from lasr.model import LiRAModel``.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
