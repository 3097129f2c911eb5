"""Arca: anchoring encoder g, shared Adaptor and REINFORCE Actor (LiRA paper §4.1)."""
