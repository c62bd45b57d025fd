"""`mnemo run` serving Telegram while ``getUpdates`` misbehaves, end to end.

The real `mnemo` script polls the fake Bot API (the real python-telegram-bot, the
adapter's real backoff) and answers from the fake model. Through one run: a 200 with a
proxy's HTML page, a 403 and ``{"ok": false}`` are survived, a poison update is skipped
and confirmed once, the message after each is answered; then the token is refused while
polling and the process exits 1 with one line.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.fakes.openai import FakeOpenAI
from tests.fakes.telegram import FakeTelegram
from tests.gateway.processes import FakesThread, run_environment
from tests.timing import scaled

TOKEN = "4242:e2e-polling-token"
ALICE, BOB = 111, 222
NO_FIRST_NAME = {"id": BOB, "is_bot": False}  # PTB cannot parse a user without first_name


class Fakes(FakesThread):
    def __init__(self) -> None:
        self.tg = FakeTelegram(token=TOKEN)
        self.model = FakeOpenAI(echo_when_idle=True)
        super().__init__([self.tg, self.model])

    def answered(self, chat_id: int, text: str) -> None:
        self.wait(lambda: f"echo: {text}" in self.tg.chat_texts(chat_id))


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    world = Fakes()
    try:
        yield world
    finally:
        world.close()


def _launch(fakes: Fakes, workdir: Path) -> subprocess.Popen[str]:
    tg = fakes.tg.url
    (workdir / "mnemo.yaml").write_text(
        "shutdown_grace: 2\n"
        f"telegram:\n  base_url: {tg}/bot\n  base_file_url: {tg}/file/bot\n"
        f'  allowed_users: ["{ALICE}"]\n  edit_interval: 0.05\n'
        "memory:\n  nudge_interval: 1000\n"
        "skills:\n  creation_nudge_interval: 1000\n",
        encoding="utf-8",
    )
    env = run_environment(fakes.model.url, workdir, TELEGRAM_BOT_TOKEN=TOKEN)
    return subprocess.Popen(
        [str(Path(sys.executable).parent / "mnemo"), "run"], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=workdir,
    )  # fmt: skip


@pytest.mark.slow  # its own mnemo run, through three backoffs, to exit 1
def test_bad_answers_and_a_poison_update_are_survived_then_a_refused_token_exits_1(
    fakes: Fakes, tmp_path: Path
) -> None:
    tg = fakes.tg
    process = _launch(fakes, tmp_path)
    try:
        fakes.wait(lambda: tg.held_polls)  # polling
        fakes.call(tg.respond_next_text, "getUpdates", "<html><h1>Down for maintenance</h1>")
        fakes.call(tg.fail_next, "getUpdates", 403)
        fakes.call(tg.respond_next, "getUpdates", {"ok": False})
        poison = fakes.call(
            tg.inject_text, ALICE, BOB, "unreadable secret", **{"from": NO_FIRST_NAME}
        )
        fakes.call(tg.inject_text, ALICE, ALICE, "first")  # same batch as the poison
        fakes.answered(ALICE, "first")
        fakes.wait(lambda: len(tg.calls_to("getUpdates")) >= 4 and tg.held_polls)  # 3 bad
        fakes.call(tg.inject_text, ALICE, ALICE, "after the outage")
        fakes.answered(ALICE, "after the outage")
        fakes.call(tg.fail_next, "getUpdates", 401, description="Unauthorized")
        fakes.call(tg.inject_text, ALICE, ALICE, "last")  # the poll after it is refused
        _, err = process.communicate(timeout=scaled(30))
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 1, err
    assert err.splitlines()[-1] == (
        "mnemo: the telegram adapter stopped by itself (its error is logged above)"
    )
    assert err.count("polling failed") == 3  # one line each: HTML, 403, ok: false
    assert err.count("polling recovered") == 1
    assert f"update {poison['update_id']} could not be read and is skipped" in err
    assert "token was refused while polling" in err
    assert "unreadable secret" not in err and TOKEN not in err
    assert fakes.call(lambda: tg.deliveries[poison["update_id"]]) == 1
    assert "echo: last" in fakes.call(tg.chat_texts, ALICE)  # fetched before the refusal
