"""LiRA's core: configs, data, checkpoints, model loaders, the translation pool, critic and store,
the training base and the baselines.

The packages above it build on it (``arca`` <- ``lasr`` <- ``evaluators`` <- ``pipeline``, the
``lira`` command); a trained model is ``from lasr import LiRAModel``.
"""

__version__ = "0.1.0"

__all__ = ["__version__"]
