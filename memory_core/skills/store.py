"""The skills: the shared folder, each person's own skills, the index, changes, promotion.

Where skills live.

- The shared folder (`skills_dir`, the operator's mount; `folders.py` has its
  layout) holds the bundled skills, the operator's, and skills an admin
  promoted. Everyone sees them; the model never changes them.
- A skill the model writes belongs to the person whose conversation produced
  it and lives in the data dir, ``<private_dir>/<user key>/[<category>/]<name>/``
  (folders 0700, files 0600): the folder an operator shares or mounts, and
  `mnemo skills list` of that folder, never hold one person's skill, and the
  owner is where the files are, which cannot disagree with a record
  elsewhere. Only that person's index, `skills(user_key)` and `get(…,
  user_key)` show it, and only calls made with that key change it.
- Bot skills from before skills had owners (manifest version 1; see
  `manifest.py`) stay in the shared folder as ``unowned``: shown to nobody and
  changed by no model until an admin promotes them.

Names. Two people may each have a skill called ``deploy``. A shared skill of
the same name wins in its owner's view too: their copy is hidden from their
index and `get`, may only be deleted, and a new one of a shared name is refused
— a conversation can never shadow or change what everyone else reads.

Promotion (`promote`, by an admin through the CLI or a chat command) moves a
person's skill into the shared folder, where it is the operator's: read-only to
every model, seen by everyone. It runs the safety scan again on every file.

Reading. Every read checks cheaply whether anything changed (`FolderReader`),
so an operator's edit is seen on the next call without a restart. Invalid
skills are skipped with one logged warning per problem. The caller freezes
`index_block(user_key)` once per session; that keeps the prompt stable.

Changes run under a file lock next to the manifest, validate the full result
(front matter, names, sizes, paths), run the safety scan and write atomically,
so a refused change leaves the skill byte-for-byte as it was.

Errors: the `SkillError` family of `memory_core.errors` (its docstring draws
the tree), `UnsafeContentError` when the scan refuses content,
`InvalidUserKeyError` for a malformed user key, and `AtomicWriteError` when
the disk refuses a write.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from memory_core.atomic import atomic_write_text
from memory_core.errors import (
    InvalidUserKeyError,
    SkillArgumentError,
    SkillExistsError,
    SkillManifestError,
    SkillNotFoundError,
    SkillPathError,
    SkillProtectedError,
    SkillStorageError,
)
from memory_core.fence import ErasureFence
from memory_core.safety import check
from memory_core.skills.cache import LruCache
from memory_core.skills.changes import (
    PRIVATE_DIR_MODE,
    PRIVATE_FILE_MODE,
    SHARED_DIR_MODE,
    archive,
    make_dirs,
    move_aside,
    remove_made,
    remove_tree,
    share_modes,
)
from memory_core.skills.folders import (
    GENERAL,
    FolderReader,
    FolderScan,
    Found,
    Owner,
    Skill,
    SkillProblem,
    list_dir,
    ordered,
    render_index,
    stat_key,
)
from memory_core.skills.format import (
    SKILL_FILE,
    SUPPORT_DIRS,
    apply_patch,
    check_model_writable,
    check_not_script,
    check_text_size,
    parse_skill,
    read_skill_file,
    read_support_file,
    resolve_support_path,
    validate_name,
)
from memory_core.skills.manifest import (
    Manifest,
    is_bot_owned,
    locked,
    read_manifest,
    record_promotion,
    text_digest,
    write_manifest,
)
from memory_core.user_keys import check_user_key

__all__ = ["GENERAL", "Owner", "Skill", "SkillProblem", "SkillsStore"]

log = logging.getLogger(__name__)

PRIVATE_DIR_NAME = "skills-private"
CACHED_PEOPLE = 256  # people whose folder reader and view stay cached (least recent go)


@dataclass(frozen=True)
class _Shared:
    key: tuple[Any, ...]
    skills: tuple[Skill, ...]  # operator's and unowned, ordered
    problems: tuple[SkillProblem, ...]

    def visible(self, name: str) -> Skill | None:
        """The shared skill everyone sees under `name` (unowned ones are seen by nobody)."""
        return next((s for s in self.skills if s.name == name and s.owner == "operator"), None)


@dataclass(frozen=True)
class _View:
    key: tuple[Any, ...]
    skills: tuple[Skill, ...]
    index: str

    def find(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)


class SkillsStore:
    """The shared skills folder, each person's own skills, and the manifest."""

    def __init__(
        self,
        skills_dir: Path,
        manifest_path: Path,
        *,
        private_dir: Path | None = None,
        archive_dir: Path | None = None,
        lock_timeout: float = 10.0,
        on_problem: Callable[[SkillProblem], None] | None = None,
        cached_people: int = CACHED_PEOPLE,
        fence: ErasureFence | None = None,
    ) -> None:
        """`private_dir`: where each person's skills live (default: ``skills-private``
        next to the manifest). `archive_dir`: where deleted skills are copied (None:
        not kept). `on_problem`: told once of each new problem; by default a logged
        warning. `cached_people`: how many people's scans and views stay cached.
        `fence`: the erasures a person's write is checked against (`memory_core.fence`)."""
        self.fence = fence if fence is not None else ErasureFence()
        self.skills_dir = Path(skills_dir)
        self.manifest_path = Path(manifest_path)
        self.private_dir = (
            Path(private_dir)
            if private_dir is not None
            else self.manifest_path.with_name(PRIVATE_DIR_NAME)
        )
        self.archive_dir = Path(archive_dir) if archive_dir is not None else None
        self._lock_timeout = lock_timeout
        self._shared_reader = FolderReader(self.skills_dir)
        self._private_readers: LruCache[str, FolderReader] = LruCache(cached_people)
        self._shared_cache: _Shared | None = None
        self._views: LruCache[str | None, _View] = LruCache(cached_people + 1)  # + shared
        self._warned: set[tuple[str, str]] = set()
        self._on_problem = on_problem or _log_problem

    # ------------------------------------------------------------- reading

    def skills(self, user_key: str | None = None) -> tuple[Skill, ...]:
        """What `user_key`'s sessions see: every shared skill plus their own
        (None: the shared ones only); uncategorised first, then by category and name."""
        return self._view(user_key).skills

    def get(self, name: str, user_key: str | None = None) -> Skill:
        """The skill `user_key` sees as `name`, or `SkillNotFoundError`."""
        skill = self._view(user_key).find(name)
        if skill is None:
            raise SkillNotFoundError(f"no skill named {name!r}")
        return skill

    def index_block(self, user_key: str | None = None) -> str:
        """The system-prompt block listing what `user_key` sees; empty when nothing.

        Same folder contents give the same bytes. Call it once per new session.
        """
        return self._view(user_key).index

    def read_text(
        self, name: str, file_path: str | None = None, *, user_key: str | None = None
    ) -> str:
        """The raw SKILL.md, or a support file's text (≤ 1 MiB, UTF-8)."""
        return self.text_of(self.get(name, user_key), file_path)

    def support_files(self, name: str, *, user_key: str | None = None) -> tuple[str, ...]:
        """Relative paths of the files under the skill's support folders, sorted."""
        return self.files_of(self.get(name, user_key))

    def text_of(self, skill: Skill, file_path: str | None = None) -> str:
        """`read_text` for a skill already found (e.g. by `every_skill`)."""
        return _read(skill, file_path)

    def files_of(self, skill: Skill) -> tuple[str, ...]:
        """`support_files` for a skill already found (e.g. by `every_skill`)."""
        return _support_files(skill.folder)

    @property
    def people_cached(self) -> int:
        """How many people's folder scans are cached now (at most `cached_people`)."""
        return len(self._private_readers)

    def every_skill(self) -> tuple[Skill, ...]:
        """The operator's view: every shared skill (unowned ones too) and every
        person's own skills, ordered (same names by user key)."""
        found = list(self._shared().skills)
        for key in self._user_keys([]):
            found.extend(self._own_skills(key))
        return ordered(found)

    def problems(self) -> tuple[SkillProblem, ...]:
        """Every file that was skipped (invalid, unreadable, duplicate) in the shared
        folder and in each person's folder, plus manifest trouble."""
        problems = list(self._shared().problems)
        for key in self._user_keys(problems):
            problems.extend(self._private(key).problems)
        for problem in problems:
            self._warn(problem)
        return tuple(problems)

    # -------------------------------------------------- changes by a model

    def create(
        self, name: str, content: str, category: str | None = None, *, user_key: str
    ) -> Skill:
        """Create a new skill owned by `user_key` from a full SKILL.md text."""
        validate_name(name)
        if category is not None:
            validate_name(category, "category")
        root = self._user_root(user_key)
        document = parse_skill(content, name)
        check(content)
        with self._writing(user_key):
            folder = self._free_folder(name, category, user_key, root)
            made = make_dirs(folder, PRIVATE_DIR_MODE)
            try:
                atomic_write_text(folder / SKILL_FILE, content, mode=PRIVATE_FILE_MODE)
            except BaseException:
                remove_made(made)
                raise
        return Skill(document, category, folder, "user", text_digest(content), user_key)

    def edit(self, name: str, content: str, *, user_key: str) -> Skill:
        """Replace the SKILL.md of `user_key`'s skill with a full new text."""
        with self._writing(user_key):
            found, _ = self._own(name, user_key)
            document = parse_skill(content, found.folder.name)
            check(content)
            atomic_write_text(found.folder / SKILL_FILE, content)
        return Skill(document, found.category, found.folder, "user", text_digest(content), user_key)

    def patch(
        self,
        name: str,
        old_string: str,
        new_string: str,
        *,
        user_key: str,
        replace_all: bool = False,
        file_path: str | None = None,
    ) -> int:
        """Replace `old_string` (unique unless `replace_all`); return the count replaced."""
        with self._writing(user_key):
            found, old = self._own(name, user_key)
            if file_path is None or file_path == SKILL_FILE:
                new, count = apply_patch(old, old_string, new_string, replace_all, SKILL_FILE)
                parse_skill(new, found.folder.name)
                check(new)
                atomic_write_text(found.folder / SKILL_FILE, new)
                return count
            check_model_writable(file_path)
            target = resolve_support_path(found.folder, file_path)
            if not target.is_file():
                raise SkillNotFoundError(f"skill {name!r} has no file {file_path!r}")
            text = read_support_file(target, file_path)
            new, count = apply_patch(text, old_string, new_string, replace_all, file_path)
            _write_support(target, new, file_path)
            return count

    def write_file(self, name: str, file_path: str, content: str, *, user_key: str) -> None:
        """Create or replace a text support file (not under scripts/) of `user_key`'s skill."""
        with self._writing(user_key):
            found, _ = self._own(name, user_key)
            check_model_writable(file_path)
            target = resolve_support_path(found.folder, file_path)
            if target.is_dir():
                raise SkillPathError(f"file_path {file_path!r} is a folder")
            _write_support(target, content, file_path)

    def remove_file(self, name: str, file_path: str, *, user_key: str) -> None:
        """Delete one support file of `user_key`'s skill."""
        with self._writing():
            found, _ = self._own(name, user_key)
            target = resolve_support_path(found.folder, file_path)
            if not (target.is_file() or target.is_symlink()):
                raise SkillNotFoundError(f"skill {name!r} has no file {file_path!r}")
            target.unlink()

    def delete(self, name: str, *, user_key: str) -> Path | None:
        """Delete `user_key`'s skill (even one a shared skill hides); return where it
        was archived (None: no archive)."""
        with self._writing():
            found, _ = self._own(name, user_key, hidden_ok=True)
            keep = self.archive_dir / user_key if self.archive_dir is not None else None
            doomed = move_aside(found.folder, "deleting")
            try:
                archived = archive(doomed, name, keep) if keep is not None else None
            except BaseException:
                os.rename(doomed, found.folder)
                raise
        remove_tree(doomed, name)
        return archived

    # -------------------------------------------------------------- admin

    def erase_user(self, user_key: str) -> int:
        """Remove `user_key`'s own skills and their archived copies, under the writers'
        lock (call `fence.erasing` first); how many folders went."""
        key = check_user_key(user_key)
        folders = [self.private_dir / key]
        if self.archive_dir is not None:
            folders.append(self.archive_dir / key)
        removed = 0
        with self._writing():
            for folder in folders:
                if folder.is_symlink() or folder.is_file():
                    folder.unlink()
                elif folder.exists():
                    shutil.rmtree(folder)
                else:
                    continue
                removed += 1
        return removed

    def promotion_owner(self, name: str) -> str | None:
        """Whose skill `name` an admin means when they give no user key: None for
        an unowned shared skill of that name, else the one person who has one.
        `SkillArgumentError` when several people do; `SkillNotFoundError` when nobody."""
        if any(s.name == name and s.owner == "unowned" for s in self._shared().skills):
            return None
        owners = [key for key in self._user_keys([]) if self._private(key).find(name)]
        if not owners:
            raise SkillNotFoundError(f"nobody has a skill named {name!r} to share")
        if len(owners) > 1:
            raise SkillArgumentError(
                f"{len(owners)} people have a skill named {name!r} ({', '.join(owners)}); say whose"
            )
        return owners[0]

    def promote(self, name: str, user_key: str | None = None) -> Skill:
        """Share `user_key`'s skill `name` with everyone (None: the unowned legacy
        skill of that name). It moves into the shared folder and becomes the
        operator's: read-only to every model."""
        with self._writing():
            manifest = read_manifest(self.manifest_path)  # unreadable: refuse before moving
            if user_key is None:
                return self._promote_unowned(name, manifest)
            found = self._private(user_key).find(name)
            if found is None:
                raise SkillNotFoundError(f"{user_key} has no skill named {name!r}")
            _scan_folder(found.folder)
            target = self._shared_target(name, found.category)
            made = make_dirs(target.parent, SHARED_DIR_MODE)
            staging = target.with_name(f".promoting-{name}-{uuid.uuid4().hex[:8]}")
            placed = False
            try:
                shutil.copytree(found.folder, staging, symlinks=True)
                share_modes(staging)
                os.rename(staging, target)
                placed = True
                record_promotion(manifest, name, found.relpath, user_key)
                write_manifest(self.manifest_path, manifest)
            except BaseException:
                shutil.rmtree(target if placed else staging, ignore_errors=True)
                remove_made(made)
                raise
            self._drop_private(found.folder, name)
        return self.get(name)

    def _drop_private(self, folder: Path, name: str) -> None:
        """Remove the person's copy once the shared one is in place; if the disk
        refuses, the promotion still stands and the copy stays, hidden by it."""
        try:
            doomed = move_aside(folder, "promoted")
        except OSError as exc:
            log.warning("skill %r promoted, but %s could not be removed: %s", name, folder, exc)
            return
        remove_tree(doomed, name)

    def _promote_unowned(self, name: str, manifest: Manifest) -> Skill:
        skill = next((s for s in self._shared().skills if s.name == name), None)
        if skill is None:
            raise SkillNotFoundError(f"no unowned skill named {name!r}; give the user key")
        if skill.owner != "unowned":
            raise SkillExistsError(f"skill {name!r} is already shared")
        _scan_folder(skill.folder)
        record_promotion(manifest, name, skill.relpath, None)
        write_manifest(self.manifest_path, manifest)
        return self.get(name)

    # ----------------------------------------------------------- internals

    @contextlib.contextmanager
    def _writing(self, user_key: str | None = None) -> Iterator[None]:
        """Hold the writers' lock; OS errors become `SkillStorageError`. A write for
        `user_key` is refused once that person was erased since the work began."""
        with locked(self.manifest_path, self._lock_timeout):
            if user_key is not None:
                self.fence.check(user_key)
            try:
                yield
            except OSError as exc:
                raise SkillStorageError(f"the change could not be made on disk: {exc}") from exc

    def _user_root(self, user_key: str) -> Path:
        return self.private_dir / check_user_key(user_key)

    def _own(self, name: str, user_key: str, *, hidden_ok: bool = False) -> tuple[Found, str]:
        """`user_key`'s own skill `name` and its text; refuse a shared one."""
        found = self._private(user_key).find(name)
        shared = self._shared().visible(name)
        if shared is not None and not (hidden_ok and found is not None):
            raise SkillProtectedError(
                f"skill {name!r} is shared with everyone and read-only; "
                "create a new skill with another name, or ask the operator to change it"
            )
        if found is None:
            raise SkillNotFoundError(f"no skill named {name!r}")
        return found, read_skill_file(found.folder / SKILL_FILE)

    def _free_folder(self, name: str, category: str | None, user_key: str, root: Path) -> Path:
        if self._shared().visible(name) is not None:
            raise SkillExistsError(f"a shared skill named {name!r} exists; choose another name")
        if self._private(user_key).find(name) is not None:
            raise SkillExistsError(f"you already have a skill named {name!r}")
        return _free_path(root, name, category)

    def _shared_target(self, name: str, category: str | None) -> Path:
        clash = next((s for s in self._shared().skills if s.name == name), None)
        if clash is not None:
            raise SkillExistsError(
                f"a shared skill named {name!r} already exists at {clash.folder}; "
                "rename or remove one of them first"
            )
        return _free_path(self.skills_dir, name, category)

    def _private(self, user_key: str) -> FolderScan:
        reader = self._private_readers.get(user_key)
        if reader is None:
            reader = FolderReader(self._user_root(user_key))
            self._private_readers.put(user_key, reader)
        result = reader.scan()
        for problem in result.problems:
            self._warn(problem)
        return result

    def _own_skills(self, user_key: str) -> list[Skill]:
        return [
            Skill(f.document, f.category, f.folder, "user", f.digest, user_key)
            for f in self._private(user_key).found
        ]

    def _user_keys(self, problems: list[SkillProblem]) -> list[str]:
        """The user keys that have a folder of their own skills."""
        keys = []
        for folder in list_dir(self.private_dir, problems):
            try:
                keys.append(check_user_key(folder.name))
            except InvalidUserKeyError:
                problems.append(SkillProblem(folder, "not a user key; ignored"))
        return keys

    def _shared(self) -> _Shared:
        result = self._shared_reader.scan()
        key = (result.key, stat_key(self.manifest_path))
        if self._shared_cache is not None and self._shared_cache.key == key:
            return self._shared_cache
        problems = list(result.problems)
        try:
            unowned = read_manifest(self.manifest_path).unowned
        except SkillManifestError as exc:
            problems.append(SkillProblem(self.manifest_path, str(exc)))
            unowned = {}  # with no readable record, every shared skill counts as the operator's
        skills = []
        for found in result.found:
            legacy = is_bot_owned(unowned.get(found.document.name), found.relpath, found.digest)
            owner: Owner = "unowned" if legacy else "operator"
            skills.append(Skill(found.document, found.category, found.folder, owner, found.digest))
        for problem in problems:
            self._warn(problem)
        self._shared_cache = _Shared(key, ordered(skills), tuple(problems))
        return self._shared_cache

    def _view(self, user_key: str | None) -> _View:
        shared = self._shared()
        own = self._private(user_key) if user_key is not None else None
        key = (shared.key, own.key if own is not None else None)
        cached = self._views.get(user_key)
        if cached is not None and cached.key == key:
            return cached
        visible = [s for s in shared.skills if s.owner == "operator"]
        taken = {s.name for s in visible}
        if user_key is not None:
            visible += [s for s in self._own_skills(user_key) if s.name not in taken]
        skills = ordered(visible)
        view = _View(key, skills, render_index(skills))
        self._views.put(user_key, view)
        return view

    def _warn(self, problem: SkillProblem) -> None:
        marker = (str(problem.path), problem.message)
        if marker not in self._warned:
            self._warned.add(marker)
            self._on_problem(problem)


def _log_problem(problem: SkillProblem) -> None:
    log.warning("skills: skipped %s", problem)


def _read(skill: Skill, file_path: str | None) -> str:
    if file_path is None or file_path == SKILL_FILE:
        return read_skill_file(skill.folder / SKILL_FILE)
    target = resolve_support_path(skill.folder, file_path)
    if not target.is_file():
        raise SkillNotFoundError(f"skill {skill.name!r} has no file {file_path!r}")
    return read_support_file(target, file_path)


def _support_files(folder: Path) -> tuple[str, ...]:
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


def _free_path(root: Path, name: str, category: str | None) -> Path:
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


def _write_support(path: Path, text: str, label: str) -> None:
    """Check and write a support file; folders made for it go again if the write fails."""
    check_text_size(text, label)
    check_not_script(text, label)
    check(text)
    made = make_dirs(path.parent, PRIVATE_DIR_MODE)
    try:
        atomic_write_text(path, text, mode=PRIVATE_FILE_MODE)
    except BaseException:
        remove_made(made)
        raise


def _scan_folder(folder: Path) -> None:
    """Scan SKILL.md and every support file again (the scan may have improved)."""
    check(read_skill_file(folder / SKILL_FILE))
    for rel in _support_files(folder):
        target = resolve_support_path(folder, rel)
        check(read_support_file(target, rel))
