"""`literal`: a quoted text shows exactly as written on Telegram (the real renderer) and
on Discord (its rules, as `discord_reads` reads them), whatever Markdown it holds."""

from __future__ import annotations

import re
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.adapters.telegram_format import render
from gateway.delivery import INDENT, literal, unnumbered

TRICKY = [
    "2*3*4 and __init__.py and _underscores_ and [x](http://y)",
    "a `code` ~~gone~~ ~x~ ||spoiler|| <b>bold</b> <@123> &amp; $5 and $6$ x",
    "first line\n# heading\n- item\n+ item\n1. one\n2) two\n\n> quote\n    code\n"
    "```py\nx\n```\n===",
    r"path C:\Users\x and \[a = b = c\] and \(x = 12345\) and [a](b = c\) etc \)",
    "ends with a backslash\\\nnext",
    "![img](http://i.example/p.png) [ref]\n[ref]: http://evil.example",
    "tabs\tand   spaces  inside, \u00a0no-break too",
    "emoji 😀, 漢字 and e\u0301",
    r"$x^2$ and \alpha and x_1 and \frac{1}{2}",
    "site https://a.example/my_blog*x*_y_, then (http://b.example/a_b) and steam://run/1_2.",
    "-# subtext\n>>> all quoted\n* star",
]
_FORMATTING = {"bold", "italic", "underline", "strikethrough", "spoiler", "code", "pre"}


def shown(text: str) -> str:
    """How a quoted `text` should read: as written, its further lines indented."""
    return text.replace("\n", "\n" + INDENT)


def telegram_reads(source: str) -> tuple[str, tuple[dict[str, Any], ...]]:
    rendered = render(source)
    return rendered.text, rendered.entities


def discord_reads(source: str) -> str | None:
    """What Discord shows of `source`, or None where it would show markup: a backslash
    before any character but a letter, digit or space shows that character; ``<scheme:/…>``
    shows the address; an unescaped ``* _ ~ ` |``, ``<``, ``](`` or a block marker at a
    line start (``#``, ``>``, ``-``, ``+``, ``1.``, after spaces of any kind) is markup."""
    out, i = [], 0
    autolink = re.compile(r"<([^: >]+:/[^ >]+)>")
    while i < len(source):
        at_line = i == 0 or source[i - 1] == "\n"
        if at_line and re.match(r"[\s\u00a0]*(?:[#>+*-]|[0-9]+\.)", source[i:]):
            start = re.match(r"[\s\u00a0]*", source[i:])
            assert start is not None
            out.append(start.group(0))
            i += start.end()
            if source[i] != "\\":
                return None
        char = source[i]
        escaped = source[i + 1 : i + 2]
        if char == "\\" and escaped and not escaped.isalnum() and not escaped.isspace():
            out.append(escaped)
            i += 2
            continue
        if char == "<":
            link = autolink.match(source, i)
            if link is None:
                return None
            out.append(link.group(1))
            i = link.end()
            continue
        if char in "*_~`|" or source.startswith("](", i):
            return None
        out.append(char)
        i += 1
    return "".join(out)


@pytest.mark.parametrize("text", TRICKY)
def test_telegram_shows_the_text_as_written_without_formatting(text: str) -> None:
    source = "3\\. add “" + literal(text) + "” (learned in the background)"
    rendered, entities = telegram_reads(source)
    assert rendered == "3. add “" + shown(text) + "” (learned in the background)"
    for entity in entities:
        assert entity["type"] not in _FORMATTING, entity
        if entity["type"] == "text_link":  # an address shows as itself
            start = entity["offset"]
            assert rendered[start : start + entity["length"]] == entity["url"]


@pytest.mark.parametrize("text", TRICKY)
def test_discord_shows_the_text_as_written(text: str) -> None:
    assert discord_reads(literal(text)) == shown(text)


def test_what_needs_no_escaping_is_left_as_it_is() -> None:
    plain = "User lives in Zanzibar. Likes tea, 3 sugars; asks: why?"
    assert literal(plain) == plain
    assert literal("Blog: https://a.example") == "Blog: <https://a.example>"
    assert literal("2*3*4") == r"2\*3\*4"


def test_a_number_that_starts_a_line_is_not_a_list() -> None:
    for line in ("1. add “x”", "12. remove “y”"):
        escaped = unnumbered(line)
        assert escaped != line
        assert (
            telegram_reads(f"Waiting (2):\n{escaped}\n5\\. add")[0]
            == f"Waiting (2):\n{line}\n5. add"
        )
        assert discord_reads(escaped) == line
    assert unnumbered("Saved: 1. x") == "Saved: 1. x"


MARKDOWN = st.sampled_from(
    [*"*_~`|<>$&\\[]()#-+=!:@ \tab漢😀\n", "1.", "2)", "http://a.example/x_y*z", "steam://r/1"]
)


@settings(max_examples=150, deadline=None)
@given(st.lists(MARKDOWN, min_size=1, max_size=40))
def test_any_text_shows_as_written_on_both(pieces: list[str]) -> None:
    # Markdown drops spaces at the end of a line (documented); the text is an entry: stripped
    text = "\n".join(line.rstrip() for line in "".join(pieces).split("\n")).strip()
    if not text:
        return
    source = "add “" + literal(text) + "” (why)"
    rendered, entities = telegram_reads(source)
    assert rendered == "add “" + shown(text) + "” (why)"
    assert not [e for e in entities if e["type"] in _FORMATTING]
    assert discord_reads(literal(text)) == shown(text)
