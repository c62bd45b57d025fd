"""The skills tools the model calls: `skills_list`, `skill_view`, `skill_manage`.

`SkillsTools(store, role, user_key=…)` is built per agent run (one turn, or
one background review) for the person it serves and with who is acting:

- ``primary`` (the foreground agent): sees the shared skills and this
  person's own; creates skills (they belong to this person); and patches,
  edits, deletes, writes and removes support files of this person's skills.
- ``background`` (this person's review and extraction): the same view;
  creates skills; patches, edits and writes support files of this person's
  skills, and only after reading that skill with `skill_view` in the same run;
  never deletes a skill or removes a file.

For both roles, shared skills (bundled, the operator's, promoted by an admin)
are read-only, and other people's skills do not exist; the store enforces that
under its lock. The model gets a new skill or a note to the operator instead.

One run may write at most `max_files` distinct files (default 5) and
`max_bytes` of content (default 64 KiB; the text the model sends with create,
edit, write_file and patch's new_string); a write past either is refused with
`SkillQuotaError`, so a single turn cannot fill the disk. Support files are
text under references/, templates/ or assets/, never scripts.

`handle()` returns a JSON string, ``{"success": true, ...}`` or
``{"success": false, "error": "..."}``; every `MemoryCoreError` (a refused
change, a bad argument, the safety scan, a failed write) becomes the latter.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from memory_core.errors import (
    MemoryCoreError,
    SkillArgumentError,
    SkillNotFoundError,
    SkillProtectedError,
    SkillQuotaError,
    UnsafeContentError,
)
from memory_core.skills.format import MODEL_WRITABLE_DIRS, SKILL_FILE, SUPPORT_DIRS
from memory_core.skills.store import GENERAL, Skill, SkillsStore
from memory_core.tool_args import decode_arguments
from memory_core.user_keys import check_user_key

Role = Literal["primary", "background"]
ROLES: tuple[Role, ...] = ("primary", "background")
ACTIONS = ("create", "patch", "edit", "delete", "write_file", "remove_file")
_PRIMARY_ONLY = frozenset({"delete", "remove_file"})
_READ_FIRST = frozenset({"patch", "edit", "write_file"})
_WRITES = frozenset({"create", "patch", "edit", "write_file"})
MAX_FILES_PER_RUN = 5
MAX_BYTES_PER_RUN = 64 * 1024
_PAST = {
    "create": "created",
    "patch": "patched",
    "edit": "rewritten",
    "delete": "deleted",
    "write_file": "file written",
    "remove_file": "file removed",
}


@dataclass(frozen=True)
class SkillChange:
    """One successful `skill_manage` call, for the review's summary line."""

    action: str
    name: str


def _function(
    name: str, description: str, properties: dict[str, Any], required: list[str]
) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


_S = {"type": "string"}
_SUPPORT = ", ".join(f"{d}/" for d in SUPPORT_DIRS)
_WRITABLE = ", ".join(f"{d}/" for d in MODEL_WRITABLE_DIRS)

SKILLS_LIST_SCHEMA = _function(
    "skills_list",
    "List the saved skills (procedures for recurring tasks): name, category, description, "
    "and whether you may edit it (this user's own skills) or it is shared (read-only).",
    {"category": {**_S, "description": "Only skills in this category."}},
    [],
)

SKILL_VIEW_SCHEMA = _function(
    "skill_view",
    "Load a skill's full SKILL.md (and the list of its support files), or one support file. "
    "Load a matching skill before acting on a task it covers.",
    {
        "name": {**_S, "description": "The skill's name."},
        "file_path": {
            **_S,
            "description": f"A support file to read instead of SKILL.md, under {_SUPPORT}",
        },
    },
    ["name"],
)

SKILL_MANAGE_SCHEMA = _function(
    "skill_manage",
    "Save how to do things, as skills: create one after a hard task succeeded, when the user "
    "corrected your method, or when they ask you to remember a procedure; patch one that "
    "proved wrong or incomplete (prefer patching over creating a near-duplicate). A skill you "
    "write belongs to the user you are talking with: only their conversations see it, until "
    "an admin shares it with everyone, so write methods, not personal details (those belong "
    "in memory). A SKILL.md starts with YAML front matter "
    "(name, description; optional tags, version) followed by a Markdown body: when to use, "
    "procedure, pitfalls, verification. Shared skills are read-only. Support files are text "
    f"under {_WRITABLE} (no scripts). One turn may write at most {MAX_FILES_PER_RUN} files "
    f"and {MAX_BYTES_PER_RUN // 1024} KB.",
    {
        "action": {"type": "string", "enum": list(ACTIONS)},
        "name": {**_S, "description": "Skill name: lowercase letters, digits, '.', '_', '-'."},
        "content": {**_S, "description": "create/edit: the full SKILL.md; write_file: the text."},
        "category": {**_S, "description": "create: optional category folder."},
        "old_string": {**_S, "description": "patch: exact text to replace, unique in the file."},
        "new_string": {**_S, "description": "patch: the replacement text (may be empty)."},
        "replace_all": {"type": "boolean", "description": "patch: replace every occurrence."},
        "file_path": {
            **_S,
            "description": f"patch/write_file/remove_file: a support file under {_WRITABLE}",
        },
    },
    ["action", "name"],
)

SKILL_TOOL_SCHEMAS = (SKILLS_LIST_SCHEMA, SKILL_VIEW_SCHEMA, SKILL_MANAGE_SCHEMA)
TOOL_NAMES = frozenset(s["function"]["name"] for s in SKILL_TOOL_SCHEMAS)


class SkillsTools:
    """The three skills tools for one agent run for `user_key`, acting as `role`."""

    def __init__(
        self,
        store: SkillsStore,
        role: Role = "primary",
        *,
        user_key: str,
        max_files: int = MAX_FILES_PER_RUN,
        max_bytes: int = MAX_BYTES_PER_RUN,
    ) -> None:
        """`user_key`: the person this run serves (`InvalidUserKeyError` if malformed)."""
        if role not in ROLES:
            raise ValueError(f"role must be one of {ROLES}, got {role!r}")
        self.store = store
        self.role: Role = role
        self.user_key = check_user_key(user_key)
        self._max_files = max_files
        self._max_bytes = max_bytes
        self._written: set[tuple[str, str]] = set()
        self._bytes_written = 0
        self._viewed: set[str] = set()
        self._changes: list[SkillChange] = []

    @property
    def changes(self) -> tuple[SkillChange, ...]:
        """The successful changes made through this object, in order."""
        return tuple(self._changes)

    def schemas(self) -> list[dict[str, Any]]:
        """The OpenAI function schemas of the three tools."""
        return copy.deepcopy(list(SKILL_TOOL_SCHEMAS))

    def handle(self, tool_name: str, arguments: Mapping[str, Any] | str) -> str:
        """Run one tool call; `arguments` is a mapping or the model's JSON text."""
        handlers: dict[str, Callable[[Mapping[str, Any]], dict[str, Any]]] = {
            "skills_list": self._list,
            "skill_view": self._view,
            "skill_manage": self._manage,
        }
        try:
            handler = handlers.get(tool_name)
            if handler is None:
                raise SkillArgumentError(f"unknown tool {tool_name!r}")
            result = handler(_as_mapping(arguments))
        except MemoryCoreError as exc:
            return _dumps(_failure(exc))
        return _dumps({"success": True, **result})

    def _list(self, args: Mapping[str, Any]) -> dict[str, Any]:
        category = _opt_str(args, "category")
        found = [
            self._describe(s)
            for s in self.store.skills(self.user_key)
            if category is None or (s.category or GENERAL) == category
        ]
        return {"count": len(found), "skills": found}

    def _view(self, args: Mapping[str, Any]) -> dict[str, Any]:
        name = _req_str(args, "name")
        file_path = _opt_str(args, "file_path")
        store, key = self.store, self.user_key
        skill = store.get(name, key)
        if file_path is not None and file_path != SKILL_FILE:
            content = store.read_text(name, file_path, user_key=key)
            self._viewed.add(name)
            return {"name": name, "file_path": file_path, "content": content}
        content = store.read_text(name, user_key=key)
        self._viewed.add(name)
        return {
            **self._describe(skill),
            "version": skill.document.version,
            "content": content,
            "files": list(store.support_files(name, user_key=key)),
        }

    def _manage(self, args: Mapping[str, Any]) -> dict[str, Any]:
        action = _req_str(args, "action")
        if action not in ACTIONS:
            raise SkillArgumentError(f"unknown action {action!r}; use one of {', '.join(ACTIONS)}")
        name = _req_str(args, "name")
        self._check_role(action, name)
        written = self._check_quota(action, name, args)
        result: dict[str, Any] = {"action": action, "name": name}
        detail = self._apply(action, name, args, result)
        if written is not None:
            self._written.add(written[0])
            self._bytes_written += written[1]
        if action == "create":
            self._viewed.add(name)
        self._changes.append(SkillChange(action, name))
        result["message"] = f"Skill {name!r} {_PAST[action]}{detail}"
        return result

    def _apply(
        self, action: str, name: str, args: Mapping[str, Any], result: dict[str, Any]
    ) -> str:
        """Do the change; fill `result` with extra fields and return a detail for the message."""
        store, key = self.store, self.user_key
        if action == "create":
            category = _opt_str(args, "category")
            skill = store.create(name, _req_str(args, "content"), category, user_key=key)
            result["category"] = skill.category or GENERAL
        elif action == "edit":
            store.edit(name, _req_str(args, "content"), user_key=key)
        elif action == "patch":
            count = store.patch(
                name,
                _req_str(args, "old_string"),
                _req_str(args, "new_string", allow_empty=True),
                user_key=key,
                replace_all=_opt_bool(args, "replace_all"),
                file_path=_opt_str(args, "file_path"),
            )
            result["replacements"] = count
            return f" ({count} replacement{'s' if count != 1 else ''})"
        elif action == "delete":
            archived = store.delete(name, user_key=key)
            result["archived_to"] = str(archived) if archived is not None else None
        else:
            file_path = _req_str(args, "file_path")
            result["file_path"] = file_path
            if action == "write_file":
                content = _req_str(args, "content", allow_empty=True)
                store.write_file(name, file_path, content, user_key=key)
            else:
                store.remove_file(name, file_path, user_key=key)
            return f": {file_path}"
        return ""

    def _check_quota(
        self, action: str, name: str, args: Mapping[str, Any]
    ) -> tuple[tuple[str, str], int] | None:
        """The file and byte count a write would add; refused past this run's limits."""
        if action not in _WRITES:
            return None
        path = _opt_str(args, "file_path") if action in ("patch", "write_file") else None
        text = args.get("new_string" if action == "patch" else "content")
        size = len(text.encode("utf-8", "surrogatepass")) if isinstance(text, str) else 0
        file = (name, path or SKILL_FILE)
        new_file = file not in self._written
        if new_file and len(self._written) >= self._max_files:
            raise SkillQuotaError(
                f"this turn has already written {len(self._written)} skill files, the most one "
                "turn may; finish in a later turn"
            )
        if self._bytes_written + size > self._max_bytes:
            raise SkillQuotaError(
                f"this write ({size:,} bytes) would take this turn past {self._max_bytes:,} "
                f"bytes of skill content ({self._bytes_written:,} written); "
                "write less, or finish in a later turn"
            )
        return file, size

    def _check_role(self, action: str, name: str) -> None:
        if self.role != "background":
            return
        if action in _PRIMARY_ONLY:
            raise SkillProtectedError(
                f"the background review may not {action.replace('_', ' ')}; "
                "patch the skill instead, or leave it"
            )
        if action in _READ_FIRST and name not in self._viewed:
            raise SkillProtectedError(
                f"read skill {name!r} with skill_view before changing it (action {action!r})"
            )

    def _describe(self, skill: Skill) -> dict[str, Any]:
        return {
            "name": skill.name,
            "category": skill.category or GENERAL,
            "description": skill.description,
            "tags": list(skill.document.tags),
            "owner": "shared" if skill.owner == "operator" else "this user",
            "editable": skill.owner == "user",
        }


def _as_mapping(arguments: Mapping[str, Any] | str) -> Mapping[str, Any]:
    return decode_arguments(arguments, SkillArgumentError)


def _req_str(args: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise SkillArgumentError(f"{key!r} is required and must be a string")
    if not value and not allow_empty:
        raise SkillArgumentError(f"{key!r} must not be empty")
    return value


def _opt_str(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise SkillArgumentError(f"{key!r} must be a string")
    return value


def _opt_bool(args: Mapping[str, Any], key: str) -> bool:
    value = args.get(key, False)
    if value is None:
        return False
    if not isinstance(value, bool):
        raise SkillArgumentError(f"{key!r} must be true or false")
    return value


def _failure(exc: MemoryCoreError) -> dict[str, Any]:
    payload: dict[str, Any] = {"success": False, "error": str(exc)}
    if isinstance(exc, UnsafeContentError):
        payload["pattern_id"] = exc.finding.pattern_id
    elif isinstance(exc, SkillNotFoundError):
        payload["hint"] = "skills_list shows the skills and skill_view lists a skill's files"
    return payload


def _dumps(payload: dict[str, Any]) -> str:
    return json.dumps(payload, ensure_ascii=False)
