"""The user-facing error types: the ``lira`` command prints their message and exits non-zero.

Every error a user can fix (a config value, a data file, a store, a checkpoint, a path) is a
:class:`LiRAError`; its message names the file or key and says how to fix it. The CLI prints
it as one line without a traceback (``-v`` adds the traceback). Anything else is a bug and
keeps its traceback. Stage engines raise these types (or subclasses) for bad user input.
"""

from __future__ import annotations


class LiRAError(Exception):
    """Base of every error caused by user input; ``exit_code`` is what the CLI returns."""

    exit_code: int = 1


class UserInputError(LiRAError, ValueError):
    """A value given by the user (a language code, an option, a file's content) is unusable."""


class MissingFileError(LiRAError, FileNotFoundError):
    """A file or folder named by the user (config, data, model, checkpoint) does not exist."""


class CheckpointError(LiRAError, ValueError):
    """A checkpoint or metadata file is damaged, incomplete, unsafe or of another format."""
