"""`mnemo run` as a subprocess serving Telegram, with ``memory.write_approval: background``.

The real `mnemo` script talks through python-telegram-bot to the fake Bot API and to the
fake model, which scripts Alice's reply and the review after it. The review's write is
staged: USER.md stays empty, and Alice's private chat gets one notice with Approve and
Reject buttons. Bob pressing Approve changes nothing; Alice pressing it writes the entry to
her USER.md, and the logs never carry it.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.fakes.openai import ToolCall
from tests.fakes.telegram import ChatMessage
from tests.gateway.processes import run_environment
from tests.gateway.test_telegram_e2e import ALICE, BOB, TOKEN, Fakes, Mnemo

pytestmark = pytest.mark.slow  # a mnemo run of its own

WAITING = "waits for your approval"
FACT = "Restores old bicycles"


def start(fakes: Fakes, workdir: Path) -> Mnemo:
    """`mnemo run` with a review after every reply and background approval on."""
    workdir.mkdir(parents=True, exist_ok=True)
    tg = fakes.tg.url
    (workdir / "mnemo.yaml").write_text(
        "shutdown_grace: 5\n"
        "telegram:\n"
        f"  base_url: {tg}/bot\n"
        f"  base_file_url: {tg}/file/bot\n"
        f'  allowed_users: ["{ALICE}", "{BOB}"]\n'
        "  edit_interval: 0.05\n"
        "memory:\n  nudge_interval: 1\n  write_approval: background\n"
        "skills:\n  creation_nudge_interval: 0\n",
        encoding="utf-8",
    )
    started = fakes.call(lambda: len(fakes.tg.calls_to("deleteWebhook")))
    env = run_environment(fakes.model.url, workdir, TELEGRAM_BOT_TOKEN=TOKEN)
    process = subprocess.Popen(
        [str(Path(sys.executable).parent / "mnemo"), "run"], stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env, cwd=workdir,
    )  # fmt: skip
    try:
        fakes.wait(lambda: len(fakes.tg.calls_to("deleteWebhook")) > started)
    except TimeoutError:
        process.kill()
        raise AssertionError(f"mnemo run did not start: {process.communicate()[1]}") from None
    return Mnemo(process, workdir / "data")


def notice(fakes: Fakes) -> ChatMessage:
    def found() -> ChatMessage | None:
        return next(
            (m for m in fakes.tg.chat_messages(ALICE) if m.text and WAITING in m.text), None
        )

    return fakes.wait(found)


def user_md(home: Path) -> str:
    path = home / "memories" / "users" / f"telegram-{ALICE}" / "USER.md"
    return path.read_text(encoding="utf-8") if path.exists() else ""


def test_mnemo_run_stages_a_review_write_and_the_persons_button_approves_it(
    tmp_path: Path,
) -> None:
    fakes = Fakes()
    try:
        mnemo = start(fakes, tmp_path / "bot")
        try:
            fakes.call(fakes.model.say, "What a hobby.")
            add = {"target": "user", "action": "add", "content": FACT}
            fakes.call(fakes.model.call_tools, ToolCall("memory", add))
            fakes.call(fakes.model.say, "Saved.")
            fakes.text(ALICE, ALICE, "I restore old bicycles on weekends")
            shown = notice(fakes)
            assert FACT in (shown.text or "") and user_md(mnemo.home) == ""
            assert shown.reply_markup is not None
            rows = shown.reply_markup["inline_keyboard"]
            buttons = {b["text"]: b["callback_data"] for row in rows for b in row}
            assert list(buttons) == ["Approve", "Reject"]

            seen = len(fakes.bot_messages(ALICE))
            fakes.call(
                fakes.tg.inject_callback_query, ALICE, BOB, buttons["Approve"], shown.message_id
            )
            assert "someone else" in fakes.reply(ALICE, seen, "someone else")
            assert user_md(mnemo.home) == ""

            seen = len(fakes.bot_messages(ALICE))
            fakes.call(
                fakes.tg.inject_callback_query, ALICE, ALICE, buttons["Approve"], shown.message_id
            )
            assert FACT in fakes.reply(ALICE, seen, "Saved:")
        finally:
            code, err = mnemo.stop()
        assert code == 0, err
        assert FACT in user_md(mnemo.home)
        assert FACT not in err  # the logs never carry what was learned
        assert not (mnemo.home / "memories" / "users" / f"telegram-{BOB}").exists()
    finally:
        fakes.close()
