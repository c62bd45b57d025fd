"""Each person's own skills as folders in the data dir: `FolderPrivateSkills`.

A person's skill is ``<private dir>/<user key>/[<category>/]<name>/`` (folders
0700, files 0600), a deleted one is copied to ``<archive dir>/<user key>/<name>-
<UTC time>/`` (no archive dir: not kept), and the manifest is a JSON file
(`memory_core.skills.manifest`). Every change, whoever it is for, runs under the
manifest's file lock, so changes on one host run one at a time; files are
replaced atomically. A person's scan is cached by a `FolderReader`, which
re-reads only what changed on disk.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from memory_core.atomic import atomic_write_text
from memory_core.errors import (
    InvalidUserKeyError,
    SkillError,
    SkillExistsError,
    SkillNotFoundError,
    SkillStorageError,
)
from memory_core.skills.cache import LruCache
from memory_core.skills.changes import (
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    archive,
    make_dirs,
    move_aside,
    remove_made,
    remove_tree,
)
from memory_core.skills.folders import (
    FolderReader,
    FolderScan,
    SkillProblem,
    candidates_in,
    list_dir,
    stat_key,
)
from memory_core.skills.format import (
    SKILL_FILE,
    SUPPORT_DIRS,
    read_skill_file,
    read_support_file,
    resolve_support_path,
)
from memory_core.skills.manifest import (
    Manifest,
    locked,
    read_manifest,
    write_manifest,
)
from memory_core.skills.private import FileKind, Listing, file_order
from memory_core.user_keys import check_user_key

log = logging.getLogger(__name__)


class FolderPrivateSkills:
    """People's own skills under `private_dir`, the archive under `archive_dir`."""

    def __init__(
        self,
        private_dir: Path,
        manifest_path: Path,
        *,
        archive_dir: Path | None = None,
        lock_timeout: float = 10.0,
        cached_people: int = 256,
    ) -> None:
        self.root = Path(private_dir)
        self.manifest_label = Path(manifest_path)
        self.archive_dir = Path(archive_dir) if archive_dir is not None else None
        self._lock_timeout = lock_timeout
        self._readers: LruCache[str, FolderReader] = LruCache(cached_people)

    @property
    def people_cached(self) -> int:
        return len(self._readers)

    def scan(self, user_key: str) -> FolderScan:
        reader = self._readers.get(user_key)
        if reader is None:
            reader = FolderReader(self._folder_of(user_key))
            self._readers.put(user_key, reader)
        return reader.scan()

    def people(self, problems: list[SkillProblem]) -> list[str]:
        keys = []
        for folder in list_dir(self.root, problems):
            try:
                keys.append(check_user_key(folder.name))
            except InvalidUserKeyError:
                problems.append(SkillProblem(folder, "not a user key; ignored"))
        return keys

    def read(self, user_key: str, relpath: str, file_path: str | None) -> str:
        return read_in(self._folder_of(user_key) / relpath, relpath, file_path)

    def support_files(self, user_key: str, relpath: str) -> tuple[str, ...]:
        return support_files_in(self._folder_of(user_key) / relpath)

    def manifest_key(self) -> tuple[Any, ...]:
        return stat_key(self.manifest_label)

    def read_manifest(self) -> Manifest:
        return read_manifest(self.manifest_label)

    @contextlib.contextmanager
    def writing(
        self, user_key: str | None, guard: Callable[[], None] | None = None
    ) -> Iterator[_FolderWrite]:
        """Every change holds the one lock file next to the manifest."""
        change = _FolderWrite(self)
        with locked(self.manifest_label, self._lock_timeout):
            if guard is not None:
                guard()
            try:
                yield change
            except OSError as exc:
                raise SkillStorageError(f"the change could not be made on disk: {exc}") from exc
        for cleanup in change.after:
            cleanup()

    def content_digest(self) -> str:
        listing = Listing()
        problems: list[SkillProblem] = []
        for key in self.people(problems):
            for category, folder in candidates_in(self._folder_of(key))[0]:
                relpath = f"{category}/{folder.name}" if category else folder.name
                for path, text in readable_files(folder):
                    listing.add("skill", key, relpath, path, text)
        if self.archive_dir is not None:
            for key in self.people_archived(problems):
                for entry in list_dir(self.archive_dir / key, problems):
                    for path, text in readable_files(entry):
                        listing.add("archive", key, entry.name, path, text)
        listing.add_manifest(self.read_manifest())
        return listing.hexdigest()

    def people_archived(self, problems: list[SkillProblem]) -> list[str]:
        """The user keys that have an archive folder."""
        if self.archive_dir is None:
            return []
        keys = []
        for folder in list_dir(self.archive_dir, problems):
            try:
                keys.append(check_user_key(folder.name))
            except InvalidUserKeyError:
                problems.append(SkillProblem(folder, "not a user key; ignored"))
        return keys

    def _folder_of(self, user_key: str) -> Path:
        return self.root / check_user_key(user_key)


class _FolderWrite:
    """One change under the lock; `after` runs once the lock is released."""

    def __init__(self, owner: FolderPrivateSkills) -> None:
        self._owner = owner
        self.after: list[Callable[[], None]] = []

    def _skill(self, user_key: str, relpath: str) -> Path:
        return self._owner.root / check_user_key(user_key) / relpath

    def scan(self, user_key: str) -> FolderScan:
        return self._owner.scan(user_key)

    def read(self, user_key: str, relpath: str, file_path: str | None) -> str:
        return read_in(self._skill(user_key, relpath), relpath, file_path)

    def kind(self, user_key: str, relpath: str, file_path: str) -> FileKind | None:
        target = resolve_support_path(self._skill(user_key, relpath), file_path)
        if target.is_dir():
            return "folder"
        if target.is_file():
            return "file"
        return "link" if target.is_symlink() else None

    def create(self, user_key: str, name: str, category: str | None, content: str) -> Path:
        folder = free_path(self._owner.root / check_user_key(user_key), name, category)
        made = make_dirs(folder, PRIVATE_DIR_MODE)
        try:
            atomic_write_text(folder / SKILL_FILE, content, mode=PRIVATE_FILE_MODE)
        except BaseException:
            remove_made(made)
            raise
        return folder

    def write(self, user_key: str, relpath: str, file_path: str | None, text: str) -> None:
        folder = self._skill(user_key, relpath)
        if file_path is None or file_path == SKILL_FILE:
            atomic_write_text(folder / SKILL_FILE, text)
            return
        target = resolve_support_path(folder, file_path)
        made = make_dirs(target.parent, PRIVATE_DIR_MODE)
        try:
            atomic_write_text(target, text, mode=PRIVATE_FILE_MODE)
        except BaseException:
            remove_made(made)
            raise

    def remove(self, user_key: str, relpath: str, file_path: str) -> None:
        resolve_support_path(self._skill(user_key, relpath), file_path).unlink()

    def delete(self, user_key: str, relpath: str) -> Path | None:
        folder = self._skill(user_key, relpath)
        name = folder.name
        archive_dir = self._owner.archive_dir
        keep = archive_dir / user_key if archive_dir is not None else None
        doomed = move_aside(folder, "deleting")
        try:
            archived = archive(doomed, name, keep) if keep is not None else None
        except BaseException:
            os.rename(doomed, folder)
            raise
        self.after.append(lambda: remove_tree(doomed, name))
        return archived

    def texts(self, user_key: str, relpath: str) -> list[tuple[str, str]]:
        folder = self._skill(user_key, relpath)
        found = [(SKILL_FILE, read_skill_file(folder / SKILL_FILE))]
        for rel in support_files_in(folder):
            found.append((rel, read_support_file(resolve_support_path(folder, rel), rel)))
        return found

    def export(self, user_key: str, relpath: str, dest: Path) -> None:
        shutil.copytree(self._skill(user_key, relpath), dest, symlinks=True)

    def drop(self, user_key: str, relpath: str) -> None:
        """If the disk refuses, the promotion still stands and the copy stays, hidden by it."""
        folder = self._skill(user_key, relpath)
        try:
            doomed = move_aside(folder, "promoted")
        except OSError as exc:
            log.warning("skill %r promoted, but %s could not be removed: %s", relpath, folder, exc)
            return
        remove_tree(doomed, folder.name)

    def erase(self, user_key: str) -> int:
        key = check_user_key(user_key)
        folders = [self._owner.root / key]
        if self._owner.archive_dir is not None:
            folders.append(self._owner.archive_dir / key)
        removed = 0
        for folder in folders:
            if folder.is_symlink() or folder.is_file():
                folder.unlink()
            elif folder.exists():
                shutil.rmtree(folder)
            else:
                continue
            removed += 1
        return removed

    def read_manifest(self) -> Manifest:
        return read_manifest(self._owner.manifest_label)

    def write_manifest(self, manifest: Manifest) -> None:
        write_manifest(self._owner.manifest_label, manifest)


def read_in(folder: Path, name: str, file_path: str | None) -> str:
    """SKILL.md (None) or a support file of the skill in `folder`."""
    if file_path is None or file_path == SKILL_FILE:
        return read_skill_file(folder / SKILL_FILE)
    target = resolve_support_path(folder, file_path)
    if not target.is_file():
        raise SkillNotFoundError(f"skill {Path(name).name!r} has no file {file_path!r}")
    return read_support_file(target, file_path)


def support_files_in(folder: Path) -> tuple[str, ...]:
    """The visible files under the support folders of `folder`, sorted."""
    found: list[str] = []
    for sub in SUPPORT_DIRS:
        top = folder / sub
        if top.is_symlink() or not top.is_dir():
            continue
        for root, dirs, files in os.walk(top):
            dirs[:] = [d for d in dirs if not d.startswith(".")]
            rel = Path(root).relative_to(folder).as_posix()
            found.extend(f"{rel}/{f}" for f in files if not f.startswith("."))
    return tuple(sorted(found))


def readable_files(folder: Path) -> list[tuple[str, str]]:
    """(path, text) of SKILL.md and every support file of `folder` that reads as text
    under the format's rules (the others are not copied, so not listed), in order."""
    found = []
    for path in sorted((SKILL_FILE, *support_files_in(folder)), key=file_order):
        try:
            if path == SKILL_FILE:
                text = read_skill_file(folder / SKILL_FILE)
            else:
                text = read_support_file(resolve_support_path(folder, path), path)
        except SkillError:
            continue
        found.append((path, text))
    return found


def free_path(root: Path, name: str, category: str | None) -> Path:
    """Where a new skill `name` goes under `root`, refusing any folder in the way."""
    if os.path.lexists(root / name):
        raise SkillExistsError(f"a folder named {name!r} is in the way; choose another name")
    if category is None:
        return root / name
    if os.path.lexists(root / category / SKILL_FILE):
        raise SkillExistsError(f"category {category!r} is the name of a skill")
    if os.path.lexists(root / category / name):
        raise SkillExistsError(f"{category}/{name} already exists; choose another name")
    return root / category / name
