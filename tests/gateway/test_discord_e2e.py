"""`mnemo run` as a subprocess serving Discord (and Telegram): the issue's "Done when".

The real `mnemo` script, with `DISCORD_BOT_TOKEN` and `TELEGRAM_BOT_TOKEN` set, talks
through the real discord.py to the fake Discord (REST and gateway, pointed at by
``discord.api_base``/``discord.gateway_url``), through the real python-telegram-bot to
the fake Bot API, and streams from the fake model API. The three fakes serve on one
event loop in a thread of this process, so the tests inject messages and read what
each channel shows, what each REST call carried and what each model request held.
The first test runs its own `mnemo run` (Discord alone), which fails at start; then
one `mnemo run` (the `served` fixture) serves the rest of the module, both platforms
at once; the tests run in file order, each in its own channel or DM.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import pytest

from tests.fakes.discord import FakeDiscord
from tests.fakes.openai import FakeOpenAI, ToolCall
from tests.fakes.telegram import FakeTelegram
from tests.gateway.e2e_support import (
    discord_ready,
    discord_section,
    fakes_fixture,
    learning_section,
    served_fixture,
    telegram_section,
    write_config,
)
from tests.gateway.processes import FakesThread, dump_state, mnemo_run
from tests.timing import scaled

DC_TOKEN = "fake-discord-e2e-token-0123456789"
TG_TOKEN = "4242:e2e-secret-token"
ALICE, BOB, CAROL = 111, 222, 333  # Discord ids; Carol is not on the allow-list
T = TypeVar("T")


class Fakes(FakesThread):
    """The fake Discord, Telegram and model on one event loop in a daemon thread."""

    def __init__(self) -> None:
        self.dc = FakeDiscord(token=DC_TOKEN)
        self.tg = FakeTelegram(token=TG_TOKEN)
        self.model = FakeOpenAI(echo_when_idle=True, chunk_size=40)
        super().__init__([self.dc, self.tg, self.model])

    def wait(self, probe: Callable[[], T], timeout: float = 15.0) -> T:
        return super().wait(probe, timeout)

    # -- what people do and see ----------------------------------------------------------

    def dm(self, user_id: int, text: str) -> int:
        """`user_id` writes to the bot in their DM; the DM channel's id."""
        self.run(lambda: self.dc.inject_message(text, user_id, guild=False))
        return self.call(self.dc.dm_channel_id, user_id)

    def mention(self, user_id: int, text: str, channel_id: int | None = None) -> None:
        """`user_id` mentions the bot in a guild channel (the first guild's by default)."""
        inject = self.dc.inject_message
        self.run(lambda: inject(text, user_id, channel_id, guild=True, mentions_bot=True))

    def texts(self, channel_id: int) -> list[str]:
        """What the bot shows in a channel, oldest first (as edited)."""
        return self.call(self._bot_texts, channel_id)

    def _bot_texts(self, channel_id: int) -> list[str]:
        bot = str(self.dc.bot_id)
        messages = self.dc.channel_messages(channel_id)
        return [m["content"] for m in messages if m["author"]["id"] == bot]

    def reply(self, channel_id: int, after: int, contains: str, timeout: float = 15.0) -> str:
        """The bot's first message in the channel past the first `after` that contains
        `contains` (waits for it)."""

        def found() -> str | None:
            return next((t for t in self._bot_texts(channel_id)[after:] if contains in t), None)

        return self.wait(found, timeout)

    def requests(self) -> list[dict[str, Any]]:
        return [r.body for r in self.call(lambda: list(self.model.requests))]


class Mnemo:
    """One `mnemo run` subprocess, its data directory and its stderr, read as it comes."""

    def __init__(self, process: subprocess.Popen[str], home: Path) -> None:
        self.process, self.home = process, home
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stderr is not None
        for line in self.process.stderr:
            self.lines.append(line)

    @property
    def err(self) -> str:
        return "".join(self.lines)

    def wait_line(self, contains: str, timeout: float = 20.0) -> str:
        """The first stderr line holding `contains`; fails early if the process ends."""
        deadline = time.monotonic() + scaled(timeout)
        while True:
            found = next((line for line in list(self.lines) if contains in line), None)
            if found is not None:
                return found
            if self.process.poll() is not None or time.monotonic() > deadline:
                self.process.kill()
                self._reader.join(timeout=scaled(5))
                raise AssertionError(f"no {contains!r} from mnemo run:\n{self.err}")
            time.sleep(0.02)

    def stop(self, timeout: float = 30.0) -> tuple[int, str]:
        """SIGTERM (unless it ended by itself); its exit code and stderr."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        self.process.wait(timeout=scaled(timeout))
        self._reader.join(timeout=scaled(5))
        return self.process.returncode, self.err


def launch(fakes: Fakes, workdir: Path, telegram: bool = True) -> Mnemo:
    """`mnemo run` in `workdir` (its mnemo.yaml), data in `workdir`/data: Discord, and
    Telegram unless told not to (two bots polling the fake take each other's updates)."""
    dc = fakes.dc
    write_config(
        workdir,
        "shutdown_grace: 5\n"
        + telegram_section(fakes.tg.url, (ALICE,))
        + discord_section(dc.api_base, dc.gateway_url, (ALICE, BOB))
        # no background reviews: the script stays in order
        + learning_section(nudge=1000, creation_nudge=1000),
    )
    tokens = {"DISCORD_BOT_TOKEN": DC_TOKEN}
    if telegram:
        tokens["TELEGRAM_BOT_TOKEN"] = TG_TOKEN
    process = mnemo_run(fakes.model.url, workdir, stdout=subprocess.DEVNULL, **tokens)
    return Mnemo(process, workdir / "data")


fakes = fakes_fixture(Fakes)
served = served_fixture(
    launch,
    "served",
    ready=discord_ready,
    never_logged=(
        "bees",
        "carol's secret",
        "value_0042",
        "the long one",
        "ping them",
        DC_TOKEN,
        TG_TOKEN,
    ),
)


def user_dir(home: Path, platform: str, user_id: int) -> Path:
    return home / "memories" / "users" / f"{platform}-{user_id}"


# ----- failing at start (before `served`: its own mnemo run) ----------------------------


def test_a_missing_message_content_intent_stops_mnemo_run_naming_it(
    fakes: Fakes, tmp_path: Path
) -> None:
    # Discord refuses the intent when the developer portal's switch is off
    fakes.call(setattr, fakes.dc, "message_content_granted", False)
    try:
        mnemo = launch(fakes, tmp_path / "bot", telegram=False)
        try:
            mnemo.process.wait(timeout=scaled(30))
        except subprocess.TimeoutExpired:
            mnemo.process.kill()
            raise
    finally:
        fakes.call(setattr, fakes.dc, "message_content_granted", True)
    code, err = mnemo.stop()
    assert code == 1, err
    assert "enable 'Message Content Intent'" in err
    assert mnemo.lines[-1].strip() == (
        "mnemo: the discord adapter failed to start (its error is logged above)"
    )
    assert DC_TOKEN not in err


# ----- both platforms, one process --------------------------------------------------------


@pytest.mark.slow  # a mnemo run serving both fakes, with its own start-up
def test_both_adapters_serve_from_one_process(fakes: Fakes, served: Mnemo) -> None:
    line = served.wait_line("serving ")
    assert "serving telegram (polling) and discord (" in line
    fakes.call(fakes.tg.inject_text, ALICE, ALICE, "hello from telegram")
    channel = fakes.dm(ALICE, "hello from discord")
    fakes.reply(channel, 0, "echo: hello from discord")
    tg_texts = lambda: fakes.tg.chat_texts(ALICE)  # noqa: E731
    assert fakes.wait(lambda: any("echo: hello from telegram" in (t or "") for t in tg_texts()))


# ----- direct messages, guild channels ----------------------------------------------------


def test_a_dm_conversation_keeps_memory_for_the_next_turn(fakes: Fakes, served: Mnemo) -> None:
    fact = {"target": "user", "action": "add", "content": "User keeps bees"}
    fakes.call(fakes.model.call_tools, ToolCall("memory", fact))
    fakes.call(fakes.model.say, "Bees noted.")
    seen = len(fakes.texts(fakes.call(fakes.dc.dm_channel_id, ALICE)))
    channel = fakes.dm(ALICE, "I keep bees")
    fakes.reply(channel, seen, "Bees noted.")
    start = len(fakes.requests())
    fakes.dm(ALICE, "what do I keep?")
    fakes.reply(channel, seen, "echo: what do I keep?")
    profile = user_dir(served.home, "discord", ALICE) / "USER.md"
    assert profile.read_text(encoding="utf-8").strip() == "User keeps bees"
    (request,) = fakes.requests()[start:]
    users = [m["content"] for m in request["messages"] if m["role"] == "user"]
    assert users[-2:] == ["I keep bees", "what do I keep?"]  # one session, both turns
    assert "User keeps bees" in json.dumps(request)  # the memory tool's result, replayed
    # the same id on Telegram is another person (telegram-111): her memory is not theirs
    start = len(fakes.requests())
    chat = 5551  # a private chat not used before: a new session, its prompt built now
    fakes.call(fakes.tg.inject_text, chat, ALICE, "and on telegram, what do I keep?")
    tg_texts = lambda: fakes.tg.chat_texts(chat)  # noqa: E731
    fakes.wait(lambda: any("echo: and on telegram" in (t or "") for t in tg_texts()))
    (on_telegram,) = fakes.requests()[start:]
    assert "keeps bees" not in json.dumps(on_telegram)
    assert not user_dir(served.home, "telegram", ALICE).joinpath("USER.md").exists()


def test_a_mention_in_a_guild_channel_is_answered_and_other_talk_is_not(
    fakes: Fakes, served: Mnemo
) -> None:
    channel = fakes.dc.guilds[0].channel_id
    seen, start = len(fakes.texts(channel)), len(fakes.requests())
    fakes.run(lambda: fakes.dc.inject_message("just chatting among people", BOB, channel))
    fakes.mention(BOB, "what is the capital of France?", channel)
    answer = fakes.reply(channel, seen, "echo:")
    assert "what is the capital of France?" in answer
    assert f"<@{fakes.dc.bot_id}>" not in answer  # the mention is not part of the question
    bodies = [json.dumps(b) for b in fakes.requests()[start:]]
    assert len(bodies) == 1 and "just chatting" not in bodies[0]


def test_a_thread_is_answered_in_the_thread_as_its_own_conversation(
    fakes: Fakes, served: Mnemo
) -> None:
    channel = fakes.dc.guilds[0].channel_id
    fakes.mention(ALICE, "in the channel, before the thread", channel)
    fakes.reply(channel, 0, "echo: in the channel, before the thread")
    in_channel = len(fakes.texts(channel))
    thread = fakes.run(lambda: fakes.dc.create_thread("planning", channel))
    fakes.mention(ALICE, "first in the thread", thread)
    fakes.reply(thread, 0, "echo: first in the thread")
    start = len(fakes.requests())
    # the bot takes part in the thread now: no mention needed
    fakes.run(lambda: fakes.dc.inject_message("second in the thread", ALICE, thread))
    fakes.reply(thread, 1, "echo: second in the thread")
    assert len(fakes.texts(channel)) == in_channel  # nothing went to the parent channel
    (request,) = fakes.requests()[start:]
    users = [m["content"] for m in request["messages"] if m["role"] == "user"]
    said = json.dumps(users)
    assert "first in the thread" in said and "second in the thread" in said
    assert "before the thread" not in said  # the thread is a session of its own


# ----- delivery ---------------------------------------------------------------------------


def test_a_4500_character_reply_arrives_as_three_messages_with_balanced_fences(
    fakes: Fakes, served: Mnemo
) -> None:
    prose = " ".join(["Plain words before the code."] * 50)  # 1,449 characters
    code = "\n".join(f"value_{i:04d} = compute({i})" for i in range(100))  # 2,443
    after = " ".join(["And plain words after it."] * 24)  # 623
    reply = f"{prose}\n\n```python\n{code}\n```\n\n{after}"
    assert 4_450 < len(reply) < 4_600
    fakes.call(fakes.model.say, reply)
    channel = fakes.call(fakes.dc.dm_channel_id, BOB)
    seen = len(fakes.texts(channel))
    fakes.dm(BOB, "the long one")
    fakes.reply(channel, seen, "plain words after it.")
    parts = fakes.texts(channel)[seen:]
    assert len(parts) == 3
    assert all(len(p) <= 2000 and p.count("```") % 2 == 0 for p in parts)
    code_lines = []
    for part in parts:  # code in a part sits between fences opened and closed in that part
        inside = False
        for line in part.split("\n"):
            if line.startswith("```"):
                inside = not inside
            elif line.startswith("value_"):
                assert inside, line
                code_lines.append(line)
    assert code_lines == code.split("\n")
    assert parts[0].startswith("Plain words") and parts[-1].endswith("plain words after it.")


def test_everyone_in_the_models_reply_does_not_ping(fakes: Fakes, served: Mnemo) -> None:
    fakes.call(fakes.model.say, "Sure: @everyone and @here, meet <@&1234567>.")
    channel = fakes.dc.guilds[0].channel_id
    seen = len(fakes.texts(channel))
    calls = len(fakes.call(lambda: fakes.dc.calls))
    fakes.mention(ALICE, "ping them all")
    text = fakes.reply(channel, seen, "meet")
    assert "@everyone" not in text and "@here" not in text  # escaped in the text
    assert "everyone" in text and "here" in text
    sent = [c for c in fakes.call(lambda: fakes.dc.calls[calls:]) if "/messages" in c.path]
    writes = [c for c in sent if c.method in ("POST", "PATCH") and c.body]
    assert writes
    for call in writes:  # and Discord is told never to ping anyone but the person
        allowed = call.body.get("allowed_mentions")
        assert allowed is not None, call.body
        assert not {"everyone", "roles"} & set(allowed.get("parse", [])), allowed
        assert not allowed.get("roles"), allowed


# ----- access -----------------------------------------------------------------------------


def test_a_person_not_allowed_is_refused_with_their_id_and_nothing_is_kept(
    fakes: Fakes, served: Mnemo
) -> None:
    before = len(fakes.requests())
    channel = fakes.dm(CAROL, "carol's secret plan")
    line = fakes.reply(channel, 0, "user id")
    assert f"Your discord user id is {CAROL}" in line
    guild_channel = fakes.dc.guilds[0].channel_id
    fakes.mention(CAROL, "carol's secret question", guild_channel)  # told once: now silent
    seen = len(fakes.texts(guild_channel))
    fakes.mention(ALICE, "after carol", guild_channel)
    fakes.reply(guild_channel, seen, "echo: after carol")  # Carol's came first
    assert fakes.texts(channel) == [line]  # one line, no answer
    bodies = json.dumps(fakes.requests()[before:])
    assert "after carol" in bodies and "carol's secret" not in bodies  # the model never saw her
    rows = dump_state(served.home)
    assert "carol's secret" not in rows and f"discord-{CAROL}" not in rows
    assert not user_dir(served.home, "discord", CAROL).exists()


# ----- slash commands and buttons ---------------------------------------------------------


def test_slash_commands_are_synced_and_recall_answers_after_deferring(
    fakes: Fakes, served: Mnemo
) -> None:
    synced = fakes.call(fakes.dc.commands_synced)  # globally: servers' are not in DMs
    assert {"recall", "forget", "memory", "help"} <= set(synced) and "promote" not in synced
    fakes.call(fakes.model.say, "Bob asked for the capital of France.")  # the recap
    start = len(fakes.requests())
    inject = fakes.dc.inject_command
    asked = fakes.run(lambda: inject("recall", BOB, {"what": "France"}, guild=False))
    text = fakes.wait(lambda: next((t for t in asked.texts if "What I found" in t), None))
    assert "(discord, a group): Bob asked for the capital of France." in text
    assert asked.responses[0] == 5 and asked.answered_after is not None  # deferred at once
    assert asked.answered_after < 3.0  # within Discord's window
    (recap,) = fakes.requests()[start:]
    assert "capital of France" in json.dumps(recap)  # Bob's mention in the server, found


def test_slash_forget_offers_buttons_only_the_person_can_press(fakes: Fakes, served: Mnemo) -> None:
    fact = {"target": "user", "action": "add", "content": "User keeps bees on the roof"}
    fakes.call(fakes.model.call_tools, ToolCall("memory", fact))
    fakes.call(fakes.model.say, "Roof noted.")
    channel = fakes.call(fakes.dc.dm_channel_id, ALICE)
    fakes.dm(ALICE, "I keep the bees on the roof")
    fakes.reply(channel, 0, "Roof noted.")
    profile = user_dir(served.home, "discord", ALICE) / "USER.md"
    inject = fakes.dc.inject_command
    asked = fakes.run(lambda: inject("forget", ALICE, {"what": "bees"}, guild=False))

    def offer() -> dict[str, Any] | None:
        return next((m for m in asked.messages if m.get("components")), None)

    message = fakes.wait(offer)
    assert "Which one should I forget?" in message["content"]
    buttons = {b["label"]: b["custom_id"] for row in message["components"]
               for b in row["components"]}  # fmt: skip
    assert set(buttons) == {"User keeps bees", "User keeps bees on the roof"}
    roof = buttons["User keeps bees on the roof"]
    # Bob never sees her DM; were he to press it, the choice is bound to her
    other = fakes.run(lambda: fakes.dc.inject_button_click(message, roof, BOB))
    (refusal,) = fakes.wait(lambda: other.texts[1:])  # after the message with the buttons
    assert refusal.startswith("That choice was offered to someone else")
    assert "on the roof" in profile.read_text(encoding="utf-8")
    pressed = fakes.run(lambda: fakes.dc.inject_button_click(message, roof, ALICE))
    done = fakes.wait(lambda: next((t for t in pressed.texts if "Forgotten" in t), None))
    assert done.startswith("Forgotten: User keeps bees on the roof")
    assert profile.read_text(encoding="utf-8").strip() == "User keeps bees"
