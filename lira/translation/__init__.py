"""Translator pool, meta-text cleanup, the LLM critic and the SQLite translation store."""
