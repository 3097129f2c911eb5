"""Atomic, self-describing checkpoint folders and exact-resume training state, safe to load.

- :mod:`~lira.checkpoint.folders`: atomic folders (temporary sibling + rename), the ``step-*``
  folders of a run (latest intact, leftovers of killed saves, pruning), a full disk as one error.
- :mod:`~lira.checkpoint.manifest`: the manifest of every saved folder and the integrity checks
  (sizes, sha256, parsing, finite tensors); the metadata of self-describing model folders.
- :mod:`~lira.checkpoint.cache_dir`: a folder's ``models.cache_dir`` is only read, never written.
- :mod:`~lira.checkpoint.state`: trainer state as safetensors + JSON, never pickle.
- :mod:`~lira.checkpoint.rng`: the random states restored on resume.
- :mod:`~lira.checkpoint.fingerprint`: the config a checkpoint was trained with; ``--resume``
  refuses another.
- :mod:`~lira.checkpoint.lock`: one run per output folder.

Strict, atomic JSON files are :mod:`lira.jsonio`; :class:`~lira.errors.CheckpointError` is the
error of a damaged, incomplete or unsafe file.
"""
