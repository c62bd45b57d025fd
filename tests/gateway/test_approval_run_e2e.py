"""`mnemo run` as a subprocess serving Telegram, with ``memory.write_approval: background``.

The real `mnemo` script talks through python-telegram-bot to the fake Bot API and to the
fake model, which scripts Alice's reply and the review after it. The review's write is
staged: USER.md stays empty, and Alice's private chat gets one notice with Approve and
Reject buttons. Bob pressing Approve changes nothing; Alice pressing it writes the entry to
her USER.md, and the logs never carry it.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.openai import ToolCall
from tests.fakes.telegram import ChatMessage
from tests.gateway.e2e_support import WAITING, fakes_fixture, learning_section
from tests.gateway.test_telegram_e2e import ALICE, BOB, Fakes, Mnemo, start_mnemo

pytestmark = pytest.mark.slow  # a mnemo run of its own

FACT = "Restores old bicycles"

fakes = fakes_fixture(Fakes, scope="function")


def start(fakes: Fakes, workdir: Path) -> Mnemo:
    """`mnemo run` with a review after every reply and background approval on."""
    learning = learning_section(nudge=1, creation_nudge=0, write_approval="background")
    return start_mnemo(fakes, workdir, grace=5, learning=learning)


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
    fakes: Fakes, tmp_path: Path
) -> None:
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
        fakes.call(fakes.tg.inject_callback_query, ALICE, BOB, buttons["Approve"], shown.message_id)
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
