"""`mnemo sessions delete|export|search --user KEY` refuse a key the bot could never produce.

The key is checked with memory_core's user key rules before anything is opened,
asked or written: one line on stderr, exit 2.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.cli import main

COMMANDS = {
    "delete": ["sessions", "delete", "--yes", "--user"],
    "delete-asking": ["sessions", "delete", "--user"],
    "export": ["sessions", "export", "--user"],
    "search": ["sessions", "search", "ferry", "--user"],
}
BAD_KEYS = ["../../etc", "Telegram-1", "telegram-%2f", "telegram", "telegram-a-b", "x" * 500]


@pytest.fixture
def home(tmp_path: Path) -> Path:
    line = {
        "session": "s1", "user": "telegram-1", "platform": "telegram", "chat": "c1",
        "chat_type": "private", "role": "user", "content": "we booked the ferry",
        "timestamp": 1714557600,
    }  # fmt: skip
    path = tmp_path / "history.jsonl"
    path.write_text(json.dumps(line) + "\n", encoding="utf-8")
    assert CliRunner().invoke(main, ["sessions", "import", str(path)]).exit_code == 0
    return Path(os.environ["MNEMO_HOME"])


@pytest.mark.parametrize("command", list(COMMANDS))
@pytest.mark.parametrize(
    "key", BAD_KEYS, ids=["traversal", "upper", "lower-escape", "bare", "dash", "long"]
)
def test_a_malformed_key_is_one_line_and_exit_2(home: Path, command: str, key: str) -> None:
    before = (home / "state.db").read_bytes()
    result = CliRunner().invoke(main, [*COMMANDS[command], key], input="y\n")
    assert result.exit_code == 2, result.output
    assert result.stdout == ""  # no prompt, no output
    (line,) = result.stderr.splitlines()
    assert line.startswith("mnemo: invalid user key ") or line.startswith("mnemo: user key is too")
    assert len(line) < 200
    assert (home / "state.db").read_bytes() == before


def test_a_control_sequence_in_a_bad_key_is_not_echoed_raw(home: Path) -> None:
    result = CliRunner().invoke(main, ["sessions", "search", "x", "--user", "a-\x1b[2J"])
    assert result.exit_code == 2
    assert "\x1b" not in result.stderr and "\\x1b[2J" in result.stderr


@pytest.mark.parametrize("command", ["delete", "export", "search"])
def test_a_well_formed_key_still_works(home: Path, command: str) -> None:
    result = CliRunner().invoke(main, [*COMMANDS[command], "telegram-1"])
    assert result.exit_code == 0, result.output
