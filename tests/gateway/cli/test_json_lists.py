"""Every `mnemo` command that prints a list prints one JSON document with ``--json``.

Real stores in a temporary data dir; each command through the real click group.
`json.loads` of the whole stdout fails if anything else is printed beside it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from memory_core import FileMemoryStore, Operation, Origin, SkillsStore
from memory_core.sessions import SessionDB

ADA, BOB = "telegram-1", "telegram-2"
ESC = "\x1b[31m"  # a terminal escape held in stored text


def record(user: str, content: str, session: str, ts: int) -> str:
    return json.dumps(
        {
            "session": session, "user": user, "platform": "telegram", "chat": user[9:],
            "chat_type": "private", "role": "user", "content": content, "timestamp": ts,
        }
    )  # fmt: skip


class Home:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.data = root / "data"
        self.skills = root / "skills"
        self.skills.mkdir()
        self.config = root / "mnemo.yaml"
        self.config.write_text(f"home: {self.data}\nskills:\n  dir: {self.skills}\n")

    def mnemo(self, *args: str) -> Result:
        return CliRunner().invoke(
            main, ["--config", str(self.config), *args], env={"MNEMO_HOME": ""}
        )

    def json(self, *args: str, exit_code: int = 0) -> object:
        result = self.mnemo(*args, "--json")
        assert result.exit_code == exit_code, result.output
        return json.loads(result.stdout)


@pytest.fixture
def empty(tmp_path: Path) -> Home:
    return Home(tmp_path)


@pytest.fixture
def home(empty: Home) -> Home:
    memory = FileMemoryStore(empty.data)
    memory.apply("user", ADA, [Operation("add", content="Ada rows on the lake")])
    memory.apply("user", ADA, [Operation("add", content=f"Ada {ESC}red")], Origin("review", 1))
    memory.apply("user", BOB, [Operation("add", content="Bob grows quinces")])
    shared = empty.skills / "deploy"
    shared.mkdir()
    (shared / "SKILL.md").write_text("---\nname: deploy\ndescription: Ship it.\n---\nSteps\n")
    store = SkillsStore(
        empty.skills, empty.data / "skills-manifest.json", private_dir=empty.data / "skills-private"
    )
    store.create("rowing", "---\nname: rowing\ndescription: Drills.\n---\ndrills\n", user_key=ADA)
    with SessionDB(empty.data / "state.db") as db:
        db.import_lines(
            [
                record(ADA, "the ferry to the island", "a1", 1714557600),
                record(ADA, "another ferry", "a2", 1714557700),
                record(BOB, "quince jam", "b1", 1714557800),
            ]
        )
    return empty


def test_users_list(home: Home, empty: Home) -> None:
    assert home.json("users", "list") == [
        {"user_key": ADA, "entries": 2, "sessions": 2, "messages": 2, "skills": 1},
        {"user_key": BOB, "entries": 1, "sessions": 1, "messages": 1, "skills": 0},
    ]


def test_users_list_of_nobody(empty: Home) -> None:
    assert empty.json("users", "list") == []


def test_skills_list(home: Home) -> None:
    listed = home.json("skills", "list")
    assert isinstance(listed, list)
    by_name = {s["name"]: s for s in listed}
    assert by_name["deploy"] | {"folder": None} == {
        "name": "deploy", "category": "general", "owner": "operator", "user_key": None,
        "description": "Ship it.", "folder": None,
    }  # fmt: skip
    rowing = by_name["rowing"]
    assert (rowing["owner"], rowing["user_key"], rowing["description"]) == ("user", ADA, "Drills.")
    assert Path(rowing["folder"]).is_relative_to(home.data / "skills-private" / ADA)


def test_skills_list_of_an_empty_folder(empty: Home) -> None:
    assert empty.json("skills", "list") == []


def test_skills_check_lists_each_problem(home: Home) -> None:
    assert home.json("skills", "check") == {"dir": str(home.skills), "valid": 2, "problems": []}
    broken = home.skills / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("no front matter\n")
    result = home.mnemo("skills", "check", "--json")
    assert result.exit_code == 1
    report = json.loads(result.stdout)
    (problem,) = report["problems"]
    assert problem["path"] == str(broken / "SKILL.md") and problem["message"]
    assert result.stderr == f"mnemo: 1 problem in {home.skills}\n"


def test_memory_show(home: Home) -> None:
    shown = home.json("memory", "show", "--user", ADA)
    assert isinstance(shown, dict)
    assert shown["target"] == "user"
    assert shown["entries"] == ["Ada rows on the lake", f"Ada {ESC}red"]
    assert "\x1b" not in home.mnemo("memory", "show", "--user", ADA, "--json").stdout


def test_memory_history_is_one_list_newest_first(home: Home) -> None:
    changes = home.json("memory", "history", "--user", ADA)
    assert isinstance(changes, list)
    assert [(c["action"], c["after"], c["origin"]["kind"]) for c in changes] == [
        ("add", f"Ada {ESC}red", "review"),
        ("add", "Ada rows on the lake", "operator"),
    ]
    assert home.json("memory", "history", "--user", "telegram-9") == []


def test_jobs(home: Home) -> None:
    report = home.json("jobs")
    assert isinstance(report, dict)
    assert report["pending_extractions"] == [] and report["reviews_due"] == []
    assert report["scheduled"]["quiet_extraction"]["idle_minutes"] == 120


def test_sessions_search_sees_only_the_persons_history(home: Home) -> None:
    hits = home.json("sessions", "search", "ferry", "--user", ADA)
    assert isinstance(hits, list)
    assert sorted(h["session"] for h in hits) == ["a1", "a2"]
    assert home.json("sessions", "search", "ferry", "--user", BOB) == []
