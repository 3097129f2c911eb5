"""Reasoning with LiRA (paper 004 §5.1-5.3): MGSM / X-CSQA loaders, prompts, answer extraction."""
