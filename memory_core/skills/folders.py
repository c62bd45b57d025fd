"""Reading one skills folder: what a skill is on disk, the scan, and the prompt index.

Layout: ``<root>/<name>/SKILL.md`` or ``<root>/<category>/<name>/SKILL.md`` (one
level of category). Names starting with '.' are ignored, so the store's own
temporary folders never show up as skills.

`FolderReader.scan()` first checks cheaply whether anything changed: it lists
the folder and its category folders and stats each SKILL.md. Only files whose
stat changed are parsed again, so an operator's edit is seen on the next call
without a restart.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from memory_core.errors import SkillError
from memory_core.skills.format import SKILL_FILE, SkillDocument, parse_skill, read_skill_file
from memory_core.skills.manifest import text_digest

Owner = Literal["operator", "user", "unowned"]
GENERAL = "general"
_INDEX_HEADER = (
    "## Skills\n"
    "Saved procedures for recurring tasks. When a request matches a skill below, "
    "load it with skill_view(name) before acting and follow it."
)


@dataclass(frozen=True)
class Skill:
    """One valid skill as found on disk.

    `owner`: ``operator`` (the shared folder: bundled, the operator's, promoted;
    read-only to the model, seen by everyone), ``user`` (a skill the model wrote
    in the conversation of `user_key`; only that person sees and changes it) or
    ``unowned`` (a bot skill from before skills had owners; seen by nobody
    until an admin promotes it).
    """

    document: SkillDocument
    category: str | None
    folder: Path
    owner: Owner
    digest: str  # SHA-256 of the SKILL.md bytes
    user_key: str | None = None

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
class Found:
    """A valid SKILL.md in one folder, before anyone decides who owns it."""

    document: SkillDocument
    category: str | None
    folder: Path
    digest: str

    @property
    def relpath(self) -> str:
        name = self.document.name
        return f"{self.category}/{name}" if self.category else name


@dataclass(frozen=True)
class FolderScan:
    """One folder's valid skills (the first of each name, in path order) and problems."""

    key: tuple[Any, ...]
    found: tuple[Found, ...]
    problems: tuple[SkillProblem, ...]

    def find(self, name: str) -> Found | None:
        return next((f for f in self.found if f.document.name == name), None)


@dataclass(frozen=True)
class _Parsed:
    key: tuple[Any, ...]
    document: SkillDocument | None
    digest: str
    problem: str | None


class FolderReader:
    """Scans one skills folder, parsing again only the files whose stat changed."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._parsed: dict[Path, _Parsed] = {}
        self._last: FolderScan | None = None

    def scan(self) -> FolderScan:
        candidates, listing_problems = candidates_in(self.root)
        stats = tuple((str(folder), stat_key(folder / SKILL_FILE)) for _, folder in candidates)
        key = (stats, tuple(map(str, listing_problems)))
        if self._last is not None and self._last.key == key:
            return self._last
        problems = list(listing_problems)
        parsed: dict[Path, _Parsed] = {}
        found: dict[str, Found] = {}
        for (category, folder), (_, file_key) in zip(candidates, stats, strict=True):
            path = folder / SKILL_FILE
            item = self._parsed.get(path)
            if item is None or item.key != file_key:
                item = _parse_file(path, file_key)
            parsed[path] = item
            if item.document is None:
                problems.append(SkillProblem(path, item.problem or "invalid"))
                continue
            name = item.document.name
            if name in found:
                other = found[name].folder / SKILL_FILE
                problems.append(SkillProblem(path, f"duplicate skill name {name!r} (see {other})"))
                continue
            found[name] = Found(item.document, category, folder, item.digest)
        self._parsed = parsed
        self._last = FolderScan(key, tuple(found.values()), tuple(problems))
        return self._last


def candidates_in(root: Path) -> tuple[list[tuple[str | None, Path]], list[SkillProblem]]:
    """(category, folder) for every folder holding a SKILL.md entry, in path order,
    plus the folders that could not be listed."""
    found: list[tuple[str | None, Path]] = []
    problems: list[SkillProblem] = []
    for entry in list_dir(root, problems):
        if os.path.lexists(entry / SKILL_FILE):
            found.append((None, entry))
        elif entry.is_dir():
            subs = list_dir(entry, problems)
            found.extend((entry.name, sub) for sub in subs if os.path.lexists(sub / SKILL_FILE))
        elif entry.is_symlink() and not entry.exists():
            problems.append(SkillProblem(entry, "symlink is broken or loops"))
    return found, problems


def list_dir(folder: Path, problems: list[SkillProblem]) -> list[Path]:
    """The visible (not dot-named) entries of `folder`, sorted; a missing folder has none."""
    try:
        names = sorted(os.listdir(folder))
    except FileNotFoundError:
        return []
    except OSError as exc:
        problems.append(SkillProblem(folder, f"cannot list folder: {exc.strerror or exc}"))
        return []
    return [folder / n for n in names if not n.startswith(".")]


def stat_key(path: Path) -> tuple[Any, ...]:
    """What changes when a file is replaced or edited (or an error number)."""
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


def ordered(skills: Iterable[Skill]) -> tuple[Skill, ...]:
    """Uncategorised first (shown under "general", merged with a real "general"
    category folder if there is one), then by category and name."""
    return tuple(sorted(skills, key=_order))


def _order(skill: Skill) -> tuple[bool, str, str, str]:
    category = skill.category or GENERAL
    return (category != GENERAL, category, skill.name, skill.user_key or "")


def render_index(skills: tuple[Skill, ...]) -> str:
    """The system-prompt block listing `skills` (already ordered); empty for none."""
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
