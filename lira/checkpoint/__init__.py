"""Atomic, self-describing checkpoint folders and exact-resume training state, safe to load."""
