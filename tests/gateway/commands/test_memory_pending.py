"""/memory pending | approve | reject, and the staged-batch notice, through Conversations."""

from __future__ import annotations

from gateway.app import Services
from gateway.commands.choices import PendingChoices
from gateway.commands.memory_pending import PendingReview, StagedNotices
from gateway.messages import InboundMessage, ReplySink
from memory_core import Operation, Origin, PendingChanges, Proposal
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
    assert "1. add “Blog: https://a.example”" in listing
    assert "2. add “Site: https://b.example”" in listing
    assert "it contains a link" in listing and "learned in the background (review)" in listing
    assert "bob.example" not in listing
    assert "No memory changes are waiting" in await ask(services, "/memory pending", "99")


async def test_approve_by_number_and_reject_all(services: Services) -> None:
    stage(services, ALICE, "Blog: https://a.example", "Site: https://b.example")
    saved = await ask(services, "/memory approve 2")
    assert saved == "Saved: add “Site: https://b.example”"
    assert services.memory.read("user", f"telegram-{ALICE}").entries == ("Site: https://b.example",)
    dropped = await ask(services, "/memory reject all")
    assert dropped == "Dropped: add “Blog: https://a.example”"
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
