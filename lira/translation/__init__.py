"""Translator pool, meta-text cleanup and the SQLite translation store."""
