"""Markdown to Telegram text and entities: offsets count UTF-16 code units, and
the text is Markdown only, so what looks like HTML shows as written."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.adapters.telegram_adapter import TelegramAdapter
from gateway.adapters.telegram_format import render, utf16_units
from gateway.config import TelegramConfig
from gateway.messages import CommandSpec
from tests.fakes.telegram import FakeTelegram
from tests.gateway.adapters.inboxes import Inbox


def _spans(text: str, entities: tuple[dict[str, object], ...]) -> list[tuple[str, str]]:
    """Each entity as (type, the text it covers), read like Telegram reads it: in
    UTF-16 units, inside the text, never splitting a surrogate pair (strict decoding)."""
    units = text.encode("utf-16-le")
    found = []
    for e in entities:
        offset, length = int(str(e["offset"])), int(str(e["length"]))
        assert offset >= 0 and length > 0 and 2 * (offset + length) <= len(units)
        found.append(
            (str(e["type"]), units[2 * offset : 2 * (offset + length)].decode("utf-16-le"))
        )
    return found


def test_emoji_and_cjk_shift_offsets_by_utf16_units() -> None:
    rendered = render("👩‍💻 **写代码** then *斜体* and [链接](https://example.org)")
    assert rendered.text == "👩‍💻 写代码 then 斜体 and 链接"
    assert _spans(rendered.text, rendered.entities) == [
        ("bold", "写代码"),
        ("italic", "斜体"),
        ("text_link", "链接"),
    ]
    assert rendered.units == utf16_units(rendered.text) > len(rendered.text)


def test_fenced_code_keeps_its_language_and_inline_code_its_text() -> None:
    rendered = render("Run:\n\n```python\nprint('😀')\n```\n\nthen `ls -l`")
    pre = [e for e in rendered.entities if e["type"] == "pre"]
    assert [e.get("language") for e in pre] == ["python"]
    assert ("pre", "print('😀')") in _spans(rendered.text, rendered.entities)
    assert ("code", "ls -l") in _spans(rendered.text, rendered.entities)


def test_lists_quotes_and_headings_render_as_text_and_entities() -> None:
    rendered = render("# Title\n\n- one\n- two\n\n> quoted")
    assert "one" in rendered.text and "#" not in rendered.text and "- one" not in rendered.text
    assert {"blockquote", "bold"} <= {str(e["type"]) for e in rendered.entities}


@settings(max_examples=150, deadline=None)
@given(st.text(alphabet=st.sampled_from(list("ab *_`[]()#>-<&;/\n😀中é")), max_size=60))
def test_every_entity_lies_inside_the_text(markdown: str) -> None:
    rendered = render(markdown)
    _spans(rendered.text, rendered.entities)


# --- Markdown only, never HTML ------------------------------------------------


@pytest.mark.parametrize(
    "written",
    [
        "If a<b and c>d then…",
        "List<String>",
        "Press <KEY> twice.",
        "Send /forget <number> to remove one.",
        "<b>bold</b> is shown as typed",
        "&amp; stays &amp;, &lt;b&gt; and &#60; too",
        "x < y & z > w",
        "<!-- not a comment --> and <?php echo 1; ?> and <![CDATA[x]]>",
        "<div>\nblock html\n</div>",
        "<String> opens the line, 中文<标签>, 😀<x>😀",
    ],
)
def test_text_that_looks_like_html_shows_as_written(written: str) -> None:
    rendered = render(written)
    assert (rendered.text, rendered.entities) == (written, ())


def test_the_issue_examples_keep_their_formatting_around_them() -> None:
    rendered = render("**List<String>** and *a<b>c* in [Map<K, V>](https://example.org/?a=1&b=2)")
    assert rendered.text == "List<String> and a<b>c in Map<K, V>"
    assert _spans(rendered.text, rendered.entities) == [
        ("bold", "List<String>"),
        ("italic", "a<b>c"),
        ("text_link", "Map<K, V>"),
    ]
    assert rendered.entities[2]["url"] == "https://example.org/?a=1&b=2"


def test_angle_brackets_and_ampersands_in_code_show_as_written() -> None:
    rendered = render(
        "Compare `x < y`, `List<String>` and `&amp;`:\n\n```html\n<b>&amp;</b>\n<KEY>\n```"
    )
    assert rendered.text == "Compare x < y, List<String> and &amp;:\n\n<b>&amp;</b>\n<KEY>"
    assert _spans(rendered.text, rendered.entities) == [
        ("code", "x < y"),
        ("code", "List<String>"),
        ("code", "&amp;"),
        ("pre", "<b>&amp;</b>\n<KEY>"),
    ]


def test_markdown_inside_what_looked_like_an_html_block_is_still_markdown() -> None:
    rendered = render("<div>\n**bold** &amp;\n</div>")
    assert rendered.text == "<div>\nbold &amp;\n</div>"
    assert _spans(rendered.text, rendered.entities) == [("bold", "bold")]


def test_html_in_a_quote_a_list_and_a_table_shows_as_written() -> None:
    rendered = render("> <p>quoted</p>\n\n- item <b>\n\n| <K> | &amp; |\n|---|---|\n| a | b |")
    assert "<p>quoted</p>" in rendered.text and "item <b>" in rendered.text
    assert "<K>" in rendered.text and "&amp;" in rendered.text


def test_backslash_escapes_the_writer_made_are_read_once() -> None:
    assert render(r"\<b> and \&amp; and \\<i>").text == r"<b> and &amp; and \<i>"


def test_autolinks_spoilers_latex_and_prices_keep_their_meaning() -> None:
    link = render("See <https://example.org/a?b=1&c=2> now")
    assert link.text == "See https://example.org/a?b=1&c=2 now"
    assert link.entities[0]["url"] == "https://example.org/a?b=1&c=2"
    spoiler = render("||the <answer>|| is 42")
    assert _spans(spoiler.text, spoiler.entities) == [("spoiler", "the <answer>")]
    latex = render(r"so \(\alpha<x>\beta\) holds")
    assert _spans(latex.text, latex.entities) == [("code", "α<x>β")]
    assert render("costs $5 <each> or $10 <both>").text == "costs $5 <each> or $10 <both>"
    assert render("$a<b>$5").text == "$a<b>$5"


# Plain text: no Markdown marker at all (no * _ ` [ ] ( ) \ ~ $ | ! = + . # -),
# no ":" or "@" (which make <a:b> and <a@b> autolinks, Markdown links), one
# line, no surrounding spaces (CommonMark trims a paragraph, four leading spaces
# are code), no leading ">" (a quote). Tags, comments, character references and
# astral emoji are all in.
_PLAIN = st.sampled_from(
    [
        *"abzKV019 ;/?\"'<>&<>&",
        "😀",
        "👩‍💻",
        "𝄞",
        "中",
        "文字",
        "é",
        "<b>",
        "</b>",
        "<x y='1'>",
        "<!--",
        "-->",
        "&amp;",
        "&#60;",
        "&lt;",
        "&copy;",
        "<?",
        "?>",
        "<div>",
        "<![CDATA[",
    ]
)
_plain_text = st.lists(_PLAIN, min_size=1, max_size=30).map("".join).map(str.strip)
_plain_text = _plain_text.filter(lambda text: not text.startswith(">"))


@settings(max_examples=300, deadline=None)
@given(_plain_text)
def test_plain_text_with_brackets_and_ampersands_is_shown_as_written(written: str) -> None:
    rendered = render(written)
    assert (rendered.text, rendered.entities) == (written, ())


@settings(max_examples=200, deadline=None)
@given(_plain_text.filter(bool), _plain_text.filter(bool), _plain_text)
def test_formatted_plain_text_is_shown_as_written_inside_its_entities(
    bold: str, code: str, tail: str
) -> None:
    rendered = render(f"**{bold}** then `{code}` {tail}".rstrip())
    assert rendered.text == f"{bold} then {code} {tail}".rstrip()
    assert _spans(rendered.text, rendered.entities) == [("bold", bold), ("code", code)]


# --- What the person sees, through the real client and the fake Bot API -------

TOKEN = "123:ABC"


@pytest.fixture
async def tg() -> AsyncIterator[FakeTelegram]:
    async with FakeTelegram(token=TOKEN) as fake:
        yield fake


async def test_a_reply_that_looks_like_html_arrives_as_written(tg: FakeTelegram) -> None:
    reply = "If a<b and c>d, use **List<String>**; press <KEY> 😀 &amp; `x < y`"
    config = TelegramConfig(
        token=TOKEN,
        base_url=tg.url + "/bot",
        base_file_url=tg.url + "/file/bot",
        edit_interval=0.05,
        allowed_users=("*",),
    )
    adapter = TelegramAdapter(config, poll_timeout=1, backoff=(0.01, 0.05))
    await adapter.start(Inbox(reply=lambda m: reply), [CommandSpec("help", "what the bot is")])
    try:
        tg.inject_text(42, 42, "show me")
        [message] = await tg.wait_until(lambda: tg.chat_messages(42))
    finally:
        await adapter.close()
    text = message.text or ""
    assert text == "If a<b and c>d, use List<String>; press <KEY> 😀 &amp; x < y"
    assert _spans(text, tuple(message.entities or ())) == [
        ("bold", "List<String>"),
        ("code", "x < y"),
    ]
