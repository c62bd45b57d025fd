"""/memory pending | approve | reject, and the staged-batch notice, through Conversations."""

from __future__ import annotations

import time

from gateway.access import AccessPolicy
from gateway.app import Services, build_conversations
from gateway.commands.choices import PendingChoices
from gateway.commands.memory_pending import PendingReview, StagedNotices
from gateway.delivery import INDENT, ChannelLimits, ChatThrottle, StreamedReply, literal
from gateway.messages import InboundMessage, ReplySink
from memory_core import Evidence, Operation, Origin, PendingChanges, Proposal
from tests.gateway.delivery.fake_channel import FakeChannel, FakeClock
from tests.gateway.serving import private, serving
from tests.gateway.sinks import ListSink

ALICE, BOB = "42", "77"
REVIEW = Origin("review", session_id=1)


def stage(services: Services, user: str, *contents: str) -> None:
    proposals = [Proposal("add", c, None, "it contains a link", True) for c in contents]
    PendingChanges(services.memory).stage(f"telegram-{user}", proposals, REVIEW, "batch")


async def ask(services: Services, text: str, user: str = ALICE, group: bool = False) -> str:
    conversations = serving(services)
    sink = ListSink()
    message = private(text, user)
    if group:
        message = InboundMessage("telegram", "-100", "group", user, text)
    await conversations.handle(message, sink)
    return sink.replies[-1]


async def test_pending_lists_only_the_persons_own_changes(services: Services) -> None:
    stage(services, ALICE, "Blog: https://a.example", "Site: https://b.example")
    stage(services, BOB, "Bob's page: https://bob.example")
    listing = await ask(services, "/memory pending")
    assert "1\\. add “Blog: <https://a.example>”" in listing  # Markdown: no list, no markup
    assert "2\\. add “Site: <https://b.example>”" in listing
    assert "it contains a link" in listing and "learned in the background (review)" in listing
    assert "bob.example" not in listing
    assert "No memory changes are waiting" in await ask(services, "/memory pending", "99")


async def test_approve_by_number_and_reject_all(services: Services) -> None:
    stage(services, ALICE, "Blog: https://a.example", "Site: https://b.example")
    saved = await ask(services, "/memory approve 2")
    assert saved == "Saved: add “Site: <https://b.example>”"
    assert services.memory.read("user", f"telegram-{ALICE}").entries == ("Site: https://b.example",)
    dropped = await ask(services, "/memory reject all")
    assert dropped == "Dropped: add “Blog: <https://a.example>”"
    assert "Nothing waits as 1" in await ask(services, "/memory approve 1")
    assert services.memory.read("user", f"telegram-{ALICE}").entries == ("Site: https://b.example",)


async def test_bob_cannot_approve_alices_change_by_number(services: Services) -> None:
    stage(services, ALICE, "Blog: https://a.example")
    assert "Nothing waits as 1" in await ask(services, "/memory approve 1", BOB)
    assert services.memory.read("user", f"telegram-{BOB}").entries == ()
    assert len(PendingChanges(services.memory).list(f"telegram-{ALICE}")) == 1


async def test_bad_input_and_groups_change_nothing(services: Services) -> None:
    stage(services, ALICE, "Blog: https://a.example")
    assert "works only in a private chat" in await ask(services, "/memory approve all", group=True)
    assert "/memory approve <number>" in await ask(services, "/memory approve two")
    assert "/memory reject <number>" in await ask(services, "/memory reject")
    assert len(PendingChanges(services.memory).list(f"telegram-{ALICE}")) == 1
    assert services.memory.read("user", f"telegram-{ALICE}").entries == ()


async def test_a_pinned_replace_is_refused_in_one_line_after_a_change(services: Services) -> None:
    key = f"telegram-{ALICE}"
    services.memory.apply("user", key, [Operation("add", content="Lives in Paris")])
    replace = Proposal("replace", "Lives in Lyon", "Lives in Paris", "waits")
    PendingChanges(services.memory).stage(key, [replace], REVIEW, "b")
    services.memory.apply(
        "user", key, [Operation("replace", content="Lives in Nice", old_text="Paris")]
    )
    answer = await ask(services, "/memory approve all")
    assert answer.count("\n") == 0 and answer.startswith("Not saved: replace")
    assert "edited or removed since" in answer
    assert services.memory.read("user", key).entries == ("Lives in Nice",)


async def test_the_notice_goes_only_to_a_known_private_chat(services: Services) -> None:
    await ask(services, "/memory pending")  # a command stores no session: none known yet
    sent: list[tuple[InboundMessage, ListSink]] = []

    def sink_for(message: InboundMessage) -> ReplySink:
        sink = ListSink()
        sent.append((message, sink))
        return sink

    review = PendingReview(PendingChanges(services.memory), PendingChoices())
    notices = StagedNotices(
        review, services.sessions, sink_for, lambda: 0.0, services.locales.of_person
    )
    stage(services, ALICE, "Blog: https://a.example")
    staged = PendingChanges(services.memory).list(f"telegram-{ALICE}")
    assert await notices.announce("telegram", f"telegram-{ALICE}", staged) is False
    assert sent == []

    conversations = serving(services)
    await conversations.handle(private("hello", ALICE), ListSink())  # now she has a chat
    await conversations.handle(InboundMessage("telegram", "-100", "group", ALICE, "hi"), ListSink())
    assert await notices.announce("telegram", f"telegram-{ALICE}", staged) is True
    [(to, sink)] = sent
    assert (to.chat_id, to.chat_type) == (ALICE, "private")
    assert "waits for your approval" in sink.replies[0]
    assert "/memory approve 1" in sink.replies[0]
    assert [b.label for b in sink.buttons] == ["Approve", "Reject"]


LONG = (
    "User keeps notes in __init__.py, computes 2*3*4 every morning, calls it _underscores_ "
    "and writes [x](http://y) in them; "
)
LONG = (LONG * 3)[:299] + "."  # 300 characters, Markdown all through


def notices_for(
    services: Services, choices: PendingChoices
) -> tuple[StagedNotices, list[ListSink]]:
    sinks: list[ListSink] = []

    def sink_for(message: InboundMessage) -> ReplySink:
        sinks.append(ListSink())
        return sinks[-1]

    review = PendingReview(PendingChanges(services.memory), choices)
    notices = StagedNotices(
        review, services.sessions, sink_for, time.time, services.locales.of_person
    )
    return notices, sinks


async def test_every_line_quotes_the_whole_entry_as_written(services: Services) -> None:
    stage(services, ALICE, LONG, "second\n# not a heading\n1. not a list")
    listing = await ask(services, "/memory pending")
    assert f"1\\. add “{literal(LONG)}”" in listing
    assert f"2\\. add “second\n{INDENT}\\# not a heading\n{INDENT}1\\. not a list”" in listing
    assert "\n\n2\\. add" in listing  # a change of several lines: one paragraph each
    saved = await ask(services, "/memory approve 1")
    assert saved == f"Saved: add “{literal(LONG)}”"
    assert services.memory.read("user", f"telegram-{ALICE}").entries == (LONG,)
    dropped = await ask(services, "/memory reject 2")
    assert dropped.startswith("Dropped: add “second\n")


async def test_a_change_not_grounded_shows_its_reason_and_the_closest_message(
    services: Services,
) -> None:
    said = (Evidence(7, "guess which city I live in"),)
    guess = Proposal(
        "add", "User lives in Zanzibar.", None, "you asked, not said", evidence=said, grounded=False
    )
    berlin = Proposal(
        "add", "Lives in Berlin", None, "waits", evidence=(Evidence(8, "I live in Berlin"),)
    )
    PendingChanges(services.memory).stage(f"telegram-{ALICE}", [guess, berlin], REVIEW, "b")
    listing = await ask(services, "/memory pending")
    assert (
        "1\\. add “User lives in Zanzibar.” (learned in the background (review); "
        "you asked, not said — closest: “guess which city I live in”), until "
    ) in listing
    assert "waits — you said: “I live in Berlin”" in listing
    await ask(services, "/memory approve all")  # the closest message grounds nothing
    origins = {o.text: o.evidence for o in services.memory.origins("user", f"telegram-{ALICE}")}
    assert origins == {"User lives in Zanzibar.": (), "Lives in Berlin": berlin.evidence}


async def test_a_long_replace_puts_its_new_entry_on_a_line_of_its_own(services: Services) -> None:
    key = f"telegram-{ALICE}"
    old, new = "Lives in Paris " + "p" * 150, "Lives in Lyon " + "l" * 150
    services.memory.apply("user", key, [Operation("add", content=old)])
    PendingChanges(services.memory).stage(
        key, [Proposal("replace", new, old, "waits")], REVIEW, "b"
    )
    listing = await ask(services, "/memory pending")
    assert f"1\\. replace “{old}”\n{INDENT}with “{new}” (" in listing


async def test_a_batch_keeps_its_buttons_when_settings_offers_a_list(services: Services) -> None:
    choices = PendingChoices()
    everyone = AccessPolicy.everyone(services.config.admins)
    conversations = build_conversations(services, everyone, choices=choices)
    await conversations.handle(private("hello", ALICE), ListSink())  # her private chat
    notices, sinks = notices_for(services, choices)
    stage(services, ALICE, "Blog: https://a.example")
    staged = PendingChanges(services.memory).list(f"telegram-{ALICE}")
    assert await notices.announce("telegram", f"telegram-{ALICE}", staged)
    approve = {b.label: b.payload for b in sinks[0].buttons}["Approve"]
    settings = ListSink()
    await conversations.handle(private("/settings", ALICE), settings)
    assert settings.buttons  # another list, offered later
    pressed = ListSink()
    await conversations.choose(private("", ALICE), approve, pressed)
    assert pressed.replies == ["Saved: add “Blog: <https://a.example>”"]
    assert services.memory.read("user", f"telegram-{ALICE}").entries == ("Blog: https://a.example",)
    again = ListSink()
    await conversations.choose(private("", ALICE), approve, again)
    assert "not valid any more" in again.replies[0]  # still single-use


async def test_a_long_notice_is_split_between_changes_with_the_buttons_last(
    services: Services,
) -> None:
    entries = [f"Entry {n}: " + f"word{n} " * 80 + "2*3*4." for n in range(6)]  # ~570 each
    proposals = [Proposal("add", e, None, "waits") for e in entries]
    staged = PendingChanges(services.memory).stage(f"telegram-{ALICE}", proposals, REVIEW, "b")
    review = PendingReview(PendingChanges(services.memory), PendingChoices())
    locale = services.locales.of_person(f"telegram-{ALICE}")
    notice = review.notice(locale, f"telegram-{ALICE}", staged, time.time())
    clock = FakeClock()
    channel = FakeChannel(clock, ChannelLimits(max_units=2000, units=len))
    reply = StreamedReply(
        channel,
        ChatThrottle(0.0, clock, clock.sleep),
        reply_to=None,
        private=True,
        sleep=clock.sleep,
    )
    await reply.write(notice.text)
    await reply.offer(notice.choices)
    await reply.finish()
    sent = channel.of("send")
    assert len(sent) >= 2 and all(len(call.text) <= 2000 for call in sent)
    for entry in entries:  # each entry whole, in one message
        assert sum(f"“{literal(entry)}”" in call.text for call in sent) == 1
    assert [bool(call.choices) for call in sent] == [False] * (len(sent) - 1) + [True]
    assert "/memory approve 1 2 3 4 5 6" in sent[-1].text
