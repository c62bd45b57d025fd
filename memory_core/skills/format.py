"""The SKILL.md format: YAML front matter plus a Markdown body.

A skill file looks like::

    ---
    name: recall-past-conversations
    description: How to answer a /recall request well.
    tags: [memory, search]
    version: "1.0"
    ---
    # When to use
    ...

`parse_skill()` turns the text into a `SkillDocument` or raises
`SkillFormatError` with one sentence naming the problem. Unknown front-matter
keys are allowed and ignored, so skills written for other agents still load.

This module also holds the rules the store and the tools share: the limits,
names, support-file paths (`support_path()` on the text,
`resolve_support_path()` on disk, `check_model_writable()` for the model's
writes), reading files under those rules and the
patch rule. The skills errors (`SkillError` and below) live in `memory_core.errors`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from memory_core.errors import SkillFormatError, SkillPatchError, SkillPathError, SkillSizeError

SKILL_FILE = "SKILL.md"
MAX_NAME_CHARS = 64
MAX_DESCRIPTION_CHARS = 1024
MAX_SKILL_CHARS = 100_000  # SKILL.md and every text file the model writes
MAX_SUPPORT_FILE_BYTES = 1024 * 1024  # any support file, read or written
SUPPORT_DIRS = ("references", "templates", "scripts", "assets")
# The model writes text only, never scripts: nothing in Mnemo runs a skill's
# files, and a script written from one conversation must not wait in a folder
# for an operator (or another agent) to run it. Operators' scripts/ stay readable.
MODEL_WRITABLE_DIRS = ("references", "templates", "assets")
# Names that say "run me", refused for the model's files wherever they go.
SCRIPT_SUFFIXES = frozenset(
    {".sh", ".bash", ".zsh", ".fish", ".ksh", ".csh", ".command", ".py", ".pyw", ".pl",
     ".rb", ".php", ".lua", ".ps1", ".psm1", ".bat", ".cmd", ".vbs", ".exe", ".msi",
     ".jar", ".so", ".dll", ".dylib"}
)  # fmt: skip

_NAME_RE = re.compile(r"[a-z0-9][a-z0-9._-]*")
_FENCE = "---"
_FENCE_ENDS = ("---", "...")


@dataclass(frozen=True)
class SkillDocument:
    """The validated content of one SKILL.md."""

    name: str
    description: str
    body: str
    tags: tuple[str, ...] = ()
    version: str | None = None


def validate_name(name: object, what: str = "name") -> str:
    """Return `name` if it is a valid skill (or category) name, else raise."""
    if not isinstance(name, str):
        raise SkillFormatError(f"{what} must be a string, got {type(name).__name__}")
    if not name:
        raise SkillFormatError(f"{what} is empty")
    if len(name) > MAX_NAME_CHARS:
        raise SkillFormatError(f"{what} is {len(name)} characters; the limit is {MAX_NAME_CHARS}")
    if not _NAME_RE.fullmatch(name):
        raise SkillFormatError(
            f"{what} {name!r} is invalid: use lowercase letters, digits, '.', '_' and '-', "
            "starting with a letter or digit"
        )
    return name


def check_text_size(text: str, label: str) -> None:
    """Refuse text longer than `MAX_SKILL_CHARS` characters."""
    if len(text) > MAX_SKILL_CHARS:
        raise SkillSizeError(
            f"{label} is {len(text):,} characters; the limit is {MAX_SKILL_CHARS:,}"
        )


def parse_skill(text: str, folder_name: str | None = None) -> SkillDocument:
    """Parse and validate a SKILL.md.

    `folder_name`, when given, must equal the `name` in the front matter.
    Raises `SkillFormatError` (or `SkillSizeError` for an oversized file).
    """
    check_text_size(text, SKILL_FILE)
    meta, body = _split_front_matter(text.removeprefix("\ufeff"))
    name = validate_name(meta.get("name"), "name")
    if folder_name is not None and name != folder_name:
        raise SkillFormatError(f"name {name!r} does not match its folder name {folder_name!r}")
    if not body.strip():
        raise SkillFormatError("the Markdown body after the front matter is empty")
    return SkillDocument(
        name=name,
        description=_description(meta.get("description")),
        body=body,
        tags=_tags(meta.get("tags")),
        version=_version(meta.get("version")),
    )


def _split_front_matter(text: str) -> tuple[Mapping[str, Any], str]:
    lines = text.replace("\r\n", "\n").split("\n")
    if lines[0].rstrip() != _FENCE:
        raise SkillFormatError("missing YAML front matter: the file must start with a line '---'")
    end = next((i for i in range(1, len(lines)) if lines[i].rstrip() in _FENCE_ENDS), None)
    if end is None:
        raise SkillFormatError("the front matter is not closed by a line '---'")
    try:
        meta = yaml.safe_load("\n".join(lines[1:end]))
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 2}" if mark is not None else ""
        problem = getattr(exc, "problem", None) or "invalid YAML"
        raise SkillFormatError(f"front matter{where}: {problem}") from None
    if not isinstance(meta, dict):
        raise SkillFormatError("the front matter must be a YAML mapping (key: value lines)")
    return meta, "\n".join(lines[end + 1 :])


def _description(value: object) -> str:
    if value is None:
        raise SkillFormatError("description is missing")
    if not isinstance(value, str):
        raise SkillFormatError(f"description must be a string, got {type(value).__name__}")
    value = value.strip()
    if not value:
        raise SkillFormatError("description is empty")
    if len(value) > MAX_DESCRIPTION_CHARS:
        raise SkillFormatError(
            f"description is {len(value):,} characters; the limit is {MAX_DESCRIPTION_CHARS:,}"
        )
    return value


def _tags(value: object) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(t, str) and t.strip() for t in value):
        raise SkillFormatError("tags must be a list of non-empty strings")
    return tuple(t.strip() for t in value)


def _version(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        # YAML reads `version: 1.10` as the float 1.1; refuse rather than guess.
        raise SkillFormatError(
            f'version must be a string (quote it, e.g. version: "{value}"), '
            f"got {type(value).__name__}"
        )
    return value


def support_path(path: object) -> PurePosixPath:
    """Validate a support-file path relative to a skill folder, lexically.

    It must be relative, use '/' separators, have no '..' and no hidden (dot)
    parts, and start with one of `SUPPORT_DIRS`. Containment on disk (symlinks) is the
    store's job; this only checks the text.
    """
    if not isinstance(path, str) or not path.strip():
        raise SkillPathError("file_path must be a non-empty string")
    if "\\" in path or "\x00" in path:
        raise SkillPathError(f"file_path {path!r} may not contain backslashes or NUL")
    pure = PurePosixPath(path)
    if pure.is_absolute() or re.match(r"[A-Za-z]:", path):
        raise SkillPathError(f"file_path {path!r} must be relative to the skill folder")
    raw_parts = path.split("/")
    if any(part == "" or part.startswith(".") for part in raw_parts):
        raise SkillPathError(
            f"file_path {path!r} may not contain '..', hidden (dot) names or empty parts"
        )
    if raw_parts[0] not in SUPPORT_DIRS or len(raw_parts) < 2:
        allowed = ", ".join(f"{d}/" for d in SUPPORT_DIRS)
        raise SkillPathError(f"file_path {path!r} must be a file under one of: {allowed}")
    return pure


def check_model_writable(path: str) -> None:
    """Refuse a support-file path the model may not write: anything under scripts/, or a
    name ending like a script or a program (``.sh``, ``.py``, ``.exe`` …)."""
    pure = support_path(path)
    if pure.parts[0] not in MODEL_WRITABLE_DIRS:
        allowed = ", ".join(f"{d}/" for d in MODEL_WRITABLE_DIRS)
        raise SkillPathError(
            f"file_path {path!r}: skills you write hold text, not scripts; "
            f"use one of {allowed} (describe commands in SKILL.md)"
        )
    if pure.suffix.lower() in SCRIPT_SUFFIXES:
        raise SkillPathError(
            f"file_path {path!r}: skills you write hold text, not scripts; name it as text "
            "(for example .md or .txt) and describe commands in SKILL.md"
        )


def check_not_script(text: str, label: str) -> None:
    """Refuse text the model writes that starts like a script (``#!``, a shebang)."""
    if text.lstrip("\ufeff \t\r\n").startswith("#!"):
        raise SkillFormatError(
            f"{label} starts with '#!' like a script; skills you write hold text, not "
            "scripts: describe the commands in SKILL.md instead"
        )


def apply_patch(text: str, old: str, new: str, replace_all: bool, label: str) -> tuple[str, int]:
    """Replace `old` by `new` in `text`; return the new text and the count replaced.

    `old` must occur exactly once unless `replace_all` is set.
    """
    if not old:
        raise SkillPatchError("old_string is empty")
    count = text.count(old)
    if count == 0:
        raise SkillPatchError(
            f"old_string was not found in {label}; "
            "view it with skill_view and copy the text exactly"
        )
    if count > 1 and not replace_all:
        raise SkillPatchError(
            f"old_string matches {count} places in {label}; include more surrounding text "
            "to make it unique, or set replace_all"
        )
    return (text.replace(old, new), count) if replace_all else (text.replace(old, new, 1), 1)


def read_skill_file(path: Path) -> str:
    """Read a SKILL.md as UTF-8; unreadable, oversized or binary files raise `SkillError`."""
    try:
        if path.stat().st_size > 4 * MAX_SKILL_CHARS:  # cannot be ≤ the limit in characters
            raise SkillSizeError(f"{SKILL_FILE} is over the {MAX_SKILL_CHARS:,}-character limit")
        data = path.read_bytes()
    except OSError as exc:
        raise SkillFormatError(f"cannot read: {exc.strerror or exc}") from None
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise SkillFormatError(f"not valid UTF-8 (byte {exc.start})") from None


def read_support_file(path: Path, label: str) -> str:
    """Read a support file as UTF-8 text, refusing files over 1 MiB and binary ones."""
    try:
        size = path.stat().st_size
        if size > MAX_SUPPORT_FILE_BYTES:
            raise SkillSizeError(
                f"{label} is {size:,} bytes; support files are limited to "
                f"{MAX_SUPPORT_FILE_BYTES:,} bytes"
            )
        data = path.read_bytes()
    except OSError as exc:
        raise SkillFormatError(f"cannot read {label}: {exc.strerror or exc}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SkillFormatError(f"{label} is a binary file ({size:,} bytes); not shown") from None
    check_text_size(text, label)
    return text


def resolve_support_path(folder: Path, file_path: str) -> Path:
    """The path of a support file, refused unless it stays inside the skill folder."""
    pure = support_path(file_path)
    try:
        base = folder.resolve(strict=True)
        target = base.joinpath(*pure.parts)
        resolved = target.resolve()
    except (OSError, RuntimeError) as exc:  # RuntimeError: a symlink loop
        raise SkillPathError(f"cannot resolve {file_path!r}: {exc}") from None
    if not resolved.is_relative_to(base):
        raise SkillPathError(f"file_path {file_path!r} points outside the skill folder")
    return target
