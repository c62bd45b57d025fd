"""The skills folder: scanning, the prompt index, authorship and changes.

Layout: ``<dir>/<name>/SKILL.md`` or ``<dir>/<category>/<name>/SKILL.md`` (one
level of category). Names starting with '.' are ignored, so the store's own
temporary folders never show up as skills.

Reading. Every read (`skills()`, `get()`, `problems()`, `index_block()`) first
checks cheaply whether anything changed: it lists the folder and its category
folders and stats each SKILL.md and the manifest. Only files whose stat changed
are parsed again, so an operator's edit is seen on the next call without a
restart. Invalid skills are skipped with one logged warning per problem. The
caller freezes `index_block()` once per session; that keeps the prompt stable.

Authorship. The manifest (`manifest.py`: a JSON file in the data dir, not in
the skills folder) records each skill the bot created: its relative path and
the SHA-256 of its SKILL.md as the bot last wrote it. A skill is bot-owned only
while both still match. Everything else — bundled skills, operators' skills, and a bot
skill an operator has since edited by hand — is operator-owned, and every
change method here refuses it: operators change their skills on disk.

Changes run under a file lock next to the manifest, validate the full result
(front matter, names, sizes, paths), run the safety scan and write atomically,
so a refused change leaves the skill byte-for-byte as it was.

Errors: the `SkillError` family of `memory_core.errors` (its docstring draws
the tree), `UnsafeContentError` when the scan refuses model-written content,
and `AtomicWriteError` when the disk refuses a write.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from memory_core.atomic import atomic_write_text
from memory_core.errors import (
    SkillError,
    SkillExistsError,
    SkillManifestError,
    SkillNotFoundError,
    SkillPathError,
    SkillProtectedError,
    SkillStorageError,
    UnsafeContentError,
)
from memory_core.safety import scan
from memory_core.skills.format import (
    SKILL_FILE,
    SUPPORT_DIRS,
    SkillDocument,
    apply_patch,
    check_text_size,
    parse_skill,
    read_skill_file,
    read_support_file,
    resolve_support_path,
    validate_name,
)
from memory_core.skills.manifest import (
    Entries,
    is_bot_owned,
    locked,
    read_manifest,
    record,
    text_digest,
    write_manifest,
)

log = logging.getLogger(__name__)

Owner = Literal["operator", "bot"]
GENERAL = "general"
_FILE_MODE = 0o644  # skills are not secret, and the operator must be able to read them
_INDEX_HEADER = (
    "## Skills\n"
    "Saved procedures for recurring tasks. When a request matches a skill below, "
    "load it with skill_view(name) before acting and follow it."
)


@dataclass(frozen=True)
class Skill:
    """One valid skill as found on disk."""

    document: SkillDocument
    category: str | None
    folder: Path
    owner: Owner
    digest: str  # SHA-256 of the SKILL.md bytes

    @property
    def name(self) -> str:
        return self.document.name

    @property
    def description(self) -> str:
        return self.document.description

    @property
    def relpath(self) -> str:
        return f"{self.category}/{self.name}" if self.category else self.name


@dataclass(frozen=True)
class SkillProblem:
    """A file that could not be loaded, and why."""

    path: Path
    message: str

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"


@dataclass(frozen=True)
class _Parsed:
    key: tuple[Any, ...]
    document: SkillDocument | None
    digest: str
    problem: str | None


@dataclass(frozen=True)
class _Snapshot:
    key: tuple[Any, ...]
    skills: tuple[Skill, ...]
    problems: tuple[SkillProblem, ...]
    index: str

    def find(self, name: str) -> Skill | None:
        return next((s for s in self.skills if s.name == name), None)


class SkillsStore:
    """The mounted skills folder plus the bot's authorship manifest."""

    def __init__(
        self,
        skills_dir: Path,
        manifest_path: Path,
        *,
        archive_dir: Path | None = None,
        lock_timeout: float = 10.0,
        on_problem: Callable[[SkillProblem], None] | None = None,
    ) -> None:
        """`archive_dir`: where deleted bot skills are copied (None: not kept).
        `on_problem`: told once of each new problem; by default a logged warning."""
        self.skills_dir = Path(skills_dir)
        self.manifest_path = Path(manifest_path)
        self.archive_dir = Path(archive_dir) if archive_dir is not None else None
        self._lock_timeout = lock_timeout
        self._parsed: dict[Path, _Parsed] = {}
        self._snapshot_cache: _Snapshot | None = None
        self._warned: set[tuple[str, str]] = set()
        self._on_problem = on_problem or _log_problem

    def skills(self) -> tuple[Skill, ...]:
        """Every valid skill, uncategorised first, then by category and name."""
        return self._snapshot().skills

    def get(self, name: str) -> Skill:
        """The valid skill called `name`, or `SkillNotFoundError`."""
        skill = self._snapshot().find(name)
        if skill is None:
            raise SkillNotFoundError(f"no skill named {name!r}")
        return skill

    def problems(self) -> tuple[SkillProblem, ...]:
        """Every file that was skipped (invalid, unreadable, duplicate), plus manifest trouble."""
        return self._snapshot().problems

    def index_block(self) -> str:
        """The system-prompt block listing every skill; empty when there are none.

        Same folder contents give the same bytes. Call it once per new session.
        """
        return self._snapshot().index

    def read_text(self, name: str, file_path: str | None = None) -> str:
        """The raw SKILL.md, or a support file's text (≤ 1 MiB, UTF-8)."""
        skill = self.get(name)
        if file_path is None or file_path == SKILL_FILE:
            return read_skill_file(skill.folder / SKILL_FILE)
        target = resolve_support_path(skill.folder, file_path)
        if not target.is_file():
            raise SkillNotFoundError(f"skill {name!r} has no file {file_path!r}")
        return read_support_file(target, file_path)

    def support_files(self, name: str) -> tuple[str, ...]:
        """Relative paths of the files under the skill's support folders, sorted."""
        folder = self.get(name).folder
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

    def create(self, name: str, content: str, category: str | None = None) -> Skill:
        """Create a new bot-owned skill from a full SKILL.md text."""
        validate_name(name)
        if category is not None:
            validate_name(category, "category")
        document = parse_skill(content, name)
        _scan(content)
        with self._writing() as entries:
            folder = self._free_folder(name, category)
            made = _make_dirs(folder)
            try:
                self._commit_skill_file(folder / SKILL_FILE, content, None, entries, name)
            except BaseException:
                _remove_made(made)
                raise
        return Skill(document, category, folder, "bot", text_digest(content))

    def edit(self, name: str, content: str) -> Skill:
        """Replace a bot-owned skill's SKILL.md with a full new text."""
        with self._writing() as entries:
            skill, old = self._owned(name, entries)
            document = parse_skill(content, skill.folder.name)
            _scan(content)
            self._commit_skill_file(skill.folder / SKILL_FILE, content, old, entries, name)
        return Skill(document, skill.category, skill.folder, "bot", text_digest(content))

    def patch(
        self,
        name: str,
        old_string: str,
        new_string: str,
        *,
        replace_all: bool = False,
        file_path: str | None = None,
    ) -> int:
        """Replace `old_string` (unique unless `replace_all`); return the count replaced."""
        with self._writing() as entries:
            skill, old = self._owned(name, entries)
            if file_path is None or file_path == SKILL_FILE:
                new, count = apply_patch(old, old_string, new_string, replace_all, SKILL_FILE)
                parse_skill(new, skill.folder.name)
                _scan(new)
                self._commit_skill_file(skill.folder / SKILL_FILE, new, old, entries, name)
                return count
            target = resolve_support_path(skill.folder, file_path)
            if not target.is_file():
                raise SkillNotFoundError(f"skill {name!r} has no file {file_path!r}")
            text = read_support_file(target, file_path)
            new, count = apply_patch(text, old_string, new_string, replace_all, file_path)
            _write_support(target, new, file_path)
            return count

    def write_file(self, name: str, file_path: str, content: str) -> None:
        """Create or replace a text support file of a bot-owned skill."""
        with self._writing() as entries:
            skill, _ = self._owned(name, entries)
            target = resolve_support_path(skill.folder, file_path)
            if target.is_dir():
                raise SkillPathError(f"file_path {file_path!r} is a folder")
            _write_support(target, content, file_path)

    def remove_file(self, name: str, file_path: str) -> None:
        """Delete one support file of a bot-owned skill."""
        with self._writing() as entries:
            skill, _ = self._owned(name, entries)
            target = resolve_support_path(skill.folder, file_path)
            if not (target.is_file() or target.is_symlink()):
                raise SkillNotFoundError(f"skill {name!r} has no file {file_path!r}")
            target.unlink()

    def delete(self, name: str) -> Path | None:
        """Delete a bot-owned skill; return where it was archived (None: no archive)."""
        with self._writing() as entries:
            skill, _ = self._owned(name, entries)
            # Renaming first makes the skill vanish at once; the copy comes after.
            doomed = skill.folder.with_name(f".deleting-{name}-{uuid.uuid4().hex[:8]}")
            os.rename(skill.folder, doomed)
            archived = None
            try:
                if self.archive_dir is not None:
                    archived = self._archive(doomed, name)
                del entries[name]
                write_manifest(self.manifest_path, entries)
            except BaseException:
                os.rename(doomed, skill.folder)
                if archived is not None:
                    shutil.rmtree(archived, ignore_errors=True)
                raise
        try:
            shutil.rmtree(doomed)
        except OSError as exc:
            log.warning("skill %r deleted, but %s could not be removed: %s", name, doomed, exc)
        return archived

    @contextlib.contextmanager
    def _writing(self) -> Iterator[Entries]:
        """Hold the writers' lock and yield the manifest entries, read under it."""
        with locked(self.manifest_path, self._lock_timeout) as entries:
            try:
                yield entries
            except OSError as exc:
                raise SkillStorageError(f"the change could not be made on disk: {exc}") from exc

    def _owned(self, name: str, entries: Entries) -> tuple[Skill, str]:
        """The skill and its current text, if the bot owns it; else refuse."""
        skill = self.get(name)
        path = skill.folder / SKILL_FILE
        text = read_skill_file(path)
        entry = entries.get(name)
        if not (entry and entry.get("path") == skill.relpath):
            raise SkillProtectedError(
                f"skill {name!r} was written by the operator and is read-only; "
                "create a new skill instead, or ask the operator to change it"
            )
        if entry.get("sha256") != text_digest(text):
            raise SkillProtectedError(
                f"skill {name!r} was edited by the operator since the bot wrote it and is "
                "now read-only; create a new skill instead"
            )
        return skill, text

    def _free_folder(self, name: str, category: str | None) -> Path:
        taken = {folder.name: folder for _, folder in _candidates(self.skills_dir)[0]}
        if name in taken:
            raise SkillExistsError(f"a skill named {name!r} already exists at {taken[name]}")
        root = self.skills_dir
        if os.path.lexists(root / name):
            raise SkillExistsError(f"{root / name} already exists; choose another name")
        if category is None:
            return root / name
        if os.path.lexists(root / category / SKILL_FILE):
            raise SkillExistsError(f"category {category!r} is the name of a skill")
        if os.path.lexists(root / category / name):
            raise SkillExistsError(f"{root / category / name} already exists")
        return root / category / name

    def _commit_skill_file(
        self,
        path: Path,
        text: str,
        old: str | None,
        entries: Entries,
        name: str,
    ) -> None:
        """Write SKILL.md, then record it; if recording fails, put the old text back."""
        atomic_write_text(path, text, mode=_FILE_MODE if old is None else None)
        rel = path.parent.relative_to(self.skills_dir).as_posix()
        record(entries, name, rel, text_digest(text))
        try:
            write_manifest(self.manifest_path, entries)
        except BaseException:
            if old is not None:
                atomic_write_text(path, old)
            raise

    def _archive(self, folder: Path, name: str) -> Path:
        assert self.archive_dir is not None
        self.archive_dir.mkdir(parents=True, exist_ok=True)
        target = self.archive_dir / f"{name}-{datetime.now(UTC):%Y%m%dT%H%M%S%fZ}"
        shutil.copytree(folder, target, symlinks=True)
        return target

    def _snapshot(self) -> _Snapshot:
        candidates, listing_problems = _candidates(self.skills_dir)
        keys = tuple((str(folder), _stat_key(folder / SKILL_FILE)) for _, folder in candidates)
        key = (keys, tuple(map(str, listing_problems)), _stat_key(self.manifest_path))
        if self._snapshot_cache is not None and self._snapshot_cache.key == key:
            return self._snapshot_cache
        self._snapshot_cache = self._build(candidates, listing_problems, key)
        return self._snapshot_cache

    def _build(
        self,
        candidates: list[tuple[str | None, Path]],
        listing_problems: list[SkillProblem],
        key: tuple[Any, ...],
    ) -> _Snapshot:
        problems = list(listing_problems)
        try:
            entries = read_manifest(self.manifest_path)
        except SkillManifestError as exc:
            problems.append(SkillProblem(self.manifest_path, str(exc)))
            entries = {}  # with no readable record, every skill counts as the operator's
        parsed: dict[Path, _Parsed] = {}
        skills: dict[str, Skill] = {}
        for (category, folder), (_, stat_key) in zip(candidates, key[0], strict=True):
            path = folder / SKILL_FILE
            item = self._parsed.get(path)
            if item is None or item.key != stat_key:
                item = _parse_file(path, stat_key)
            parsed[path] = item
            if item.document is None:
                problems.append(SkillProblem(path, item.problem or "invalid"))
                continue
            name = item.document.name
            if name in skills:
                other = skills[name].folder / SKILL_FILE
                problems.append(SkillProblem(path, f"duplicate skill name {name!r} (see {other})"))
                continue
            rel = f"{category}/{name}" if category else name
            bot = is_bot_owned(entries.get(name), rel, item.digest)
            owner: Owner = "bot" if bot else "operator"
            skills[name] = Skill(item.document, category, folder, owner, item.digest)
        self._parsed = parsed
        for problem in problems:
            self._warn(problem)
        ordered = tuple(sorted(skills.values(), key=_order))
        return _Snapshot(key, ordered, tuple(problems), _render_index(ordered))

    def _warn(self, problem: SkillProblem) -> None:
        marker = (str(problem.path), problem.message)
        if marker not in self._warned:
            self._warned.add(marker)
            self._on_problem(problem)


def _log_problem(problem: SkillProblem) -> None:
    log.warning("skills: skipped %s", problem)


def _candidates(root: Path) -> tuple[list[tuple[str | None, Path]], list[SkillProblem]]:
    """(category, folder) for every folder holding a SKILL.md entry, in path order,
    plus the folders that could not be listed."""
    found: list[tuple[str | None, Path]] = []
    problems: list[SkillProblem] = []
    for entry in _list_dir(root, problems):
        if os.path.lexists(entry / SKILL_FILE):
            found.append((None, entry))
        elif entry.is_dir():
            subs = _list_dir(entry, problems)
            found.extend((entry.name, sub) for sub in subs if os.path.lexists(sub / SKILL_FILE))
        elif entry.is_symlink() and not entry.exists():
            problems.append(SkillProblem(entry, "symlink is broken or loops"))
    return found, problems


def _list_dir(folder: Path, problems: list[SkillProblem]) -> list[Path]:
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    except OSError as exc:
        problems.append(SkillProblem(folder, f"cannot list folder: {exc.strerror or exc}"))
        return []
    return [folder / n for n in names if not n.startswith(".")]


def _stat_key(path: Path) -> tuple[Any, ...]:
    try:
        st = path.stat()
    except OSError as exc:
        return ("error", exc.errno)
    return (st.st_dev, st.st_ino, st.st_mtime_ns, st.st_size)


def _parse_file(path: Path, key: tuple[Any, ...]) -> _Parsed:
    try:
        text = read_skill_file(path)
        document = parse_skill(text, path.parent.name)
    except SkillError as exc:
        return _Parsed(key, None, "", str(exc))
    return _Parsed(key, document, text_digest(text), None)


def _write_support(path: Path, text: str, label: str) -> None:
    """Check and write a support file; folders made for it go again if the write fails."""
    check_text_size(text, label)
    _scan(text)
    made = _make_dirs(path.parent)
    try:
        atomic_write_text(path, text, mode=None if path.exists() else _FILE_MODE)
    except BaseException:
        _remove_made(made)
        raise


def _scan(text: str) -> None:
    finding = scan(text)
    if finding is not None:
        raise UnsafeContentError(finding)


def _make_dirs(folder: Path) -> list[Path]:
    """Create `folder` and missing parents; return the ones created, outermost first."""
    missing = []
    for path in (folder, *folder.parents):
        if path.exists():
            break
        missing.append(path)
    folder.mkdir(parents=True, exist_ok=True)
    return list(reversed(missing))


def _remove_made(made: list[Path]) -> None:
    """Undo `_make_dirs` after a failed write (cleanup only: the write's error is raised)."""
    if made:
        shutil.rmtree(made[0], ignore_errors=True)


def _render_index(skills: tuple[Skill, ...]) -> str:
    if not skills:
        return ""
    lines = [_INDEX_HEADER, "", "<available_skills>"]
    current = None
    for skill in skills:
        category = skill.category or GENERAL
        if category != current:
            lines.append(f"{category}:")
            current = category
        lines.append(f"- {skill.name}: {' '.join(skill.description.split())}")
    lines.append("</available_skills>")
    return "\n".join(lines)


def _order(skill: Skill) -> tuple[bool, str, str]:
    # Uncategorised skills (shown under "general") first, merged with a real
    # "general" category folder if there is one.
    category = skill.category or GENERAL
    return (category != GENERAL, category, skill.name)
