"""Servers that answer oddly (issue 36), against the real `mnemo run`: a flood wait and a
404 on setMyCommands at start, text before a tool call, a model stream chunk that is not
JSON, and a Telegram answer PTB cannot parse. One run goes through all four."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.fakes.openai import Fault, ToolCall
from tests.fakes.telegram import FakeTelegram
from tests.gateway.e2e_support import fakes_fixture
from tests.gateway.test_telegram_e2e import ALICE, TOKEN, Fakes, launch
from tests.timing import scaled

fakes = fakes_fixture(Fakes)


def sent_texts(tg: FakeTelegram) -> list[str]:
    """The texts of every sendMessage call (on the fakes' loop)."""
    return [str(call.params.get("text")) for call in tg.calls_to("sendMessage")]


@pytest.mark.slow  # its own mnemo run, from start to stop
def test_mnemo_run_takes_odd_answers_in_its_stride(fakes: Fakes, tmp_path: Path) -> None:
    fakes.call(fakes.tg.fail_next, "setMyCommands", 429, 1)  # waited out, then
    fakes.call(fakes.tg.fail_next, "setMyCommands", 404, None, "Not Found")  # not a refused token
    started = fakes.call(lambda: len(fakes.tg.calls_to("deleteWebhook")))
    process = launch(fakes, tmp_path / "bot", 1.0, TOKEN)
    try:
        fakes.wait(lambda: len(fakes.tg.calls_to("deleteWebhook")) > started, timeout=scaled(60))
        assert process.poll() is None, "mnemo run stopped at a cosmetic call"

        fakes.call(fakes.model.call_tools, ToolCall("no_such_tool", {}), text="Let me note that.")
        fakes.call(fakes.model.say, "Done.")
        fakes.text(ALICE, ALICE, "note that I like tea")
        assert fakes.reply(ALICE, 0, "Done.", timeout=60) == "Let me note that.\n\nDone."

        fakes.call(fakes.model.say, "never read", fault=Fault.garbage(after=1))
        fakes.text(ALICE, ALICE, "hello again")
        fakes.reply(ALICE, 1, "sent something I could not read", timeout=60)

        fakes.call(fakes.tg.respond_next_text, "sendMessage", "<html>200 OK</html>")
        fakes.call(fakes.model.say, "The third answer.")
        fakes.text(ALICE, ALICE, "third")
        fakes.wait(lambda: "The third answer." in sent_texts(fakes.tg), timeout=scaled(60))
        fakes.call(fakes.model.say, "The fourth answer.")
        fakes.text(ALICE, ALICE, "fourth")
        fakes.reply(ALICE, 2, "The fourth answer.", timeout=60)
    finally:
        process.terminate()
        _, err = process.communicate(timeout=scaled(60))
    third = fakes.call(sent_texts, fakes.tg).count("The third answer.")
    assert third == 1  # taken as delivered: never sent again
    assert "token was refused" not in err
    assert err.count("commands menu was not set") == 1
    assert err.count("taken as delivered") == 1
    assert err.count("not JSON") == 2  # the model's chunk, and Telegram's answer: a line each
    assert "Traceback" not in err, err
