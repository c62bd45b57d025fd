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

Backends. People's own skills, their archive and the manifest are kept by a
`PrivateSkills` (`memory_core.skills.private`): the folders above by default
(`FolderPrivateSkills`), or PostgreSQL rows (`memory_core.pg.skills`), with the
same semantics. The shared folder, and promotion into it, stay files on both.

Changes run under the backend's writers' lock (a file lock next to the
manifest; a per-person lock in one transaction), check the erasure fence under
it, validate the full result (front matter, names, sizes, paths), run the
safety scan and write atomically, so a refused change leaves the skill as it was.

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

from memory_core.errors import (
    SkillArgumentError,
    SkillExistsError,
    SkillManifestError,
    SkillNotFoundError,
    SkillPathError,
    SkillProtectedError,
)
from memory_core.fence import ErasureFence
from memory_core.safety import check
from memory_core.skills.cache import LruCache
from memory_core.skills.changes import SHARED_DIR_MODE, make_dirs, remove_made, share_modes
from memory_core.skills.folders import (
    GENERAL,
    FolderReader,
    FolderScan,
    Found,
    Owner,
    Skill,
    SkillProblem,
    ordered,
    render_index,
)
from memory_core.skills.format import (
    SKILL_FILE,
    apply_patch,
    check_model_writable,
    check_not_script,
    check_text_size,
    parse_skill,
    support_path,
    validate_name,
)
from memory_core.skills.manifest import Manifest, is_bot_owned, record_promotion, text_digest
from memory_core.skills.private import PrivateSkills, PrivateWrite
from memory_core.skills.private_folders import (
    FolderPrivateSkills,
    free_path,
    read_in,
    support_files_in,
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
        private: PrivateSkills | None = None,
    ) -> None:
        """`private_dir`: where each person's skills live (default: ``skills-private``
        next to the manifest). `archive_dir`: where deleted skills are copied (None:
        not kept). `on_problem`: told once of each new problem; by default a logged
        warning. `cached_people`: how many people's scans and views stay cached.
        `fence`: the erasures a person's write is checked against (`memory_core.fence`).
        `private`: where people's own skills and the manifest are kept (None: the
        folders above, `FolderPrivateSkills`; `private_dir`, `archive_dir`,
        `manifest_path` and `lock_timeout` are then the given backend's business)."""
        self.fence = fence if fence is not None else ErasureFence()
        self.skills_dir = Path(skills_dir)
        self.manifest_path = Path(manifest_path)
        self.private_dir = (
            Path(private_dir)
            if private_dir is not None
            else self.manifest_path.with_name(PRIVATE_DIR_NAME)
        )
        self.archive_dir = Path(archive_dir) if archive_dir is not None else None
        self._private: PrivateSkills = (
            private
            if private is not None
            else FolderPrivateSkills(
                self.private_dir,
                self.manifest_path,
                archive_dir=self.archive_dir,
                lock_timeout=lock_timeout,
                cached_people=cached_people,
            )
        )
        self._shared_reader = FolderReader(self.skills_dir)
        self._shared_cache: _Shared | None = None
        self._views: LruCache[str | None, _View] = LruCache(cached_people + 1)  # + shared
        self._warned: set[tuple[str, str]] = set()
        self._on_problem = on_problem or _log_problem

    @property
    def private(self) -> PrivateSkills:
        """Where people's own skills and the manifest are kept."""
        return self._private

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
        if skill.owner == "user" and skill.user_key is not None:
            return self._private.read(skill.user_key, skill.relpath, file_path)
        return read_in(skill.folder, skill.name, file_path)

    def files_of(self, skill: Skill) -> tuple[str, ...]:
        """`support_files` for a skill already found (e.g. by `every_skill`)."""
        if skill.owner == "user" and skill.user_key is not None:
            return self._private.support_files(skill.user_key, skill.relpath)
        return support_files_in(skill.folder)

    @property
    def people_cached(self) -> int:
        """How many people's folder scans are cached now (at most `cached_people`)."""
        return self._private.people_cached

    def people(self) -> list[str]:
        """The user keys that have skills of their own (or had, on folders)."""
        return self._private.people([])

    def content_digest(self) -> str:
        """sha256 hex of every person's skills, the archive and the manifest, taken the
        same way on every backend (`PrivateSkills.content_digest`)."""
        return self._private.content_digest()

    def every_skill(self) -> tuple[Skill, ...]:
        """The operator's view: every shared skill (unowned ones too) and every
        person's own skills, ordered (same names by user key)."""
        found = list(self._shared().skills)
        for key in self._private.people([]):
            found.extend(self._own_skills(key))
        return ordered(found)

    def problems(self) -> tuple[SkillProblem, ...]:
        """Every file that was skipped (invalid, unreadable, duplicate) in the shared
        folder and in each person's folder, plus manifest trouble."""
        problems = list(self._shared().problems)
        for key in self._private.people(problems):
            problems.extend(self._scan(key).problems)
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
        check_user_key(user_key)
        document = parse_skill(content, name)
        check(content)
        with self._writing(user_key) as tx:
            if self._shared().visible(name) is not None:
                raise SkillExistsError(f"a shared skill named {name!r} exists; choose another name")
            if tx.scan(user_key).find(name) is not None:
                raise SkillExistsError(f"you already have a skill named {name!r}")
            folder = tx.create(user_key, name, category, content)
        return Skill(document, category, folder, "user", text_digest(content), user_key)

    def edit(self, name: str, content: str, *, user_key: str) -> Skill:
        """Replace the SKILL.md of `user_key`'s skill with a full new text."""
        with self._writing(user_key) as tx:
            found, _ = self._own(tx, name, user_key)
            document = parse_skill(content, found.folder.name)
            check(content)
            tx.write(user_key, found.relpath, None, content)
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
        with self._writing(user_key) as tx:
            found, old = self._own(tx, name, user_key)
            if file_path is None or file_path == SKILL_FILE:
                new, count = apply_patch(old, old_string, new_string, replace_all, SKILL_FILE)
                parse_skill(new, found.folder.name)
                check(new)
                tx.write(user_key, found.relpath, None, new)
                return count
            check_model_writable(file_path)
            if tx.kind(user_key, found.relpath, file_path) != "file":
                raise SkillNotFoundError(f"skill {name!r} has no file {file_path!r}")
            text = tx.read(user_key, found.relpath, file_path)
            new, count = apply_patch(text, old_string, new_string, replace_all, file_path)
            _check_support(new, file_path)
            tx.write(user_key, found.relpath, file_path, new)
            return count

    def write_file(self, name: str, file_path: str, content: str, *, user_key: str) -> None:
        """Create or replace a text support file (not under scripts/) of `user_key`'s skill."""
        with self._writing(user_key) as tx:
            found, _ = self._own(tx, name, user_key)
            check_model_writable(file_path)
            if tx.kind(user_key, found.relpath, file_path) == "folder":
                raise SkillPathError(f"file_path {file_path!r} is a folder")
            _check_support(content, file_path)
            tx.write(user_key, found.relpath, file_path, content)

    def remove_file(self, name: str, file_path: str, *, user_key: str) -> None:
        """Delete one support file of `user_key`'s skill."""
        with self._writing(lock=user_key) as tx:
            found, _ = self._own(tx, name, user_key)
            support_path(file_path)
            if tx.kind(user_key, found.relpath, file_path) not in ("file", "link"):
                raise SkillNotFoundError(f"skill {name!r} has no file {file_path!r}")
            tx.remove(user_key, found.relpath, file_path)

    def delete(self, name: str, *, user_key: str) -> Path | None:
        """Delete `user_key`'s skill (even one a shared skill hides); return where it
        was archived (None: no archive)."""
        with self._writing(lock=user_key) as tx:
            found, _ = self._own(tx, name, user_key, hidden_ok=True)
            return tx.delete(user_key, found.relpath)

    # -------------------------------------------------------------- admin

    def erase_user(self, user_key: str) -> int:
        """Remove `user_key`'s own skills and their archived copies, under the writers'
        lock (call `fence.erasing` first); how many folders went."""
        key = check_user_key(user_key)
        with self._writing(lock=key) as tx:
            return tx.erase(key)

    def promotion_owner(self, name: str) -> str | None:
        """Whose skill `name` an admin means when they give no user key: None for
        an unowned shared skill of that name, else the one person who has one.
        `SkillArgumentError` when several people do; `SkillNotFoundError` when nobody."""
        if any(s.name == name and s.owner == "unowned" for s in self._shared().skills):
            return None
        owners = [key for key in self._private.people([]) if self._scan(key).find(name)]
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
        with self._writing(lock=user_key) as tx:
            manifest = tx.read_manifest()  # unreadable: refuse before moving
            if user_key is None:
                return self._promote_unowned(tx, name, manifest)
            found = tx.scan(user_key).find(name)
            if found is None:
                raise SkillNotFoundError(f"{user_key} has no skill named {name!r}")
            for _, text in tx.texts(user_key, found.relpath):
                check(text)  # the scan may have improved since the skill was written
            target = self._shared_target(name, found.category)
            made = make_dirs(target.parent, SHARED_DIR_MODE)
            staging = target.with_name(f".promoting-{name}-{uuid.uuid4().hex[:8]}")
            placed = False
            try:
                tx.export(user_key, found.relpath, staging)
                share_modes(staging)
                os.rename(staging, target)
                placed = True
                record_promotion(manifest, name, found.relpath, user_key)
                tx.write_manifest(manifest)
                tx.drop(user_key, found.relpath)
            except BaseException:
                shutil.rmtree(target if placed else staging, ignore_errors=True)
                remove_made(made)
                raise
        return self.get(name)

    def _promote_unowned(self, tx: PrivateWrite, name: str, manifest: Manifest) -> Skill:
        skill = next((s for s in self._shared().skills if s.name == name), None)
        if skill is None:
            raise SkillNotFoundError(f"no unowned skill named {name!r}; give the user key")
        if skill.owner != "unowned":
            raise SkillExistsError(f"skill {name!r} is already shared")
        _scan_folder(skill.folder)
        record_promotion(manifest, name, skill.relpath, None)
        tx.write_manifest(manifest)
        return self.get(name)

    # ----------------------------------------------------------- internals

    @contextlib.contextmanager
    def _writing(
        self, user_key: str | None = None, *, lock: str | None = None
    ) -> Iterator[PrivateWrite]:
        """Hold the writers' lock for `user_key` (or `lock`: a removal, which the fence
        does not refuse); storage failures become `SkillStorageError`. A write for
        `user_key` is refused once that person was erased since the work began."""
        person = user_key if user_key is not None else lock
        guard = (lambda: self.fence.check(user_key)) if user_key is not None else None
        with self._private.writing(person, guard) as tx:
            yield tx

    def _own(
        self, tx: PrivateWrite, name: str, user_key: str, *, hidden_ok: bool = False
    ) -> tuple[Found, str]:
        """`user_key`'s own skill `name` and its text; refuse a shared one."""
        found = tx.scan(user_key).find(name)
        shared = self._shared().visible(name)
        if shared is not None and not (hidden_ok and found is not None):
            raise SkillProtectedError(
                f"skill {name!r} is shared with everyone and read-only; "
                "create a new skill with another name, or ask the operator to change it"
            )
        if found is None:
            raise SkillNotFoundError(f"no skill named {name!r}")
        return found, tx.read(user_key, found.relpath, None)

    def _shared_target(self, name: str, category: str | None) -> Path:
        clash = next((s for s in self._shared().skills if s.name == name), None)
        if clash is not None:
            raise SkillExistsError(
                f"a shared skill named {name!r} already exists at {clash.folder}; "
                "rename or remove one of them first"
            )
        return free_path(self.skills_dir, name, category)

    def _scan(self, user_key: str) -> FolderScan:
        result = self._private.scan(user_key)
        for problem in result.problems:
            self._warn(problem)
        return result

    def _own_skills(self, user_key: str) -> list[Skill]:
        return [
            Skill(f.document, f.category, f.folder, "user", f.digest, user_key)
            for f in self._scan(user_key).found
        ]

    def _shared(self) -> _Shared:
        result = self._shared_reader.scan()
        key = (result.key, self._private.manifest_key())
        if self._shared_cache is not None and self._shared_cache.key == key:
            return self._shared_cache
        problems = list(result.problems)
        try:
            unowned = self._private.read_manifest().unowned
        except SkillManifestError as exc:
            problems.append(SkillProblem(self._private.manifest_label, str(exc)))
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
        own = self._scan(user_key) if user_key is not None else None
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


def _check_support(text: str, label: str) -> None:
    """The rules for a support file the model writes: size, no script, the scan."""
    check_text_size(text, label)
    check_not_script(text, label)
    check(text)


def _scan_folder(folder: Path) -> None:
    """Scan SKILL.md and every support file again (the scan may have improved)."""
    check(read_in(folder, folder.name, None))
    for rel in support_files_in(folder):
        check(read_in(folder, folder.name, rel))
