"""What a real `mnemo run` writes on stderr from start to a SIGTERM stop: quiet, once,
no secrets, and one JSON object per line when `logging.format` is json.

The real `mnemo` script serves Telegram and Discord at once against the fakes (the
fake Bot API, the fake Discord REST and gateway, the fake model API that accepts only
the right key), each platform answers one message, and then it is stopped. The logs
must carry no discord.py voice-support warning (Mnemo uses no voice), no INFO line per
HTTP request (they would hold the Telegram token in every polled URL), the Telegram
stop once, and never a token or the API key.
"""

from __future__ import annotations

import json
import signal
import subprocess
import threading
from pathlib import Path

import pytest

from tests.fakes.discord import FakeDiscord
from tests.fakes.openai import FakeOpenAI
from tests.fakes.telegram import FakeTelegram
from tests.gateway.e2e_support import (
    discord_section,
    fakes_fixture,
    learning_section,
    telegram_section,
    write_config,
)
from tests.gateway.processes import MNEMO, FakesThread, run_environment
from tests.timing import scaled

TG_TOKEN = "4242:logs-secret-telegram-token"
DC_TOKEN = "fake-discord-logs-secret-token-0123456789"
API_KEY = "sk-logs-secret-api-key-0123456789"
SECRETS = (TG_TOKEN, DC_TOKEN, API_KEY)
ALICE = 111


class Fakes(FakesThread):
    def __init__(self) -> None:
        self.tg = FakeTelegram(token=TG_TOKEN)
        self.dc = FakeDiscord(token=DC_TOKEN)
        self.model = FakeOpenAI(echo_when_idle=True, chunk_size=40, api_key=API_KEY)
        super().__init__([self.tg, self.dc, self.model])


fakes = fakes_fixture(Fakes)


def served_and_stopped(fakes: Fakes, workdir: Path, extra_config: str = "") -> str:
    """`mnemo run` in `workdir` serving both fakes: Alice writes once on each platform and
    is answered, then SIGTERM; its exit code must be 0. Its stderr."""
    write_config(
        workdir,
        "shutdown_grace: 5\n"
        + telegram_section(fakes.tg.url, (ALICE,))
        + discord_section(fakes.dc.api_base, fakes.dc.gateway_url, (ALICE,))
        + learning_section(nudge=1000, creation_nudge=1000)  # no background model calls
        + extra_config,
    )
    env = run_environment(
        fakes.model.url, workdir, TELEGRAM_BOT_TOKEN=TG_TOKEN, DISCORD_BOT_TOKEN=DC_TOKEN
    )
    env["OPENAI_API_KEY"] = API_KEY
    polled = fakes.call(lambda: len(fakes.tg.calls_to("deleteWebhook")))
    process = subprocess.Popen(
        [str(MNEMO), "run"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE, text=True, env=env, cwd=workdir,
    )  # fmt: skip
    lines: list[str] = []
    stderr = process.stderr
    assert stderr is not None

    def read() -> None:
        for line in stderr:
            lines.append(line)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    try:
        # deleteWebhook comes last before Telegram is polled
        fakes.wait(lambda: len(fakes.tg.calls_to("deleteWebhook")) > polled, timeout=scaled(30))
        fakes.run(lambda: fakes.dc.wait_ready(timeout=30))
        # every adapter started (discord.py waits for the guilds before it is ready)
        fakes.wait(
            lambda: any("serving telegram" in line for line in list(lines)), timeout=scaled(30)
        )
        chat = 9001 + len(fakes.call(lambda: fakes.tg.calls_to("deleteWebhook")))
        fakes.call(fakes.tg.inject_text, chat, ALICE, "hello from telegram")
        fakes.wait(lambda: "echo: hello from telegram" in str(fakes.tg.chat_texts(chat)))
        fakes.run(lambda: fakes.dc.inject_message("hello from discord", ALICE, guild=False))
        channel = fakes.call(fakes.dc.dm_channel_id, ALICE)
        bot = str(fakes.dc.bot_id)

        def discord_answered() -> bool:
            messages = fakes.dc.channel_messages(channel)
            return any(
                m["author"]["id"] == bot and "echo: hello from discord" in m["content"]
                for m in messages
            )

        fakes.wait(discord_answered)
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=scaled(30))
    except BaseException:
        process.kill()
        process.wait(timeout=scaled(10))
        raise
    finally:
        reader.join(timeout=scaled(10))
        print("".join(lines))  # shown when a test fails
    err = "".join(lines)
    assert process.returncode == 0, err
    keys = {r.authorization for r in fakes.call(lambda: list(fakes.model.requests))}
    assert keys == {f"Bearer {API_KEY}"}  # the key was sent, the fake accepted it
    return err


def assert_quiet_and_masked(err: str) -> None:
    assert "voice will NOT be supported" not in err, err
    assert "HTTP Request" not in err, err  # httpx/httpx2's line per request
    assert err.count("telegram: stopped taking updates") == 1, err
    for secret in SECRETS:
        assert secret not in err, f"{secret!r} logged:\n{err}"
    assert "hello from" not in err and "echo:" not in err  # what people and the model wrote


@pytest.mark.slow  # a mnemo run serving both fakes, start to stop
def test_text_logs_are_quiet_log_the_stop_once_and_hold_no_secret(
    fakes: Fakes, tmp_path: Path
) -> None:
    err = served_and_stopped(fakes, tmp_path / "bot")
    assert_quiet_and_masked(err)
    assert "serving telegram (polling) and discord (" in err
    assert err.index("serving telegram") < err.index("stopping (SIGTERM)")


@pytest.mark.slow  # a mnemo run serving both fakes, start to stop
def test_json_logs_are_one_object_per_line(fakes: Fakes, tmp_path: Path) -> None:
    err = served_and_stopped(fakes, tmp_path / "bot", "logging:\n  format: json\n")
    assert_quiet_and_masked(err)
    records = []
    for line in err.splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            raise AssertionError(f"not a JSON line: {line!r}\n{err}") from None
    assert records
    for record in records:
        assert isinstance(record, dict) and set(record) >= {"time", "level", "logger", "message"}
    messages = [r["message"] for r in records]
    assert messages.count("telegram: stopped taking updates") == 1
    assert any(m.startswith("serving telegram (polling) and discord (") for m in messages)
