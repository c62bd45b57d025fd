"""The filesystem steps of a skills change: folders with modes, moves, archives.

Each step either completes or raises the `OSError` the store turns into
`SkillStorageError`; cleanups after a failed step are best-effort and logged.
"""

from __future__ import annotations

import logging
import os
import shutil
import uuid
from datetime import UTC, datetime
from pathlib import Path

log = logging.getLogger(__name__)

PRIVATE_FILE_MODE = 0o600  # a person's skill may hold what they said
PRIVATE_DIR_MODE = 0o700
SHARED_FILE_MODE = 0o644  # shared skills are not secret; the operator must read them
SHARED_DIR_MODE = 0o755


def share_modes(folder: Path) -> None:
    """Make a promoted copy readable like the operator's skills (never executable)."""
    os.chmod(folder, SHARED_DIR_MODE)
    for root, dirs, files in os.walk(folder):
        for d in dirs:
            os.chmod(Path(root) / d, SHARED_DIR_MODE, follow_symlinks=False)
        for f in files:
            path = Path(root) / f
            if not path.is_symlink():
                os.chmod(path, SHARED_FILE_MODE)


def make_dirs(folder: Path, mode: int) -> list[Path]:
    """Create `folder` and missing parents with `mode`; return the ones created,
    outermost first."""
    missing = []
    for path in (folder, *folder.parents):
        if path.exists():
            break
        missing.append(path)
    made = list(reversed(missing))
    for path in made:
        path.mkdir(mode=mode, exist_ok=True)
        os.chmod(path, mode)  # mkdir's mode is masked by the umask
    return made


def remove_made(made: list[Path]) -> None:
    """Undo `_make_dirs` after a failed write (cleanup only: the write's error is raised)."""
    if made:
        shutil.rmtree(made[0], ignore_errors=True)


def move_aside(folder: Path, why: str) -> Path:
    """Rename `folder` to a hidden name beside it, so the skill vanishes at once."""
    doomed = folder.with_name(f".{why}-{folder.name}-{uuid.uuid4().hex[:8]}")
    os.rename(folder, doomed)
    return doomed


def archive(folder: Path, name: str, archive: Path) -> Path:
    archive.mkdir(parents=True, exist_ok=True, mode=PRIVATE_DIR_MODE)
    target = archive / f"{name}-{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}"
    shutil.copytree(folder, target, symlinks=True)
    return target


def remove_tree(doomed: Path, name: str) -> None:
    try:
        shutil.rmtree(doomed)
    except OSError as exc:
        log.warning("skill %r moved away, but %s could not be removed: %s", name, doomed, exc)
