"""Markdown to Telegram text and entities: offsets count UTF-16 code units."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gateway.adapters.telegram_format import render, utf16_units


def _spans(text: str, entities: tuple[dict[str, object], ...]) -> list[tuple[str, str]]:
    units = text.encode("utf-16-le")
    found = []
    for e in entities:
        offset, length = int(str(e["offset"])), int(str(e["length"]))
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
@given(st.text(alphabet=st.sampled_from(list("ab *_`[]()#>-\n😀中é")), max_size=60))
def test_every_entity_lies_inside_the_text(markdown: str) -> None:
    rendered = render(markdown)
    size = utf16_units(rendered.text)
    for entity in rendered.entities:
        offset, length = int(str(entity["offset"])), int(str(entity["length"]))
        assert offset >= 0 and length > 0 and offset + length <= size
