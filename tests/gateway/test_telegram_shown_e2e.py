"""`mnemo run` serving Telegram: what the person sees is what was written (issue 22, item 5).

The real `mnemo` script streams the fake model's Markdown through the real
python-telegram-bot to the fake Bot API. What a person sees is the message as it
stands after the last edit: its text, with its entities applied (each read in
UTF-16 units, as Telegram reads them). Text that looks like HTML (`a<b`,
`List<String>`, `<KEY>`, `&amp;`, `<div>` in a code block) must show as written,
only the Markdown markers gone; the bot's own lines (the `/memory` footer) too.
One `mnemo run` (and its own fakes) serves the module.
"""

from __future__ import annotations

import re

import pytest

from tests.fakes.openai import ToolCall
from tests.fakes.telegram import ChatMessage
from tests.gateway.e2e_support import fakes_fixture, served_fixture
from tests.gateway.test_telegram_e2e import ALICE, GROUP, MENTION, Fakes, Mnemo, start_mnemo

pytestmark = pytest.mark.slow  # a mnemo run of its own

WRITTEN = """\
If a<b and c>d, use **List<String>**; press <KEY> 😀 and keep &amp; as written. 你好，世界 🎉

```html
<div class="x">a & b</div>
```

Inline `x<y` works, and Map<K, V> too."""
SHOWN = (
    "If a<b and c>d, use List<String>; press <KEY> 😀 and keep &amp; as written. 你好，世界 🎉"
    '\n\n<div class="x">a & b</div>\n\nInline x<y works, and Map<K, V> too.'
)
"""What the person must see of `WRITTEN`: the Markdown markers gone, nothing else."""
FORMATTED = [("bold", "List<String>"), ("pre", '<div class="x">a & b</div>'), ("code", "x<y")]


def shown(message: ChatMessage) -> tuple[str, list[tuple[str, str]]]:
    """The message as the person sees it: its text, and each entity as (type, the text it
    covers), read in UTF-16 units and never splitting a surrogate pair (strict decoding)."""
    text = message.text or ""
    units = text.encode("utf-16-le")
    spans = []
    for entity in message.entities or []:
        start, end = entity["offset"], entity["offset"] + entity["length"]
        assert 0 <= start < end and 2 * end <= len(units), entity
        spans.append((entity["type"], units[2 * start : 2 * end].decode("utf-16-le")))
    return text, spans


fakes = fakes_fixture(Fakes)
served = served_fixture(start_mnemo, "shown")


def reply_to(fakes: Fakes, chat: int, text: str, **fields: object) -> ChatMessage:
    """The bot's one message answering `text` in `chat`, as it stands once the turn has
    ended: a follow-up is answered only after it (one session answers in order)."""
    seen = len(fakes.bot_messages(chat))
    fakes.text(chat, ALICE, text, **fields)
    fakes.text(chat, ALICE, f"{text} (follow-up)", **fields)
    fakes.reply(chat, seen, "echo: ")
    [answer, _] = fakes.bot_messages(chat)[seen:]
    return answer


def test_a_reply_that_looks_like_html_is_shown_as_written(fakes: Fakes, served: Mnemo) -> None:
    fakes.call(fakes.model.say, WRITTEN)  # streamed 3 characters at a time
    answer = reply_to(fakes, ALICE, "show me the tricky text")
    assert shown(answer) == (SHOWN, FORMATTED)


def test_the_same_in_a_group(fakes: Fakes, served: Mnemo) -> None:
    fakes.call(fakes.model.say, WRITTEN)
    answer = reply_to(fakes, GROUP, "@mnemo_bot show the group", entities=[MENTION])
    assert shown(answer) == (SHOWN, FORMATTED)


def test_the_memory_footer_and_an_entry_with_brackets_are_shown_as_written(
    fakes: Fakes, served: Mnemo
) -> None:
    fact = {"target": "user", "action": "add", "content": "User writes List<String> & a<b"}
    fakes.call(fakes.model.call_tools, ToolCall("memory", fact))
    fakes.call(fakes.model.say, "Noted.")
    assert shown(reply_to(fakes, ALICE, "remember: I write List<String> & a<b")) == ("Noted.", [])
    seen = len(fakes.bot_messages(ALICE))
    fakes.command(ALICE, ALICE, "/memory")
    fakes.reply(ALICE, seen, "/forget")
    [listing] = fakes.bot_messages(ALICE)[seen:]
    text, _ = shown(listing)
    entry, footer = text.split("\n")[1:]
    assert re.fullmatch(r"1\. User writes List<String> & a<b \(you, \d{4}-\d\d-\d\d\)", entry)
    assert footer == "Send /forget <number> to remove one, /memory history for the changes."
    assert text.startswith("What I remember about you (")
