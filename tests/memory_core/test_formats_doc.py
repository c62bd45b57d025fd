"""docs/formats.md: its examples go through the real importer and match a real export.

The examples are read from the document itself, so a change of the format that
is not written down there fails here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from memory_core import (
    FileMemoryStore,
    Operation,
    Origin,
    PendingChanges,
    PersonData,
    Proposal,
    SessionStore,
    SkillsStore,
)
from memory_core.sessions import ImportFormatError, SessionDB
from memory_core.sessions.jsonl import OPTIONAL, REQUIRED

DOC = Path(__file__).resolve().parents[2] / "docs" / "formats.md"
KEY = "telegram-12345"
MESSAGE_PREFIX = '{"session": '  # the filter the document gives for the message lines


def example(name: str) -> list[str]:
    """The lines of the ```jsonl block after ``<!-- example: name -->``."""
    found = re.findall(rf"<!-- example: {name} -->\n```jsonl\n(.*?)```", DOC.read_text(), re.S)
    assert len(found) == 1, f"docs/formats.md has {len(found)} '{name}' examples"
    return found[0].splitlines()


def shape(value: object) -> object:
    """The keys of a JSON value, nested (what the document promises), not its values."""
    if isinstance(value, dict):
        return {k: shape(v) for k, v in value.items()}
    return None


def test_the_documented_keys_are_the_importers() -> None:
    table = re.findall(r"^\| (`.+?`) \| (required|optional) \|", DOC.read_text(), re.M)
    documented = {
        kind: {k for cell, k_ in table if k_ == kind for k in re.findall(r"`(\w+)`", cell)}
        for kind in ("required", "optional")
    }
    assert documented == {"required": set(REQUIRED), "optional": set(OPTIONAL)}


def test_the_session_example_imports_once(tmp_path: Path) -> None:
    lines = example("sessions")
    with SessionDB(tmp_path / "state.db") as db:
        first = db.import_lines(lines)
        again = db.import_lines(lines)
        exported = [json.loads(line) for line in db.export_lines(KEY)]
    assert (first.lines, first.sessions_created, first.messages_inserted) == (3, 2, 3)
    assert (again.messages_inserted, again.messages_skipped, again.sessions_extended) == (0, 3, 2)
    assert [m["content"] for m in exported] == [
        "Which ferry goes to the island?",
        "The 10:15 from pier 3.",
    ]  # the other person's session is not in this one's export
    assert exported[1]["timestamp"] == "2024-05-01T09:35:10+00:00"  # epoch seconds, as UTC


def test_a_line_off_the_format_is_refused_by_number(tmp_path: Path) -> None:
    lines = example("sessions")
    bad = json.loads(lines[1]) | {"mood": "sunny"}
    with SessionDB(tmp_path / "state.db") as db:
        with pytest.raises(ImportFormatError, match=r"line 2.*unknown key 'mood'"):
            db.import_lines([lines[0], json.dumps(bad), lines[2]])
        assert list(db.export_lines(KEY)) == []  # all or nothing


def test_the_person_examples_message_lines_import_after_the_documented_filter(
    tmp_path: Path,
) -> None:
    lines = example("person")
    with SessionDB(tmp_path / "state.db") as db:
        with pytest.raises(ImportFormatError, match="line 1"):
            db.import_lines(lines)  # the memory lines are not the import format
        result = db.import_lines([line for line in lines if line.startswith(MESSAGE_PREFIX)])
    assert (result.sessions_created, result.messages_inserted) == (1, 2)


async def test_a_real_export_has_the_documented_lines_in_the_documented_order(
    tmp_path: Path,
) -> None:
    with SessionDB(tmp_path / "state.db") as db:
        db.import_lines(example("sessions"))
    memory = FileMemoryStore(tmp_path, user_char_limit=80)
    review = Origin("review", session_id=1)
    memory.apply("user", KEY, [Operation("add", content="r" * 40)], review)
    memory.apply("user", KEY, [Operation("add", content="Prefers the morning ferry")])
    memory.apply("user", KEY, [Operation("add", content="n" * 40)], review)  # archives r…
    PendingChanges(memory).stage(
        KEY, [Proposal("add", "Lives near pier 3", None, "why")], review, "b"
    )
    (tmp_path / "skills").mkdir()
    skills = SkillsStore(tmp_path / "skills", tmp_path / "manifest.json")
    async with SessionStore(tmp_path / "state.db") as sessions:
        out = tmp_path / "export.jsonl"
        await PersonData(memory, skills, sessions).export(KEY, out)
    real = [json.loads(line) for line in out.read_text().splitlines()]
    documented = [json.loads(line) for line in example("person")]

    def kind(record: dict[str, object]) -> str:
        return next((k for k in record if k.startswith("memory_")), "message")

    def kinds(records: list[dict[str, object]]) -> list[str]:
        return [k for i, k in enumerate(map(kind, records)) if i == 0 or k != kind(records[i - 1])]

    assert kinds(real) == kinds(documented) == [
        "memory_entry", "memory_change", "memory_pending", "memory_archived", "message"
    ]  # fmt: skip
    for record in real:
        (twin,) = [d for d in documented if kind(d) == kind(record)][:1]
        assert shape(record) == shape(twin), kind(record)
        assert record["user"] == KEY
    assert all(
        line.startswith(MESSAGE_PREFIX) == (kind(record) == "message")
        for line, record in zip(out.read_text().splitlines(), real, strict=True)
    )
