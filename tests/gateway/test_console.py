"""`mnemo run` / `mnemo chat` with the console adapter, against the fake model API."""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.config import Config, load_config
from gateway.service import run_console
from memory_core import SearchScope, SessionDB
from tests.fakes.base import serving_in_thread
from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.gateway.processes import run_mnemo
from tests.timing import scaled, wait_until_sync

USER = "ada"
USER_KEY = f"console-{USER}"
SKILLS = Path(__file__).resolve().parents[2] / "skills"


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with serving_in_thread(FakeOpenAI(chunk_size=4)) as server:
        yield server


def config_for(fake: FakeOpenAI, home: Path) -> Config:
    env = {"OPENAI_BASE_URL": fake.url + "/v1", "MNEMO_HOME": str(home)}
    return load_config(None, environ={**env, "MNEMO_SKILLS_DIR": str(SKILLS)})


def chat(config: Config, *lines: str) -> str:
    out = io.StringIO()
    lines_in = io.StringIO("".join(f"{line}\n" for line in lines))
    run_console(config, stdin=lines_in, stdout=out, user_id=USER)
    return out.getvalue()


@pytest.fixture(autouse=True)
def in_tmp(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.chdir(tmp_path)


def stored(home: Path) -> list[tuple[str, str]]:
    db = SessionDB(home / "state.db").open()
    try:
        sessions = db.list_sessions(SearchScope(user_key=USER_KEY))
        return [
            (m.role, m.content)
            for s in reversed(sessions)
            for m in db.get_messages(s.id, SearchScope(user_key=USER_KEY), lineage=False)
        ]
    finally:
        db.close()


def test_a_turn_streams_the_reply_and_stores_it(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.say("Hello Ada, 很高兴认识你!")
    out = chat(config_for(fake, tmp_path / "data"), "hi there")
    assert "Hello Ada, 很高兴认识你!" in out
    assert stored(tmp_path / "data") == [
        ("user", "hi there"),
        ("assistant", "Hello Ada, 很高兴认识你!"),
    ]
    body = fake.requests[0].body
    system = body["messages"][0]
    assert system["role"] == "system" and "recall-past-conversations" in system["content"]
    assert body["messages"][-1] == {"role": "user", "content": "hi there"}
    assert {t["function"]["name"] for t in body["tools"]} >= {"memory", "skill_view"}


def test_memory_tool_writes_the_profile_and_the_next_session_sees_it(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    fake.call_tools(ToolCall("memory", {"target": "user", "action": "add", "content": "Name: Ada"}))
    fake.say("Noted.")
    fake.say("Fresh start.")
    out = chat(config_for(fake, tmp_path / "data"), "call me Ada", "/memory", "/new", "hello")
    assert "Noted." in out and "1. Name: Ada" in out and "Fresh start." in out
    profile = tmp_path / "data" / "memories" / "users" / USER_KEY / "USER.md"
    assert profile.read_text(encoding="utf-8").strip() == "Name: Ada"
    first_prompt = fake.requests[0].body["messages"][0]["content"]
    tool_result = fake.requests[1].body["messages"][-1]
    assert tool_result["role"] == "tool" and '"success": true' in tool_result["content"]
    # The snapshot is frozen per session: only the session after /new carries the entry.
    assert "Name: Ada" not in first_prompt
    assert "Name: Ada" in fake.requests[2].body["messages"][0]["content"]


def test_recall_reaches_the_model_but_is_not_stored(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.say("Roll back with the blue-green switch.")
    fake.say("You decided on the blue-green rollback.")
    home = tmp_path / "data"
    chat(
        config_for(fake, home),
        "how should we roll back the kubernetes deploy of the billing service?",
        "/new",
        "what did we decide about the billing deploy rollback?",
    )
    sent = fake.requests[1].body["messages"][-1]["content"]
    assert "<memory-context>" in sent and "deploy of the billing service" in sent
    assert all("<memory-context>" not in content for _, content in stored(home))


def test_model_failure_is_reported_and_the_message_kept(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.fail_next(Fault.http(500))
    fake.fail_next(Fault.http(500))
    fake.fail_next(Fault.http(502))  # three tries: the first and two retries
    out = chat(config_for(fake, tmp_path / "data"), "are you there?")
    assert "(the model is not answering right now; please try again in a moment)" in out
    assert "HTTP" not in out and "fake fault" not in out
    assert stored(tmp_path / "data") == [("user", "are you there?")]


@pytest.mark.slow  # a real mnemo process, start to exit
def test_mnemo_run_subprocess_uses_the_console_by_default(tmp_path: Path) -> None:
    """No platform token and `--console`: `mnemo run` talks on stdin/stdout (a pipe)."""
    result = run_mnemo("run --console", "good morning\n", home=tmp_path / "d", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "echo: good morning" in result.stdout
    assert (tmp_path / "d" / "state.db").exists()


def test_echoed_recall_block_is_neither_shown_nor_stored(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.say("Sure.<memory-context>\nsecret recalled text\n</memory-context> Done.")
    out = chat(config_for(fake, tmp_path / "data"), "hello")
    assert "Sure. Done." in out and "secret recalled text" not in out
    assert stored(tmp_path / "data")[-1] == ("assistant", "Sure. Done.")


def test_tool_steps_are_kept_when_the_next_model_call_fails(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    fake.call_tools(ToolCall("memory", {"target": "user", "action": "add", "content": "Likes tea"}))
    fake.say("never finished", fault=Fault.cut(after=2))  # the role delta, then "neve"
    out = chat(config_for(fake, tmp_path / "data"), "I like tea")
    assert "neve\n(the reply was cut off; please ask again)" in out
    messages = stored(tmp_path / "data")
    assert [role for role, _ in messages] == ["user", "assistant", "tool", "assistant"]
    assert messages[-1][1] == "neve\n(the reply was cut off; please ask again)"


def test_the_end_of_a_chat_leaves_the_session_open_for_the_next_one(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    home = tmp_path / "data"
    fake.call_tools(ToolCall("memory", {"target": "user", "action": "add", "content": "Name: Ada"}))
    fake.say("Noted.")
    chat(config_for(fake, home), "call me Ada")
    profile = home / "memories" / "users" / USER_KEY / "USER.md"
    profile.write_text("Name: Ada Lovelace\n", encoding="utf-8")
    fake.say("Still here.")
    out = chat(config_for(fake, home), "are you still there?")
    assert "Still here." in out
    first, last = fake.requests[0].body["messages"], fake.requests[-1].body["messages"]
    assert last[0] == first[0] and "Lovelace" not in last[0]["content"]
    assert [m["role"] for m in last] == ["system", "user", "assistant", "tool", "assistant", "user"]
    assert last[2]["content"] is None and last[3]["name"] == "memory"
    roles = [role for role, _ in stored(home)]
    assert roles == ["user", "assistant", "tool", "assistant", "user", "assistant"]


def test_mnemo_chat_in_chinese_shows_the_consoles_own_lines_in_chinese(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    file = tmp_path / "mnemo.yaml"
    file.write_text("locale:\n  language: zh\n", encoding="utf-8")
    env = {"OPENAI_BASE_URL": fake.url + "/v1", "MNEMO_HOME": str(tmp_path / "data")}
    config = load_config(file, environ={**env, "MNEMO_SKILLS_DIR": str(SKILLS)})
    fake.say("你好!")
    out = chat(config, "hi")
    banner = out.splitlines()[0]
    assert "控制台" in banner and "/help" in banner and "/quit" in banner
    assert "Type a message" not in out
    assert "你好!" in out  # and the chat goes on as in English


def test_mnemo_chat_in_english_keeps_the_english_banner(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.say("Hi!")
    out = chat(config_for(fake, tmp_path / "data"), "hi")
    assert out.startswith("Mnemo console. Type a message; /help for commands, /quit to leave.\n")


def test_mnemo_chat_subprocess_with_locale_language_zh_speaks_chinese(tmp_path: Path) -> None:
    """`mnemo chat` reading ./mnemo.yaml: the console's banner and the bot's own lines
    (/help) in Chinese; English is nowhere in them."""
    (tmp_path / "mnemo.yaml").write_text("locale:\n  language: zh\n", encoding="utf-8")
    result = run_mnemo("chat", "/help\n", home=tmp_path / "d", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    banner, *rest = result.stdout.splitlines()
    assert "控制台" in banner and "/quit" in banner
    assert "Type a message" not in result.stdout
    assert "/help" in "\n".join(rest) and "我" in "\n".join(rest)  # /help, in Chinese


def test_the_banner_follows_the_persons_own_language_at_the_next_start(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = config_for(fake, tmp_path / "data")
    chat(config, "/settings language zh")
    banner = chat(config).splitlines()[0]
    assert "控制台" in banner and "Type a message" not in banner
    assert chat(config_for(fake, tmp_path / "other")).startswith("Mnemo console.")


def test_a_typed_stop_during_a_reply_stops_it_and_the_chat_goes_on(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    """A pipe (no terminal): ``/stop`` read while a reply streams is sent at once, not
    after the reply ends (which answered "Nothing is being written right now")."""
    fake.say("Once upon a time there was a very long story that never ended")
    fake.fail_next(Fault.stall(after=2))  # the first words, then the model goes quiet
    fake.say("Here is a short one.")
    config = config_for(fake, tmp_path / "data")
    out = io.StringIO()
    read, write = os.pipe()
    with open(read, encoding="utf-8") as stdin, open(write, "w", encoding="utf-8") as typed:
        kwargs = {"stdin": stdin, "stdout": out, "user_id": USER}
        console = threading.Thread(target=run_console, args=(config,), kwargs=kwargs)
        console.start()
        typed.write("tell me a story\n")
        typed.flush()
        wait_until_sync(lambda: fake.stalled == 1 and "Once" in out.getvalue())
        typed.write("/stop\n")
        typed.flush()
        wait_until_sync(lambda: "Stopped." in out.getvalue(), what="the stop's answer")
        typed.write("a short one then\n")
        typed.flush()
        wait_until_sync(lambda: "Here is a short one." in out.getvalue())
    console.join(scaled(20))
    assert not console.is_alive()
    text = out.getvalue()
    assert "never ended" not in text and "Nothing is being written" not in text
    assert [role for role, _ in stored(tmp_path / "data")].count("user") == 2  # not "/stop"
