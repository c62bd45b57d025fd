"""Stored text reaches the operator's terminal with its control sequences made visible.

Memory entries, session snippets and skills can hold whatever a person, the
model or a hand edit put there. Printed raw, an ESC sequence can clear the
screen, retitle the window or fake earlier output; a bidi override reorders
what follows. Every `mnemo` command that prints stored text shows them escaped
(ESC as ``\\x1b``), keeps the newlines its format uses, CJK and emoji as they
are, and keeps `--json` output parseable to the very same text.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
import yaml
from click.testing import CliRunner, Result

from gateway.cli import main
from gateway.cli.base import json_text, visible
from memory_core.file_memory.store import FileMemoryStore

ALICE = "telegram-12345"
HOSTILE = "tea\x1b[2J\x1b]0;owned\x07 \u202eevil\u202c \x9b31m \x7f end\r over 小岛 👩\u200d💻"
SHOWN = (
    "tea\\x1b[2J\\x1b]0;owned\\x07 \\u202eevil\\u202c \\x9b31m \\x7f end\\r over 小岛 👩\u200d💻"
)
RAW = ("\x1b", "\x07", "\x9b", "\x7f", "\r", "\u202e", "\u202c")


def assert_safe(text: str) -> None:
    for char in RAW:
        assert char not in text, f"raw {char!r} reached the terminal"


def test_visible_escapes_controls_and_keeps_the_rest() -> None:
    assert visible(HOSTILE) == SHOWN
    assert visible("a\nb\tc") == "a\\nb\\tc"
    assert visible("a\nb\tc\x00", keep="\n\t") == "a\nb\tc\\x00"
    assert visible("\u2066x\u2069 \u200f \u061c \u2028 \ud800") == (
        "\\u2066x\\u2069 \\u200f \\u061c \\u2028 \\ud800"
    )
    plain = "Ünïcödé 日本語 한국어 العربية 🙂 \\ ok"
    assert visible(plain) == plain


def test_json_text_escapes_what_json_dumps_leaves_raw_and_round_trips() -> None:
    payload = {"text": HOSTILE + "\ud800", "list": ["\x85", "\u2029"]}
    text = json_text(payload, indent=2)
    assert_safe(text)
    for char in ("\x85", "\u2029", "\ud800"):
        assert char not in text
    assert "小岛 👩\u200d💻" in text
    assert json.loads(text) == payload


# memory


def memory(home: Path, *args: str) -> Result:
    return CliRunner().invoke(main, ["memory", *args], env={"MNEMO_HOME": str(home)})


def seed_profile(home: Path, *entries: str) -> None:
    path = FileMemoryStore(home).path("user", ALICE)
    path.parent.mkdir(parents=True)
    path.write_text("\n§\n".join(entries) + "\n", encoding="utf-8")


def test_memory_show_makes_controls_visible(tmp_path: Path) -> None:
    seed_profile(tmp_path, HOSTILE, "line one\nline two\twith a tab")
    result = memory(tmp_path, "show", "--user", ALICE)
    assert result.exit_code == 0, result.output
    assert_safe(result.stdout)
    assert f"  1. {SHOWN}\n" in result.stdout
    assert "  2. line one\n     line two\twith a tab\n" in result.stdout


def test_memory_show_json_is_safe_and_exact(tmp_path: Path) -> None:
    seed_profile(tmp_path, HOSTILE)
    result = memory(tmp_path, "show", "--user", ALICE, "--json")
    assert result.exit_code == 0, result.output
    assert_safe(result.stdout)
    assert json.loads(result.stdout)["entries"] == [HOSTILE.replace("\r", "\r")]


def test_memory_refusal_quoting_stored_text_is_one_visible_line(tmp_path: Path) -> None:
    seed_profile(tmp_path, "tea\x1b[2J one", "tea\x1b[2J two")
    result = memory(tmp_path, "remove", "--user", ALICE, "tea\x1b[2J")
    assert result.exit_code == 1
    assert_safe(result.stderr)
    assert result.stderr.count("\n") == 1 and "tea\\x1b[2J" in result.stderr


# sessions


def record(**fields: object) -> str:
    base = {
        "session": "s-\x1b[31m", "user": "telegram-1", "platform": "telegram",
        "chat": "c\u202e1", "chat_type": "private", "role": "user",
        "content": f"ferry {HOSTILE}", "timestamp": "2024-05-01T10:00:00+00:00",
    }  # fmt: skip
    base.update(fields)
    return json.dumps(base, ensure_ascii=False)


@pytest.fixture
def history(tmp_path: Path) -> Path:
    path = tmp_path / "history.jsonl"
    path.write_text(record() + "\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["sessions", "import", str(path)])
    assert result.exit_code == 0, result.output
    return Path(os.environ["MNEMO_HOME"])


def test_sessions_search_makes_controls_visible(history: Path) -> None:
    result = CliRunner().invoke(main, ["sessions", "search", "ferry", "--user", "telegram-1"])
    assert result.exit_code == 0, result.output
    assert_safe(result.stdout)
    assert "session s-\\x1b[31m" in result.stdout and "chat c\\u202e1" in result.stdout
    assert "tea\\x1b[2J" in result.stdout and "小岛 👩\u200d💻" in result.stdout


def test_sessions_search_json_is_safe_and_exact(history: Path) -> None:
    result = CliRunner().invoke(
        main, ["sessions", "search", "ferry", "--user", "telegram-1", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert_safe(result.stdout)
    (hit,) = json.loads(result.stdout)
    assert hit["session"] == "s-\x1b[31m" and hit["chat_id"] == "c\u202e1"
    assert "\x1b[2J" in hit["snippets"][0]["text"]


def test_sessions_export_to_a_terminal_is_safe_and_exact(history: Path) -> None:
    result = CliRunner().invoke(main, ["sessions", "export", "--user", "telegram-1"])
    assert result.exit_code == 0, result.output
    assert_safe(result.stdout)
    (line,) = result.stdout.splitlines()
    assert json.loads(line)["content"] == f"ferry {HOSTILE}"


# skills


def skills(tmp_path: Path, *args: str) -> Result:
    config = tmp_path / "mnemo.yaml"
    config.write_text(f"home: {tmp_path / 'home'}\nskills:\n  dir: {tmp_path / 'skills'}\n")
    return CliRunner().invoke(
        main, ["--config", str(config), "skills", *args], env={"MNEMO_HOME": ""}
    )


def put_skill(tmp_path: Path, description: str, body: str) -> None:
    folder = tmp_path / "skills" / "brew"
    folder.mkdir(parents=True)
    front = yaml.safe_dump({"name": "brew", "description": description}, allow_unicode=True)
    text = f"---\n{front}---\n{body}\n"
    (folder / "SKILL.md").write_text(text, encoding="utf-8")


def test_skills_list_and_show_make_controls_visible(tmp_path: Path) -> None:
    put_skill(tmp_path, f"Brews {HOSTILE}", f"# Brew\n1. Step {HOSTILE}\n\tindented")
    listed = skills(tmp_path, "list")
    assert listed.exit_code == 0, listed.output
    assert_safe(listed.output)
    assert "Brews tea\\x1b" in listed.stdout and "小岛 👩\u200d💻" in listed.stdout
    shown = skills(tmp_path, "show", "brew")
    assert shown.exit_code == 0, shown.output
    assert_safe(shown.output)
    assert f"1. Step {SHOWN}\n\tindented" in shown.stdout
