"""`mnemo jobs` in a real process: what is scheduled (from the configuration) and what is
pending (from state.db, filled here through the same SessionStore the bot writes with)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memory_core.sessions import CounterUpdate, NewMessage, SessionOrigin, SessionStore
from tests.timing import scaled

MNEMO = Path(sys.executable).parent / "mnemo"
HOSTILE_KEY = "telegram-9\x1b[2J\u202eevil"
SHOWN_KEY = "telegram-9\\x1b[2J\\u202eevil"
CONFIG = """
sessions:
  idle_minutes: 30
  idle_reset: true
memory:
  nudge_interval: 5
skills:
  creation_nudge_interval: 0
"""


def where(user: str) -> SessionOrigin:
    return SessionOrigin(f"telegram:private:{user}", "telegram", user, user, "private")


def said(text: str, at: float) -> NewMessage:
    return NewMessage("user", text, at, key=f"{text}:{at}")


def mnemo(home: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {"MNEMO_HOME": str(home), "PATH": "/usr/bin:/bin"}
    return subprocess.run(
        [str(MNEMO), *args], capture_output=True, text=True, env=env, cwd=cwd, timeout=scaled(60)
    )


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


async def fill(home: Path, now: float) -> dict[str, int]:
    """One ended session due for extraction, one quiet open session with a hostile user
    key, one active session due for a review."""
    home.mkdir(parents=True, exist_ok=True)
    async with SessionStore(home / "state.db", clock=lambda: now - 3600) as store:
        ended = await store.append_messages(
            origin=where("telegram-1"),
            messages=[said("I moved to Lisbon", now - 7200), said("and I cycle", now - 7100)],
        )
        await store.end_session(ended.session_id, "new")
        quiet = await store.append_message(
            origin=where(HOSTILE_KEY), message=said("hello", now - 3 * 3600)
        )
        busy = await store.append_messages(
            origin=where("telegram-2"),
            messages=[said("still talking", now - 60)],
            counters=CounterUpdate(turns=6, steps=2),
        )
    return {"ended": ended.session_id, "quiet": quiet.session_id, "busy": busy.session_id}


@pytest.fixture
def config(tmp_path: Path) -> Path:
    path = tmp_path / "mnemo.yaml"
    path.write_text(CONFIG, encoding="utf-8")
    return path


async def test_jobs_lists_the_schedule_and_the_backlog(tmp_path: Path, config: Path) -> None:
    home, now = tmp_path / "home", time.time()
    ids = await fill(home, now)
    result = mnemo(home, tmp_path, "--config", str(config), "jobs")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[:3] == [
        "scheduled:",
        "  quiet-time extraction: sessions quiet for 30 min are extracted and ended",
        "  background review: after a reply, once a session reaches 5 turns without a memory write",
    ]
    assert lines[3:] == [
        "session-end extractions pending: 1",
        f"  session {ids['ended']}  telegram-1  ended {iso(now - 3600)} (new)  2 messages pending",
        "quiet sessions awaiting extraction: 1",
        f"  session {ids['quiet']}  {SHOWN_KEY}  last message {iso(now - 3 * 3600)}  "
        "1 message pending",
        "reviews due: 1",
        f"  session {ids['busy']}  telegram-2  6 turns since a memory write, "
        "2 tool steps since a skill write",
    ]
    assert "\x1b" not in result.stdout and "\u202e" not in result.stdout


async def test_jobs_as_json(tmp_path: Path, config: Path) -> None:
    home, now = tmp_path / "home", time.time()
    ids = await fill(home, now)
    result = mnemo(home, tmp_path, "--config", str(config), "jobs", "--json")
    assert result.returncode == 0, result.stderr
    assert "\u202e" not in result.stdout
    report = json.loads(result.stdout)
    assert report["scheduled"]["quiet_extraction"]["idle_minutes"] == 30
    assert report["scheduled"]["quiet_extraction"]["idle_reset"] is True
    assert report["scheduled"]["review"] == {
        "turns": 5,
        "steps": 0,
        "description": "background review: after a reply, once a session reaches 5 turns "
        "without a memory write",
    }
    [pending] = report["pending_extractions"]
    assert pending["session_id"] == ids["ended"] and pending["user_key"] == "telegram-1"
    assert (pending["ended_at"], pending["end_reason"]) == (now - 3600, "new")
    assert (pending["pending_messages"], pending["extracted_through"]) == (2, 0)
    [quiet] = report["quiet_sessions"]
    assert (quiet["session_id"], quiet["user_key"]) == (ids["quiet"], HOSTILE_KEY)
    assert quiet["ended_at"] is None and quiet["last_message_at"] == now - 3 * 3600
    assert report["reviews_due"] == [
        {
            "session_id": ids["busy"],
            "session_key": "telegram:private:telegram-2",
            "user_key": "telegram-2",
            "turns_since_memory": 6,
            "steps_since_skill": 2,
        }
    ]


def test_jobs_without_history_shows_the_schedule_and_creates_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    result = mnemo(home, tmp_path, "jobs")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines() == [
        "scheduled:",
        "  quiet-time extraction: sessions quiet for 120 min are extracted and kept open",
        "  background review: after a reply, once a session reaches 10 turns without a "
        "memory write or 10 tool steps without a skill write",
        "session-end extractions pending: none",
        "quiet sessions awaiting extraction: none",
        "reviews due: none",
    ]
    assert not (home / "state.db").exists()
    as_json = json.loads(mnemo(home, tmp_path, "jobs", "--json").stdout)
    assert as_json["pending_extractions"] == as_json["quiet_sessions"] == []
    assert as_json["reviews_due"] == []


def test_a_broken_configuration_is_one_line_and_exit_2(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("sessions:\n  idle_minutes: 0\n", encoding="utf-8")
    result = mnemo(tmp_path / "home", tmp_path, "--config", str(bad), "jobs")
    assert result.returncode == 2
    assert result.stderr.startswith("mnemo: ") and "Traceback" not in result.stderr
