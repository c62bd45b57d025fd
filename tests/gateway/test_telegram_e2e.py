"""`mnemo run` as a subprocess serving Telegram: the issue's "Done when", end to end.

The real `mnemo` script, with `TELEGRAM_BOT_TOKEN` set, talks through the real
python-telegram-bot to the fake Bot API server and streams from the fake model API;
both fakes serve on one event loop in a thread of this process, so the tests inject
updates and read what each chat shows and what each model request carried. One fake
pair serves the module. The restart test runs first, with its own `mnemo run`; then
`served` is one `mnemo run` shared by the tests that follow (each in its own chats), in
file order. Two bots never poll the fake at once: they would take each other's updates.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.fakes.openai import FakeOpenAI, Fault, ToolCall
from tests.fakes.telegram import ChatMessage, FakeTelegram
from tests.gateway.e2e_support import (
    fakes_fixture,
    learning_section,
    served_fixture,
    telegram_section,
    write_config,
)
from tests.gateway.processes import FakesThread, dump_state, mnemo_run
from tests.timing import scaled

TOKEN = "4242:e2e-secret-token"
ALICE, BOB, CAROL = 111, 222, 333  # Carol is not on the allow-list
GROUP = -1001
MENTION = {"type": "mention", "offset": 0, "length": len("@mnemo_bot")}
T = TypeVar("T")


class Fakes(FakesThread):
    """The fake Telegram and the fake model on one event loop in a daemon thread."""

    def __init__(self) -> None:
        self.tg = FakeTelegram(token=TOKEN)
        self.model = FakeOpenAI(echo_when_idle=True, chunk_size=3)
        super().__init__([self.tg, self.model])

    # -- what people do and see ----------------------------------------------------------

    def text(self, chat_id: int, user_id: int, text: str, **fields: Any) -> None:
        self.call(self.tg.inject_text, chat_id, user_id, text, **fields)

    def command(self, chat_id: int, user_id: int, line: str) -> None:
        self.call(self.tg.inject_command, chat_id, user_id, line)

    def bot_messages(self, chat_id: int) -> list[ChatMessage]:
        return self.call(self.tg.chat_messages, chat_id)

    def reply(self, chat_id: int, after: int, contains: str, timeout: float = 20.0) -> str:
        """The text of the bot's first message in the chat past the first `after` that
        contains `contains` (waits for it)."""

        def found() -> str | None:
            for message in self.tg.chat_messages(chat_id)[after:]:
                if message.text is not None and contains in message.text:
                    return message.text
            return None

        return self.wait(found, timeout)

    def requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.call(lambda: list(self.model.requests))]


@dataclass
class Mnemo:
    """One `mnemo run` subprocess with its data directory."""

    process: subprocess.Popen[str]
    home: Path

    def stop(self, timeout: float = 30.0) -> tuple[int, str]:
        self.process.send_signal(signal.SIGTERM)
        _, err = self.process.communicate(timeout=scaled(timeout))
        return self.process.returncode, err


fakes = fakes_fixture(Fakes)

IN_ORDER = learning_section(nudge=1000, creation_nudge=1000)
"""No background reviews or skill nudges: the fake model's script stays in order."""


def launch(
    fakes: Fakes,
    workdir: Path,
    grace: float,
    token: str,
    learning: str = IN_ORDER,
    users: Sequence[int] = (ALICE, BOB),
) -> subprocess.Popen[str]:
    """`mnemo run` in `workdir` (its mnemo.yaml: `users` allowed, by default Alice and Bob,
    `learning` its memory and skills sections), data in `workdir`/data."""
    config = f"shutdown_grace: {grace}\n" + telegram_section(fakes.tg.url, users)
    write_config(workdir, config + learning)
    return mnemo_run(fakes.model.url, workdir, TELEGRAM_BOT_TOKEN=token)


def start_mnemo(
    fakes: Fakes,
    workdir: Path,
    grace: float = 10.0,
    learning: str = IN_ORDER,
    users: Sequence[int] = (ALICE, BOB),
) -> Mnemo:
    """`mnemo run` with the right token; waits until it is about to poll Telegram."""
    started = fakes.call(lambda: len(fakes.tg.calls_to("deleteWebhook")))
    process = launch(fakes, workdir, grace, TOKEN, learning, users)
    try:
        # deleteWebhook comes last before polling (a held poll is recorded only when it ends)
        fakes.wait(lambda: len(fakes.tg.calls_to("deleteWebhook")) > started)
    except TimeoutError:
        process.kill()
        raise AssertionError(f"mnemo run did not start: {process.communicate()[1]}") from None
    return Mnemo(process, workdir / "data")


served = served_fixture(
    start_mnemo,
    "served",
    logged=("serving telegram (polling) with data in",),
    never_logged=("tango", "carol's secret", "word42", "value_0042", "the long one", TOKEN),
)


# ----- failing and restarting ------------------------------------------------------------


@pytest.mark.slow  # its own mnemo run, from start to exit 1
def test_a_refused_token_stops_mnemo_run_with_exit_1(fakes: Fakes, tmp_path: Path) -> None:
    wrong = "4242:not-the-right-token"
    process = launch(fakes, tmp_path / "bot", grace=1, token=wrong)
    _, err = process.communicate(timeout=scaled(30))
    assert process.returncode == 1
    assert err.splitlines()[-1] == (
        "mnemo: the telegram adapter failed to start (its error is logged above)"
    )
    assert "bot token was refused" in err and wrong not in err


@pytest.mark.slow
def test_sigterm_then_restart_keeps_sessions_and_memory_and_answers_the_downtime(
    fakes: Fakes, tmp_path: Path
) -> None:
    chat = 555
    workdir = tmp_path / "bot"
    fact = {"target": "user", "action": "add", "content": "User keeps bees"}
    fakes.call(fakes.model.call_tools, ToolCall("memory", fact))
    fakes.call(fakes.model.say, "Bees noted.")
    fakes.text(chat, ALICE, "I keep bees")  # chat 555: Alice's second private chat
    mnemo = start_mnemo(fakes, workdir, grace=0.3)
    fakes.reply(chat, 0, "Bees noted.")
    fakes.call(fakes.model.fail_next, Fault.stall())  # the next turn never gets an answer
    fakes.text(chat, ALICE, "cut short by the stop")
    fakes.wait(lambda: fakes.model.stalled == 1)
    code, err = mnemo.stop()
    assert code == 0, err
    assert "stopping (SIGTERM)" in err and "cut short by the stop" not in err
    assert TOKEN not in err
    with sqlite3.connect(mnemo.home / "state.db") as db:
        open_sessions = db.execute("SELECT COUNT(*) FROM sessions WHERE ended_at IS NULL")
        assert open_sessions.fetchone()[0] == 1

    other = 666  # Bob writes while the bot is down: Telegram keeps it until it is polled
    fakes.text(other, BOB, "sent while it was down")
    seen = len(fakes.bot_messages(chat))
    again = start_mnemo(fakes, workdir, grace=0.3)
    try:
        fakes.reply(other, 0, "echo: sent while it was down")  # polled after the restart
        fakes.reply(chat, seen, "echo: cut short by the stop")  # stored, answered at start
    finally:
        code, err = again.stop()
    assert code == 0, err
    assert "answered 1 telegram messages left unanswered" in err
    bodies = [b["messages"] for b in fakes.requests()]
    last = [m for m in bodies if m[-1] == {"role": "user", "content": "cut short by the stop"}]
    users = [m["content"] for m in last[-1] if m["role"] == "user"]
    assert users == ["I keep bees", "cut short by the stop"]  # the same session, resumed
    assert "User keeps bees" in json.dumps(last[-1])  # the memory tool's result, replayed
    profile = again.home / "memories" / "users" / f"telegram-{ALICE}" / "USER.md"
    assert profile.read_text(encoding="utf-8").strip() == "User keeps bees"
    with sqlite3.connect(again.home / "state.db") as db:
        rows = db.execute("SELECT chat_id, ended_at FROM sessions ORDER BY id").fetchall()
    assert rows == [(str(chat), None), (str(other), None)]


# ----- two people, private chats and a group ---------------------------------------------


def test_memory_written_for_alice_never_reaches_a_request_for_bob(
    fakes: Fakes, served: Mnemo
) -> None:
    start = len(fakes.requests())
    fact = {"target": "user", "action": "add", "content": "Alice dances the tango"}
    fakes.call(fakes.model.call_tools, ToolCall("memory", fact))
    fakes.call(fakes.model.say, "Noted, Alice.")
    fakes.text(ALICE, ALICE, "alice here, I dance the tango")
    fakes.reply(ALICE, 0, "Noted, Alice.")
    fakes.text(BOB, BOB, "bob here, what do you know about dancing?")
    fakes.reply(BOB, 0, "echo: bob here")
    fakes.text(GROUP, ALICE, "@mnemo_bot alice in the group", entities=[MENTION])
    fakes.reply(GROUP, 0, "echo: alice in the group")
    fakes.text(GROUP, BOB, "@mnemo_bot bob in the group: tango anyone?", entities=[MENTION])
    fakes.reply(GROUP, 0, "echo: bob in the group")

    profile = served.home / "memories" / "users" / f"telegram-{ALICE}" / "USER.md"
    assert profile.read_text(encoding="utf-8").strip() == "Alice dances the tango"
    bodies = [json.dumps(b) for b in fakes.requests()[start:]]
    for_bob = [b for b in bodies if "bob here" in b or "bob in the group" in b]
    for_alice = [b for b in bodies if "alice here" in b or "alice in the group" in b]
    assert len(for_bob) == 2 and len(for_alice) == 3
    assert any("Alice dances the tango" in b for b in for_alice)  # her tool result
    assert not any("tango" in b.replace("tango anyone", "") for b in for_bob)
    assert not any("alice" in b.lower() for b in for_bob)  # not even her words, via recall


def test_the_commands_work_and_are_in_the_menu(fakes: Fakes, served: Mnemo) -> None:
    seen = len(fakes.bot_messages(ALICE))
    fakes.command(ALICE, ALICE, "/help")
    assert "/memory" in fakes.reply(ALICE, seen, "/forget")
    seen = len(fakes.bot_messages(ALICE))
    fakes.command(ALICE, ALICE, "/memory")
    assert "1. Alice dances the tango" in fakes.reply(ALICE, seen, "tango")
    seen = len(fakes.bot_messages(BOB))
    fakes.command(BOB, BOB, "/memory")
    assert "tango" not in fakes.reply(BOB, seen, "")
    menu = fakes.call(fakes.tg.commands)
    names = {c["command"] for c in menu}
    assert {"help", "memory", "forget", "new"} <= names and "promote" not in names


def test_a_refused_person_is_told_their_id_and_nothing_of_theirs_is_kept(
    fakes: Fakes, served: Mnemo
) -> None:
    before = len(fakes.requests())
    fakes.text(CAROL, CAROL, "carol's secret plan")
    line = fakes.reply(CAROL, 0, "user id")
    assert f"Your telegram user id is {CAROL}" in line
    fakes.wait(lambda: not fakes.tg.pending_updates)  # handled and confirmed
    assert len(fakes.requests()) == before  # the model never saw her
    rows = dump_state(served.home)
    assert "carol" not in rows and f"telegram-{CAROL}" not in rows
    assert not (served.home / "memories" / "users" / f"telegram-{CAROL}").exists()


def test_a_429_on_edits_delays_but_keeps_the_final_text(fakes: Fakes, served: Mnemo) -> None:
    text = " ".join(f"word{i}" for i in range(150))  # ~1,200 characters, streamed in 3s
    fakes.call(fakes.model.say, text)
    fakes.call(fakes.tg.fail_next, "editMessageText", 429, 1)
    seen = len(fakes.bot_messages(GROUP))
    fakes.text(GROUP, ALICE, "@mnemo_bot a long answer please", entities=[MENTION])
    fakes.wait(lambda: any(m.text == text for m in fakes.tg.chat_messages(GROUP)[seen:]))
    edits = fakes.call(fakes.tg.calls_to, "editMessageText")
    assert any(c.status == 429 for c in edits)


def test_a_9000_character_reply_with_code_arrives_as_three_balanced_messages(
    fakes: Fakes, served: Mnemo
) -> None:
    prose = " ".join(["Plain words before the code."] * 70)  # 2,029 characters
    code = "\n".join(f"value_{i:04d} = compute({i})" for i in range(200))  # 4,889: cut
    after = " ".join(["And plain words after it."] * 75)  # 1,949
    reply = f"{prose}\n\n```python\n{code}\n```\n\n{after}"
    assert 8_500 < len(reply) < 9_500
    fakes.call(fakes.model.say, reply)
    seen = len(fakes.bot_messages(BOB))
    fakes.text(BOB, BOB, "the long one")
    fakes.wait(lambda: any("plain words after" in (m.text or "")
                           for m in fakes.tg.chat_messages(BOB)[seen:]))  # fmt: skip
    parts = fakes.bot_messages(BOB)[seen:]
    assert len(parts) == 3
    assert all("```" not in (p.text or "") for p in parts)  # every fence was rendered
    lines_seen = []
    for part in parts:
        text = part.text or ""
        pre = [e for e in part.entities or [] if e["type"] == "pre"]
        code_here = [line for line in text.split("\n") if line.startswith("value_")]
        lines_seen += code_here
        if code_here:  # code in this part sits inside a block opened in this part
            assert len(pre) == 1 and pre[0].get("language") == "python"
            units = text.encode("utf-16-le")
            start, length = pre[0]["offset"], pre[0]["length"]
            block = units[2 * start : 2 * (start + length)].decode("utf-16-le")
            assert all(line in block for line in code_here)
    assert lines_seen == code.split("\n")


def test_a_stalled_reply_and_a_follow_up_delay_nobody_else(fakes: Fakes, served: Mnemo) -> None:
    alice_seen, bob_seen = len(fakes.bot_messages(ALICE)), len(fakes.bot_messages(BOB))
    held = fakes.call(lambda: fakes.model.stalled)  # an earlier test may leave one held
    fakes.call(fakes.model.fail_next, Fault.stall())  # Alice's reply is held at the model
    fakes.text(ALICE, ALICE, "a stalled question")
    fakes.wait(lambda: fakes.model.stalled == held + 1)
    fakes.text(ALICE, ALICE, "and a follow-up")  # her session is busy: queued, confirmed
    fakes.text(BOB, BOB, "bob is idle")
    assert fakes.reply(BOB, bob_seen, "bob is idle") == "echo: bob is idle"
    assert fakes.call(lambda: fakes.model.stalled) == held + 1  # Alice's is still held
    assert not any("a stalled question" in (m.text or "") for m in fakes.bot_messages(ALICE))
    fakes.call(fakes.model.release)
    fakes.reply(ALICE, alice_seen, "and a follow-up")
    said = [m.text for m in fakes.bot_messages(ALICE)[alice_seen:]]
    assert said == ["echo: a stalled question", "echo: and a follow-up"]  # in order
