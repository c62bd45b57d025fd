"""Copies of a memory file kept when a write refuses it, and scrubbing them on a forget.

A write that finds a file edited by hand out of shape, or not UTF-8, refuses it
and keeps a copy beside it, ``<name>.bak.<unix time>`` (mode 0600, an identical
copy reused), so the hand edit is never lost. `forget` removes a forgotten
entry's text from these copies too (`scrub_backups`), each replaced whole.
"""

from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Iterable
from pathlib import Path

from memory_core.errors import MemoryFileError


def backup(path: Path) -> Path:
    """Copy `path` to `<name>.bak.<unix time>` (reusing an identical existing copy)."""
    try:
        return _write_backup(path, path.read_bytes())
    except OSError as exc:
        raise MemoryFileError(
            f"cannot back up {path.name}: {exc.strerror or exc}; nothing was written"
        ) from exc


def _write_backup(path: Path, data: bytes) -> Path:
    for existing in sorted(path.parent.glob(f"{path.name}.bak.*")):
        if existing.read_bytes() == data:
            return existing
    stamp = int(time.time())
    for n in range(1000):
        candidate = path.with_name(f"{path.name}.bak.{stamp}" + (f"-{n}" if n else ""))
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
        try:
            fd = os.open(candidate, flags, 0o600)
        except FileExistsError:
            continue
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        return candidate
    raise MemoryFileError(f"cannot find a free backup name for {path.name}")


def scrub_backups(path: Path, texts: Iterable[str]) -> None:
    """Remove each of `texts` from every backup of `path`."""
    wanted = [t.encode("utf-8") for t in texts]
    for copy in sorted(path.parent.glob(f"{path.name}.bak.*")):
        _scrub(copy, wanted)


def _scrub(path: Path, texts: list[bytes]) -> None:
    """Replace the backup `path` by a copy without any of `texts` (the old file is gone)."""
    data = path.read_bytes()
    scrubbed = data
    for text in texts:
        scrubbed = scrubbed.replace(text, b"")
    if scrubbed == data:
        return
    fd, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(scrubbed)
            handle.flush()
            os.fchmod(handle.fileno(), 0o600)
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except OSError as exc:
        Path(temporary).unlink(missing_ok=True)
        raise MemoryFileError(f"cannot rewrite {path.name}: {exc.strerror or exc}") from exc
