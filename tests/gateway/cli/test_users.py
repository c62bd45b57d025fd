"""`mnemo users list|export|erase` through the real click commands, on real stores."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from memory_core import FileMemoryStore, Operation, SkillsStore

SKILLS = Path(__file__).resolve().parents[3] / "skills"
ADA, BOB = "telegram-1", "telegram-2"


def record(user: str, content: str, session: str, ts: int) -> str:
    return json.dumps(
        {
            "session": session, "user": user, "platform": "telegram", "chat": user,
            "chat_type": "private", "role": "user", "content": content, "timestamp": ts,
        }
    )  # fmt: skip


def mnemo(*args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), input=input, catch_exceptions=False)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("MNEMO_SKILLS_DIR", str(SKILLS))
    root = Path(os.environ["MNEMO_HOME"])
    memory = FileMemoryStore(root)
    memory.apply("user", ADA, [Operation("add", content="Ada rows on the xylocarpus lake")])
    memory.apply("user", BOB, [Operation("add", content="Bob grows quinceberries")])
    skills = SkillsStore(SKILLS, root / "skills-manifest.json", private_dir=root / "skills-private")
    skills.create(
        "rowing", "---\nname: rowing\ndescription: d\n---\nxylocarpus drills\n", user_key=ADA
    )
    lines = [
        record(ADA, "the xylocarpus regatta", "a1", 1714557600),
        record(ADA, "more xylocarpus", "a2", 1714557700),
        record(BOB, "quinceberries jam", "b1", 1714557800),
    ]
    data = tmp_path / "h.jsonl"
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert mnemo("sessions", "import", str(data)).exit_code == 0
    return root


def holding(root: Path, word: str) -> list[Path]:
    return [p for p in root.rglob("*") if p.is_file() and word.encode() in p.read_bytes()]


def test_list_shows_every_person_with_counts(home: Path) -> None:
    result = mnemo("users", "list")
    assert result.exit_code == 0, result.output
    assert result.output.splitlines() == [
        f"{ADA}: 1 memory entry, 2 sessions (2 messages) and 1 skill",
        f"{BOB}: 1 memory entry, 1 session (1 message) and 0 skills",
    ]


def test_export_writes_one_private_file(home: Path) -> None:
    result = mnemo("users", "export", ADA)
    assert result.exit_code == 0, result.output
    path = Path(result.output.strip().rsplit(" to ", 1)[1])
    assert path.parent == home / "exports" / ADA
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    records = [json.loads(line) for line in path.read_text().splitlines()]
    assert records[0] == {"user": ADA, "memory_entry": "Ada rows on the xylocarpus lake"}
    assert records[1]["memory_change"]["after"] == "Ada rows on the xylocarpus lake"
    assert [r["content"] for r in records[2:]] == ["the xylocarpus regatta", "more xylocarpus"]


def test_erase_yes_removes_every_byte_of_one_person(home: Path) -> None:
    assert holding(home, "xylocarpus")
    mnemo("users", "export", ADA)  # an export is erased with the rest

    result = mnemo("users", "erase", ADA, "--yes")

    assert result.exit_code == 0, result.output
    assert result.output.strip() == (
        f"erased 1 memory entry, 2 sessions (2 messages) and 1 skill of {ADA}"
    )
    assert holding(home, "xylocarpus") == []
    assert holding(home, "quinceberries")  # Bob untouched
    assert mnemo("users", "list").output.splitlines() == [
        f"{BOB}: 1 memory entry, 1 session (1 message) and 0 skills"
    ]
    search = mnemo("sessions", "search", "xylocarpus", "--user", ADA)
    assert "xylocarpus" not in search.output


def test_erase_asks_first_and_no_keeps_everything(home: Path) -> None:
    refused = mnemo("users", "erase", ADA, input="n\n")
    assert refused.exit_code == 1
    assert "Erase 1 memory entry, 2 sessions (2 messages) and 1 skill of telegram-1?" in (
        refused.output
    )
    assert holding(home, "xylocarpus")
    agreed = mnemo("users", "erase", ADA, input="y\n")
    assert agreed.exit_code == 0
    assert holding(home, "xylocarpus") == []


def test_a_malformed_key_is_one_line_and_exit_2(home: Path) -> None:
    result = CliRunner().invoke(main, ["users", "erase", "../etc", "--yes"])
    assert result.exit_code == 2
    assert "invalid user key" in result.output
    assert holding(home, "xylocarpus")


def test_erase_beside_a_running_bot_refuses_in_one_line_and_keeps_everything(
    home: Path,
) -> None:
    """A running bot could write the person back from a turn or review in flight."""
    from gateway.service import instance_lock

    with instance_lock(home):  # what `mnemo run` holds while it serves this directory
        result = mnemo("users", "erase", ADA, "--yes")
    assert result.exit_code == 1
    line = result.output.strip()
    assert "\n" not in line and "a running mnemo serves" in line and "/forget all" in line
    assert holding(home, "xylocarpus")  # nothing was erased
    again = mnemo("users", "erase", ADA, "--yes")  # the bot stopped: now it goes through
    assert again.exit_code == 0 and holding(home, "xylocarpus") == []
