"""A LiRA model folder travels: its own translations inside, loading by hub id, push_to_hub.

- The store: :meth:`LiRAModel.save_pretrained` writes a snapshot of the model's translation store
  (every translation and critic score it was trained and validated with) as
  ``translations.sqlite`` inside the folder (:func:`snapshot_store`), so a copied or downloaded
  folder embeds every stored text as the original does. The snapshot is part of the folder's manifest and is
  never written: :func:`open_folder_store` opens a working copy of it (under
  ``$LIRA_STORE_CACHE``, default ``<tmp>/lira-stores``, keyed by the snapshot's sha256), where
  online translation adds what it translates; a copy that is damaged or no longer holds every
  row of the snapshot unchanged (:func:`working_copy_intact`) is made again from the snapshot.
- Hub ids: :func:`resolve_folder` turns ``owner/name`` into a local folder with
  ``huggingface_hub.snapshot_download`` (the local cache first; ``HF_HUB_OFFLINE=1`` works offline).
- :func:`push_to_hub` uploads a saved folder with ``huggingface_hub.HfApi.upload_folder``.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import uuid
from pathlib import Path

from lira.checkpoint.manifest import sha256_file
from lira.errors import LiRAError, MissingFileError
from lira.translation.schema import COLUMNS
from lira.translation.store import TranslationStore

log = logging.getLogger(__name__)

STORE_NAME = "translations.sqlite"
"""The model folder's own translation store (a snapshot)."""


def snapshot_store(store: TranslationStore, folder: str | Path) -> str:
    """Copy ``store`` into ``folder`` as one self-contained SQLite file (no WAL beside it);
    returns its name relative to the folder."""
    dest = Path(folder) / STORE_NAME
    if dest.resolve() == Path(store.path).resolve():  # saved into the folder it reads: in place
        return STORE_NAME
    dest.unlink(missing_ok=True)
    out = sqlite3.connect(str(dest))
    try:
        store.conn.backup(out)
        out.execute("PRAGMA journal_mode=DELETE")
        if _has_table(out, "leases"):  # who was translating what: not part of a model
            out.execute("DELETE FROM leases")
        out.commit()
        out.execute("VACUUM")
    finally:
        out.close()
    return STORE_NAME


def _has_table(conn: sqlite3.Connection, name: str) -> bool:
    q = "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?"
    return conn.execute(q, (name,)).fetchone() is not None


def store_cache() -> Path:
    """Where working copies of model folders' stores live (``$LIRA_STORE_CACHE``)."""
    env = os.environ.get("LIRA_STORE_CACHE", "")
    return Path(env).expanduser() if env else Path(tempfile.gettempdir()) / "lira-stores"


def open_folder_store(snapshot: Path) -> TranslationStore:
    """A working copy of a model folder's store snapshot (made once per snapshot content); a
    copy that is no longer the snapshot plus rows added online (damaged, truncated, edited) is
    made again from the snapshot, so a bad copy in the shared cache never locks a model out."""
    digest = sha256_file(snapshot)
    work = store_cache() / f"{digest[:20]}.sqlite"
    if work.is_file() and not working_copy_intact(work, snapshot, digest):
        log.warning(
            "the working copy %s of the translation store of %s was damaged or changed: made "
            "again from the model folder's snapshot (texts translated online since then are "
            "translated again when needed)",
            work,
            snapshot.parent,
        )
        _copy_snapshot(snapshot, work)
    elif not work.is_file():
        _copy_snapshot(snapshot, work)
    return TranslationStore(work)


def _copy_snapshot(snapshot: Path, work: Path) -> None:
    """``work`` := a fresh copy of ``snapshot`` (atomic; an old copy's WAL files removed)."""
    work.parent.mkdir(parents=True, exist_ok=True)
    tmp = work.with_name(f"{work.name}.{uuid.uuid4().hex[:8]}.tmp")
    shutil.copyfile(snapshot, tmp)
    for side in ("-wal", "-shm"):  # an old WAL replayed onto the new copy would damage it
        work.with_name(work.name + side).unlink(missing_ok=True)
    os.replace(tmp, work)


def working_copy_intact(work: Path, snapshot: Path, digest: str) -> bool:
    """True when the working copy ``work`` is the snapshot (sha256 ``digest``), or a sound
    SQLite file holding every row of the snapshot unchanged (plus rows translated online)."""
    if sha256_file(work) == digest:
        return True
    cols = ", ".join(COLUMNS)
    try:
        conn = sqlite3.connect(f"{work.resolve().as_uri()}?mode=ro", uri=True)
        try:
            if conn.execute("PRAGMA quick_check").fetchall() != [("ok",)]:
                return False
            conn.execute("ATTACH DATABASE ? AS snap", (f"{snapshot.resolve().as_uri()}?mode=ro",))
            lost = conn.execute(
                f"SELECT {cols} FROM snap.translations EXCEPT "
                f"SELECT {cols} FROM main.translations LIMIT 1"
            ).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return False
    return lost is None


def is_hub_id(ref: str) -> bool:
    """``owner/name`` that is not an existing local path."""
    parts = ref.split("/")
    return len(parts) == 2 and all(parts) and not ref.startswith(".") and not Path(ref).exists()


def resolve_folder(ref: str | Path, revision: str | None = None) -> Path:
    """The local folder of a model folder path or hub id (downloaded into the HF cache, or
    read from it offline)."""
    if isinstance(ref, Path) or not is_hub_id(ref):
        return Path(ref)
    from huggingface_hub import snapshot_download

    try:
        return Path(snapshot_download(ref, revision=revision))
    except Exception as e:  # offline, unknown repo, no access: one line naming the fix
        raise MissingFileError(
            f"{ref!r} is neither a folder nor a hub model that could be downloaded "
            f"({type(e).__name__}: {e}); give a local folder, or download it first (online: "
            f"`hf download {ref}`; offline, HF_HUB_OFFLINE=1 reads the local cache)"
        ) from None


def push_to_hub(
    folder: str | Path,
    repo_id: str,
    private: bool | None = None,
    token: str | None = None,
    commit_message: str = "Upload LiRA model",
) -> str:
    """Upload a saved LiRA model folder to the hub repo ``repo_id`` (created if missing);
    returns the commit URL."""
    from huggingface_hub import HfApi

    try:
        api = HfApi(token=token)
        api.create_repo(repo_id, private=private, exist_ok=True)
        info = api.upload_folder(
            repo_id=repo_id, folder_path=str(folder), commit_message=commit_message
        )
    except Exception as e:  # offline, no token, no write access: one line naming the hub repo
        raise hub_error(repo_id, e) from None
    return str(getattr(info, "commit_url", info))


def hub_error(repo_id: str, error: Exception) -> LiRAError:
    """The one-line error of a failed upload to the hub repo ``repo_id``: the hub, the repo,
    the cause and the fix (a LiRAError already is one: returned as it is)."""
    if isinstance(error, LiRAError):
        return error
    from huggingface_hub import constants

    cause = " ".join(f"{type(error).__name__}: {error}".split())[:300]
    return LiRAError(
        f"could not upload to the Hugging Face Hub repo {repo_id!r} at {constants.ENDPOINT} "
        f"({cause}); check the network (HF_HUB_OFFLINE must be unset) and your token (`hf auth "
        "login` or HF_TOKEN, with write access), then push again"
    )
