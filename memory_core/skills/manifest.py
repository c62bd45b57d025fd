"""The skills manifest: unowned legacy skills and promotions, kept as a small JSON file.

The manifest lives in the data dir, not in the skills folder::

    {"version": 2,
     "unowned": {"<name>": {"path": "<category>/<name>", "sha256": "<digest of SKILL.md>",
                            "created_at": "…", "updated_at": "…"}},
     "promoted": {"<name>": {"path": "<category>/<name>", "from": "<user key, or ''>",
                             "promoted_at": "…"}}}

Who owns a person's skill is not recorded here: it is where the skill lives
(``<private dir>/<user key>/…``), which cannot disagree with itself.

Migration. Version 1 (``{"version": 1, "skills": {...}}``) recorded the skills
the bot wrote into the shared folder, before skills had owners. Nobody can
tell whose conversation each came from, so its entries are read as
``unowned``: such a skill is shown to no person and changed by no model
until an admin promotes it (or the operator edits it by hand, which makes it
the operator's, as in version 1). The file is rewritten as version 2 on the
next promotion; nothing else writes it.

A skill counts as an unowned bot skill only while its entry's path and
digest both still match what is on disk (`is_bot_owned`). Writers hold
`locked()`, a file lock next to the manifest, for their whole change;
`write_manifest()` replaces the file atomically.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from filelock import FileLock, Timeout

from memory_core.atomic import atomic_write_text
from memory_core.errors import SkillManifestError

Entries = dict[str, dict[str, str]]
MANIFEST_VERSION = 2


@dataclass
class Manifest:
    """The manifest's two maps, by skill name."""

    unowned: Entries = field(default_factory=dict)
    promoted: Entries = field(default_factory=dict)


def text_digest(text: str) -> str:
    """The SHA-256 of `text` as UTF-8, as the manifest records a SKILL.md."""
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def lock_path(manifest_path: Path) -> Path:
    """The writers' lock file, next to the manifest."""
    return manifest_path.with_name(manifest_path.name + ".lock")


@contextlib.contextmanager
def locked(manifest_path: Path, timeout: float) -> Iterator[None]:
    """Hold the writers' lock (every change to any skill runs under it)."""
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
        yield None
    finally:
        lock.release()


def read_manifest(path: Path) -> Manifest:
    """The manifest (version 1 or 2); a missing file is empty."""
    try:
        raw = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return Manifest()
    except (OSError, UnicodeDecodeError) as exc:
        raise SkillManifestError(f"cannot read skills manifest {path}: {exc}") from None
    return parse_manifest(raw, path)


def parse_manifest(raw: str, path: Path) -> Manifest:
    """The manifest in the text `raw` (version 1 or 2); `path` names it in errors."""
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise SkillManifestError(f"skills manifest {path} is not valid JSON: {exc}") from None
    if not isinstance(data, dict):
        raise SkillManifestError(f"skills manifest {path} has an unexpected shape")
    version = data.get("version", 1)
    if version == 1:
        return Manifest(unowned=_entries(data.get("skills"), path))
    if version == MANIFEST_VERSION:
        return Manifest(
            unowned=_entries(data.get("unowned", {}), path),
            promoted=_entries(data.get("promoted", {}), path),
        )
    raise SkillManifestError(
        f"skills manifest {path} has version {version!r}, newer than this Mnemo understands"
    )


def _entries(value: object, path: Path) -> Entries:
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, dict) for k, v in value.items()
    ):
        raise SkillManifestError(f"skills manifest {path} has an unexpected shape")
    return {k: {str(a): str(b) for a, b in v.items()} for k, v in value.items()}


def write_manifest(path: Path, manifest: Manifest) -> None:
    """Replace the manifest with `manifest` (as version 2), sorted by name."""
    atomic_write_text(path, manifest_text(manifest))


def manifest_text(manifest: Manifest) -> str:
    """The manifest's text as written: version 2, each map sorted by name."""
    data = {
        "version": MANIFEST_VERSION,
        "unowned": dict(sorted(manifest.unowned.items())),
        "promoted": dict(sorted(manifest.promoted.items())),
    }
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def is_bot_owned(entry: Mapping[str, str] | None, relpath: str, digest: str) -> bool:
    """Whether a skill at `relpath` whose SKILL.md has `digest` is the one the bot wrote."""
    if not entry:
        return False
    return entry.get("path") == relpath and entry.get("sha256") == digest


def record_promotion(manifest: Manifest, name: str, relpath: str, from_user: str | None) -> None:
    """Note that `name` was promoted to the shared folder at `relpath`, and from whom."""
    manifest.unowned.pop(name, None)
    manifest.promoted[name] = {"path": relpath, "from": from_user or "", "promoted_at": now()}


def now() -> str:
    """The current UTC time as the manifest writes it."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
