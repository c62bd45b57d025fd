"""A restart of `mnemo chat` continues the same session with the same prompt bytes.

Two real `mnemo chat` processes, one after the other, against one fake model
API (in this process, so its recorded requests can be compared); USER.md is
edited between the runs, as a person or the operator might.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core import SearchScope, SessionDB
from tests.fakes.base import serving_in_thread
from tests.fakes.openai import FakeOpenAI, ToolCall
from tests.timing import scaled

USER = "ada"
USER_KEY = f"console-{USER}"
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with serving_in_thread(FakeOpenAI(chunk_size=8)) as server:
        yield server


def mnemo_chat(fake: FakeOpenAI, home: Path, *lines: str) -> str:
    """One `mnemo chat` run that reads `lines` and exits at the end of its input."""
    env = {
        **os.environ,
        "OPENAI_BASE_URL": fake.url + "/v1",
        "MNEMO_HOME": str(home),
        "MNEMO_SKILLS_DIR": str(ROOT / "skills"),
        "LOGNAME": USER,  # the console's person: the login name
        "USER": USER,
    }
    mnemo = Path(sys.executable).parent / "mnemo"
    result = subprocess.run(
        [str(mnemo), "chat"], input="".join(f"{line}\n" for line in lines), env=env,
        capture_output=True, text=True, timeout=scaled(60), cwd=home.parent,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.slow
def test_a_restart_keeps_the_session_and_its_prompt_byte_for_byte(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    home = tmp_path / "data"
    fact = {"target": "user", "action": "add", "content": "Name: Ada"}
    fake.call_tools(ToolCall("memory", fact, id="call_1"))
    fake.say("Noted, Ada.")
    fake.say("Tea it is.")
    out = mnemo_chat(fake, home, "call me Ada", "I like tea")
    assert "Noted, Ada." in out and "Tea it is." in out
    before = [r.body["messages"] for r in fake.requests]
    profile = home / "memories" / "users" / USER_KEY / "USER.md"
    profile.write_text("Name: Ada Lovelace\n§\nLives in London\n", encoding="utf-8")

    fake.say("Welcome back.")
    out = mnemo_chat(fake, home, "I'm back")
    assert "Welcome back." in out
    after = fake.requests[-1].body["messages"]
    system_before = json.dumps(before[0][0], ensure_ascii=False)
    assert json.dumps(after[0], ensure_ascii=False) == system_before  # the same bytes
    assert "Lovelace" not in after[0]["content"]
    # The whole earlier conversation is replayed exactly as it was sent.
    last = before[-1]
    replayed = [json.dumps(m, ensure_ascii=False) for m in after[: len(last) - 1]]
    assert replayed == [json.dumps(m, ensure_ascii=False) for m in last[:-1]]
    assert after[len(last) - 1 :] == [
        {"role": "user", "content": "I like tea"},
        {"role": "assistant", "content": "Tea it is."},
        {"role": "user", "content": "I'm back"},
    ]
    with SessionDB(home / "state.db") as db:
        sessions = db.list_sessions(SearchScope(user_key=USER_KEY))
    assert len(sessions) == 1 and sessions[0].ended_at is None
