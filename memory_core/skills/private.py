"""Where each person's own skills are kept: the `PrivateSkills` interface.

`SkillsStore` decides what a change may do (names, the shared folder's
precedence, validation, the safety scan); a `PrivateSkills` keeps the result.
Two implementations have the same semantics: `FolderPrivateSkills`
(``<private dir>/<user key>/[<category>/]<name>/``, the archive folder and the
manifest file, under one file lock; `memory_core.skills.private_folders`) and
`PgPrivateSkills` (rows in PostgreSQL, one transaction per change under a lock
per person; `memory_core.pg.skills`).

A skill is addressed by its person and its `relpath` (``[<category>/]<name>``);
a file inside it by ``None`` (its SKILL.md) or a support-file path such as
``references/api.md``. Reads outside a change see the last committed state and
are cached per person behind a cheap change check (`FolderScan.key`).

`content_digest` hashes a canonical listing of everything kept (each person's
files, the archive, the manifest), taken the same way on both backends, so a
copy from folders to PostgreSQL can be verified.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, Literal, Protocol

from memory_core.errors import SkillError
from memory_core.skills.folders import FolderScan, Found, SkillProblem
from memory_core.skills.format import SKILL_FILE, parse_skill
from memory_core.skills.manifest import Manifest, manifest_text, text_digest

FileKind = Literal["file", "folder", "link"]


class PrivateWrite(Protocol):
    """One change to people's own skills, under the backend's lock (and transaction)."""

    def scan(self, user_key: str) -> FolderScan:
        """`user_key`'s skills as they are now, under the lock."""
        ...

    def read(self, user_key: str, relpath: str, file_path: str | None) -> str:
        """A SKILL.md (None) or support file's text, under the format's read rules."""
        ...

    def kind(self, user_key: str, relpath: str, file_path: str) -> FileKind | None:
        """What is at a support-file path: a file, a folder, a dangling link, nothing."""
        ...

    def create(self, user_key: str, name: str, category: str | None, content: str) -> Path:
        """A new skill from its SKILL.md text; where it lives. `SkillExistsError` when a
        skill, folder or category is in the way."""
        ...

    def write(self, user_key: str, relpath: str, file_path: str | None, text: str) -> None:
        """Create or replace SKILL.md (None) or a support file, atomically."""
        ...

    def remove(self, user_key: str, relpath: str, file_path: str) -> None:
        """Delete one support file."""
        ...

    def delete(self, user_key: str, relpath: str) -> Path | None:
        """Delete a skill, archived first if the backend keeps an archive (where)."""
        ...

    def texts(self, user_key: str, relpath: str) -> list[tuple[str, str]]:
        """(label, text) of SKILL.md and every support file, for the safety scan."""
        ...

    def export(self, user_key: str, relpath: str, dest: Path) -> None:
        """Write a copy of the skill's folder at `dest` (which does not exist yet)."""
        ...

    def drop(self, user_key: str, relpath: str) -> None:
        """Remove the person's copy of a skill just promoted (not archived)."""
        ...

    def erase(self, user_key: str) -> int:
        """Remove every skill and archived copy of `user_key`; how many places went."""
        ...

    def read_manifest(self) -> Manifest:
        """The manifest as it is now, under the lock."""
        ...

    def write_manifest(self, manifest: Manifest) -> None:
        """Replace the manifest, committed with the change."""
        ...


class PrivateSkills(Protocol):
    """Each person's own skills, their archive, and the skills manifest."""

    root: Path  # where a person's skills are said to live, in `Skill.folder`
    manifest_label: Path  # the manifest's name in problems

    @property
    def people_cached(self) -> int:
        """How many people's scans are cached now."""
        ...

    def scan(self, user_key: str) -> FolderScan:
        """`user_key`'s valid skills and problems, re-read only when something changed."""
        ...

    def people(self, problems: list[SkillProblem]) -> list[str]:
        """The user keys that have skills of their own, sorted (oddities into `problems`)."""
        ...

    def read(self, user_key: str, relpath: str, file_path: str | None) -> str:
        """A SKILL.md (None) or support file's text; `SkillNotFoundError` when missing."""
        ...

    def support_files(self, user_key: str, relpath: str) -> tuple[str, ...]:
        """The relative paths of the skill's support files, sorted."""
        ...

    def manifest_key(self) -> tuple[Any, ...]:
        """What changes when the manifest changes (cheap)."""
        ...

    def read_manifest(self) -> Manifest:
        """The manifest; `SkillManifestError` when it cannot be read."""
        ...

    def writing(
        self, user_key: str | None, guard: Callable[[], None] | None = None
    ) -> AbstractContextManager[PrivateWrite]:
        """One change, under the writers' lock for `user_key` (None: the manifest's),
        `guard` called under the lock first (the erasure fence). Storage failures
        come out as `SkillStorageError`."""
        ...

    def content_digest(self) -> str:
        """sha256 hex of the canonical listing of everything kept (`Listing`)."""
        ...


class Listing:
    """The canonical listing `content_digest` hashes: one JSON line per file, given in
    sorted order: [kind, user key, relpath, file path, content]."""

    def __init__(self) -> None:
        self._hash = hashlib.sha256()

    def add(self, kind: str, user_key: str, relpath: str, path: str, content: str) -> None:
        line = json.dumps([kind, user_key, relpath, path, content], ensure_ascii=True)
        self._hash.update(line.encode("ascii") + b"\n")

    def add_manifest(self, manifest: Manifest) -> None:
        self.add("manifest", "", "", "", manifest_text(manifest))

    def hexdigest(self) -> str:
        return self._hash.hexdigest()


def listing_order(item: tuple[str | None, str]) -> tuple[str, str]:
    """The order a folder listing gives (category, name) pairs: top-level names
    sorted, a category's skills under its name."""
    category, name = item
    return (category, name) if category is not None else (name, "")


def file_order(path: str) -> tuple[bool, str]:
    """SKILL.md first, then support files by path."""
    return (path != SKILL_FILE, path)


def scan_texts(
    key: tuple[Any, ...],
    root: Path,
    items: Iterable[tuple[str | None, str, str]],
) -> FolderScan:
    """A `FolderScan` of (category, folder name, SKILL.md text) already read, as
    `FolderReader` would give for the same files: in listing order, the first
    skill of each name kept, invalid and duplicate ones as problems."""
    found: dict[str, Found] = {}
    problems: list[SkillProblem] = []
    for category, name, text in sorted(items, key=lambda i: listing_order((i[0], i[1]))):
        folder = root / category / name if category else root / name
        path = folder / SKILL_FILE
        try:
            document = parse_skill(text, name)
        except SkillError as exc:
            problems.append(SkillProblem(path, str(exc)))
            continue
        if document.name in found:
            other = found[document.name].folder / SKILL_FILE
            message = f"duplicate skill name {document.name!r} (see {other})"
            problems.append(SkillProblem(path, message))
            continue
        found[document.name] = Found(document, category, folder, text_digest(text))
    return FolderScan(key, tuple(found.values()), tuple(problems))
