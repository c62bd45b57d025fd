"""The operator's commands with MNEMO_DATABASE_URL set: the same output, every store on
PostgreSQL, nothing written under home but the data directory's lock."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from gateway.commands.choices import CHOICES_DOCUMENT, PendingChoices
from memory_core import StorageSettings, open_storage
from memory_core.sessions.jobs import JobRequest

ADA, BOB = "telegram-1", "telegram-2"


def record(user: str, session: str, content: str, ts: int, role: str = "user") -> str:
    return json.dumps(
        {
            "session": session, "user": user, "platform": "telegram", "chat": user,
            "chat_type": "private", "role": role, "content": content, "timestamp": ts,
        }
    )  # fmt: skip


@pytest.fixture
def env(tmp_path: Path, pg_database: str) -> dict[str, str]:
    skills = tmp_path / "skills" / "rowing"
    skills.mkdir(parents=True)
    (skills / "SKILL.md").write_text("---\nname: rowing\ndescription: Oars.\n---\n# Row\n")
    return {
        "MNEMO_HOME": str(tmp_path / "home"),
        "MNEMO_DATABASE_URL": pg_database,
        "MNEMO_SKILLS_DIR": str(tmp_path / "skills"),
    }


def mnemo(env: dict[str, str], *args: str, input: str | None = None) -> Result:
    return CliRunner().invoke(main, list(args), env=env, input=input, catch_exceptions=False)


def files_under(home: Path) -> list[str]:
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.name != "mnemo.lock")


def test_sessions_import_search_export_check_delete(env: dict[str, str], tmp_path: Path) -> None:
    data = tmp_path / "h.jsonl"
    lines = [
        record(ADA, "trip-1", "we booked the ferry", 1714557600),
        record(ADA, "trip-1", "The ferry leaves at nine", 1714557660, role="assistant"),
        record(BOB, "x", "my private ferry secret", 1714557700),
    ]
    data.write_text("\n".join(lines) + "\n", encoding="utf-8")
    imported = mnemo(env, "sessions", "import", str(data))
    assert imported.exit_code == 0, imported.output
    assert "imported 3 messages (2 new sessions, 0 extended, 0 already present)" in imported.output
    found = mnemo(env, "sessions", "search", "ferry", "--user", ADA, "--json")
    hits = json.loads(found.stdout)
    assert [h["session"] for h in hits] == ["trip-1"] and ">>>ferry<<<" in hits[0]["snippet"]
    exported = mnemo(env, "sessions", "export", "--user", ADA)
    assert [json.loads(line)["content"] for line in exported.stdout.splitlines()] == [
        "we booked the ferry",
        "The ferry leaves at nine",
    ]
    checked = mnemo(env, "sessions", "check")
    assert checked.exit_code == 0 and "ok   message words" in checked.stdout
    assert checked.stdout.endswith("session history is consistent\n")
    again = mnemo(env, "sessions", "import", str(data))
    assert "imported 0 messages" in again.output and "3 already present" in again.output
    deleted = mnemo(env, "sessions", "delete", "--user", ADA, "--yes")
    assert deleted.stdout == f"deleted 1 sessions and 2 messages of {ADA}\n"
    assert (
        json.loads(mnemo(env, "sessions", "search", "ferry", "--user", ADA, "--json").stdout) == []
    )
    assert files_under(Path(env["MNEMO_HOME"])) == []  # no state.db, no memory file


def test_memory_skills_users_and_jobs(env: dict[str, str], tmp_path: Path) -> None:
    added = mnemo(env, "memory", "add", "--user", ADA, "Ada rows on the lake")
    assert added.exit_code == 0, added.output
    assert added.stdout.startswith("added · ")
    shown = mnemo(env, "memory", "show", "--user", ADA, "--json")
    assert json.loads(shown.stdout)["entries"] == ["Ada rows on the lake"]
    undone = mnemo(env, "memory", "undo", "--user", ADA)
    assert undone.exit_code == 0 and undone.stdout.startswith("undid #1 (add) as #2")
    assert json.loads(mnemo(env, "memory", "show", "--user", ADA, "--json").stdout)["entries"] == []
    mnemo(env, "memory", "add", "--user", BOB, "Bob grows quinces")
    listed = mnemo(env, "skills", "list")
    assert listed.exit_code == 0 and "rowing" in listed.stdout and "operator" in listed.stdout
    people = mnemo(env, "users", "list", "--json")
    assert [p["user_key"] for p in json.loads(people.stdout)] == [ADA, BOB]
    asyncio.run(_ask_a_review(env, BOB))  # a running replica asked for Bob's review
    assert asyncio.run(_open_jobs(env)) == [("review", BOB)]
    asyncio.run(_offer(env, BOB, "Forget: Bob grows quinces"))  # and offered him a choice
    asyncio.run(_offer(env, ADA, "Keep: Ada rows"))
    assert "quinces" in asyncio.run(_shared(env, CHOICES_DOCUMENT))
    erased = mnemo(env, "users", "erase", BOB, "--yes")
    assert erased.exit_code == 0, erased.output
    assert asyncio.run(_open_jobs(env)) == []  # his job went with him, on every replica
    choices = asyncio.run(_shared(env, CHOICES_DOCUMENT))
    assert "quinces" not in choices and "Ada rows" in choices  # his offer too, not hers
    assert [p["user_key"] for p in json.loads(mnemo(env, "users", "list", "--json").stdout)] == [
        ADA
    ]
    jobs = mnemo(env, "jobs", "--json")
    assert jobs.exit_code == 0 and json.loads(jobs.stdout)["pending_extractions"] == []
    assert files_under(Path(env["MNEMO_HOME"])) == []


def _settings(env: dict[str, str]) -> StorageSettings:
    home = Path(env["MNEMO_HOME"])
    return StorageSettings(home=home, skills_dir=home / "none", url=env["MNEMO_DATABASE_URL"])


async def _ask_a_review(env: dict[str, str], user_key: str) -> None:
    async with open_storage(_settings(env)) as storage:
        request = JobRequest("review", user_key, user_key=user_key, delay=600.0)
        assert await storage.jobs.enqueue(request)


async def _open_jobs(env: dict[str, str]) -> list[tuple[str, str]]:
    async with open_storage(_settings(env)) as storage:
        return [(job.kind, job.key) for job in await storage.jobs.open_jobs()]


async def _offer(env: dict[str, str], user_key: str, label: str) -> None:
    async with open_storage(_settings(env)) as storage:
        PendingChoices.over(storage.document).offer(user_key, "memory", [(label, "1")], "v1")


async def _shared(env: dict[str, str], name: str) -> str:
    async with open_storage(_settings(env)) as storage:
        return storage.document(name).read() or ""
