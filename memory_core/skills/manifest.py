"""The skills manifest: which skills the bot wrote, kept as a small JSON file.

The manifest lives in the data dir, not in the skills folder::

    {"version": 1, "skills": {"<name>": {"path": "<category>/<name>",
     "sha256": "<digest of SKILL.md>", "created_at": "…", "updated_at": "…"}}}

A skill is bot-owned only while its entry's path and digest both still match
what is on disk (`is_bot_owned`); a bot skill an operator has since edited by
hand becomes the operator's. Writers hold `locked()`, a file lock next to the
manifest, for their whole change and read the entries under it;
`write_manifest()` replaces the file atomically.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from memory_core.atomic import atomic_write_text
from memory_core.errors import SkillManifestError

Entries = dict[str, dict[str, str]]
MANIFEST_VERSION = 1


def text_digest(text: str) -> str:
    """The SHA-256 of `text` as UTF-8, as the manifest records a SKILL.md."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lock_path(manifest_path: Path) -> Path:
    """The writers' lock file, next to the manifest."""
    return manifest_path.with_name(manifest_path.name + ".lock")


@contextlib.contextmanager
def locked(manifest_path: Path, timeout: float) -> Iterator[Entries]:
    """Hold the writers' lock and yield the manifest entries, read under it."""
    lock_file = lock_path(manifest_path)
    lock = FileLock(str(lock_file), timeout=timeout)
    try:
        manifest_path.parent.mkdir(parents=True, exist_ok=True)
        lock.acquire()
    except Timeout:
        raise SkillManifestError(
            f"skills are being changed by another writer ({lock_file}); try again"
        ) from None
    except OSError as exc:
        raise SkillManifestError(f"cannot lock {lock_file}: {exc}") from exc
    try:
        yield read_manifest(manifest_path)
    finally:
        lock.release()


def read_manifest(path: Path) -> Entries:
    """The entries by skill name; a missing file has none."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillManifestError(f"cannot read skills manifest {path}: {exc}") from None
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SkillManifestError(f"skills manifest {path} is not valid JSON: {exc}") from None
    skills = data.get("skills") if isinstance(data, dict) else None
    if not isinstance(skills, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) for k, v in skills.items()
    ):
        raise SkillManifestError(f"skills manifest {path} has an unexpected shape")
    return {k: {str(a): str(b) for a, b in v.items()} for k, v in skills.items()}


def write_manifest(path: Path, entries: Entries) -> None:
    """Replace the manifest with `entries`, sorted by name."""
    data = {"version": MANIFEST_VERSION, "skills": dict(sorted(entries.items()))}
    atomic_write_text(path, json.dumps(data, indent=2, ensure_ascii=False) + "\n")


def is_bot_owned(entry: Mapping[str, str] | None, relpath: str, digest: str) -> bool:
    """Whether a skill at `relpath` whose SKILL.md has `digest` is the one the bot wrote."""
    if not entry:
        return False
    return entry.get("path") == relpath and entry.get("sha256") == digest


def record(entries: Entries, name: str, relpath: str, digest: str) -> None:
    """Record that the bot wrote `name` at `relpath` (keeping its first creation time)."""
    now = _now()
    previous = entries.get(name, {})
    entries[name] = {
        "path": relpath,
        "sha256": digest,
        "created_at": previous.get("created_at", now),
        "updated_at": now,
    }


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
