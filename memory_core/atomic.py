"""Crash-safe file replacement.

`atomic_write_text()` writes to a temp file in the target's own folder (so the
rename never crosses a filesystem), flushes and fsyncs it, renames it over the
target with `os.replace` and fsyncs the folder so the rename itself survives a
power cut. A reader sees either the old file or the new one, never a half.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import tempfile
from pathlib import Path

from memory_core.errors import AtomicWriteError

DEFAULT_MODE = 0o600


def atomic_write_text(path: Path, text: str, *, mode: int | None = None) -> None:
    """Replace `path` with `text` (UTF-8, newlines as given) in one atomic step.

    `mode` None keeps the permission bits of an existing file, or 0600 for a new
    one. On any failure the temp file is removed and the target left as it was;
    OS errors are raised as `AtomicWriteError`.
    """
    path = Path(path)
    folder = path.parent
    if mode is None:
        mode = _existing_mode(path)
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=folder)
    except OSError as exc:
        raise AtomicWriteError(f"cannot write {path}: {exc.strerror or exc}") from exc
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as handle:
            handle.write(text)
            handle.flush()
            os.fchmod(handle.fileno(), mode)
            os.fsync(handle.fileno())
        os.replace(tmp_name, path)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp_name)
        if isinstance(exc, OSError):
            raise AtomicWriteError(f"cannot write {path}: {exc.strerror or exc}") from exc
        raise
    _fsync_dir(folder)


def _existing_mode(path: Path) -> int:
    try:
        return stat.S_IMODE(path.stat().st_mode)
    except FileNotFoundError:
        return DEFAULT_MODE
    except OSError as exc:
        raise AtomicWriteError(f"cannot write {path}: {exc.strerror or exc}") from exc


def _fsync_dir(folder: Path) -> None:
    # The rename is only durable once the directory entry is on disk too.
    try:
        fd = os.open(folder, os.O_RDONLY | getattr(os, "O_DIRECTORY", 0))
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        # Some filesystems (certain FUSE and network mounts) cannot fsync a
        # directory at all; the file itself is already synced and renamed.
        if exc.errno in (errno.EINVAL, errno.ENOTSUP, errno.EBADF):
            return
        raise AtomicWriteError(f"cannot sync folder {folder}: {exc.strerror or exc}") from exc
