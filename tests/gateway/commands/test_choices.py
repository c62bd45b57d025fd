"""`PendingChoices`: tokens are unguessable, bound to their owner, one-shot and expiring."""

from __future__ import annotations

import pytest

from gateway.commands import CommandReply
from gateway.commands.choices import MAX_LISTS, PendingChoices
from gateway.errors import ChoiceRefusedError
from gateway.messages import CHOICE_PREFIX
from tests.clock import Clock

OPTIONS = [("first entry", "value one"), ("second entry", "value two")]


def test_payloads_are_distinct_random_tokens() -> None:
    table = PendingChoices()
    choices = table.offer("telegram-1", "forget", OPTIONS, "v1")
    assert [c.label for c in choices] == ["first entry", "second entry"]
    tokens = [c.payload.removeprefix(CHOICE_PREFIX) for c in choices]
    assert len(set(tokens)) == 2 and all(len(t) >= 22 for t in tokens)
    assert "value" not in "".join(c.payload for c in choices)  # nothing to edit in a payload
    assert all(len(c.payload.encode()) <= 64 for c in choices)  # Telegram's callback_data limit


def test_the_owner_takes_a_choice_once() -> None:
    table = PendingChoices()
    first, _ = table.offer("telegram-1", "forget", OPTIONS, "v1")
    picked = table.take(first.payload, "telegram-1")
    assert (picked.value, picked.version, picked.command) == ("value one", "v1", "forget")
    with pytest.raises(ChoiceRefusedError, match="not valid"):
        table.take(first.payload, "telegram-1")
    assert len(table) == 0  # its siblings went with it


def test_another_person_is_refused_and_does_not_spend_it() -> None:
    table = PendingChoices()
    first, _ = table.offer("telegram-1", "forget", OPTIONS, "v1")
    with pytest.raises(ChoiceRefusedError, match="someone else"):
        table.take(first.payload, "telegram-2")
    assert table.take(first.payload, "telegram-1").value == "value one"


@pytest.mark.parametrize("payload", ["", "choice:", "choice:AAAAAAAAAAAAAAAAAAAAAA", "x" * 10_000])
def test_forged_payloads_are_refused(payload: str) -> None:
    table = PendingChoices()
    table.offer("telegram-1", "forget", OPTIONS, "v1")
    with pytest.raises(ChoiceRefusedError, match="not valid"):
        table.take(payload, "telegram-1")
    assert len(table) == 2


def test_choices_expire() -> None:
    clock = Clock()
    table = PendingChoices(ttl=600, clock=clock)
    first, _ = table.offer("telegram-1", "forget", OPTIONS, "v1")
    clock.now += 601
    with pytest.raises(ChoiceRefusedError, match="expired"):
        table.take(first.payload, "telegram-1")
    table.offer("telegram-2", "forget", OPTIONS, "v1")
    clock.now += 601
    table.offer("telegram-3", "forget", OPTIONS, "v1")  # purges the expired offers
    assert len(table) == 2


def test_a_new_offer_withdraws_the_older_one() -> None:
    table = PendingChoices()
    old, _ = table.offer("telegram-1", "forget", OPTIONS, "v1")
    table.offer("telegram-1", "forget", OPTIONS, "v2")
    with pytest.raises(ChoiceRefusedError):
        table.take(old.payload, "telegram-1")
    assert len(table) == 2


def test_numbered_answers_pick_from_the_latest_offer() -> None:
    table = PendingChoices()
    with pytest.raises(ChoiceRefusedError, match="no open list"):
        table.take_numbered("telegram-1", "forget", 1)
    table.offer("telegram-1", "forget", OPTIONS, "v1")
    with pytest.raises(ChoiceRefusedError, match="from 1 to 2"):
        table.take_numbered("telegram-1", "forget", 3)
    with pytest.raises(ChoiceRefusedError, match="no open list"):
        table.take_numbered("telegram-2", "forget", 1)  # someone else has no list
    assert table.take_numbered("telegram-1", "forget", 2).value == "value two"
    with pytest.raises(ChoiceRefusedError, match="no open list"):
        table.take_numbered("telegram-1", "forget", 1)


def test_a_reply_renders_its_choices_as_numbered_text() -> None:
    choices = PendingChoices().offer("telegram-1", "forget", OPTIONS, "v1")
    text = CommandReply("Which one?", choices).as_text()
    assert text == "Which one?\n1. first entry\n2. second entry"


def test_a_list_under_its_own_key_stands_beside_the_command_lists() -> None:
    table = PendingChoices()
    approve, reject = table.offer("telegram-1", "memory", OPTIONS, "pending", key="batch-a")
    first, _ = table.offer("telegram-1", "settings", OPTIONS, "v1")
    table.offer("telegram-1", "forget", OPTIONS, "v1")  # replaces the /settings list only
    with pytest.raises(ChoiceRefusedError, match="not valid"):
        table.take(first.payload, "telegram-1")
    with pytest.raises(ChoiceRefusedError, match="someone else"):
        table.take(approve.payload, "telegram-2")
    assert table.take(approve.payload, "telegram-1").value == "value one"
    with pytest.raises(ChoiceRefusedError, match="not valid"):
        table.take(reject.payload, "telegram-1")  # one pick per list
    assert table.take_numbered("telegram-1", "forget", 2).value == "value two"
    assert len(table) == 0


def test_each_key_holds_one_list_and_a_person_at_most_max_lists() -> None:
    table = PendingChoices()
    old, _ = table.offer("telegram-1", "memory", OPTIONS, "pending", key="batch-a")
    table.offer("telegram-1", "memory", OPTIONS, "pending", key="batch-a")
    with pytest.raises(ChoiceRefusedError, match="not valid"):
        table.take(old.payload, "telegram-1")
    lists = [
        table.offer("telegram-1", "memory", OPTIONS, "pending", key=f"batch-{n}")
        for n in range(MAX_LISTS + 1)
    ]
    assert len(table) == 2 * MAX_LISTS  # the oldest list went
    with pytest.raises(ChoiceRefusedError, match="not valid"):
        table.take(lists[0][0].payload, "telegram-1")
    assert table.take(lists[-1][0].payload, "telegram-1").value == "value one"
    table.withdraw("telegram-1")  # an erasure withdraws every list
    assert len(table) == 0


def test_numbered_answers_pick_from_the_latest_list_of_the_command() -> None:
    table = PendingChoices()
    table.offer("telegram-1", "memory", [("a", "batch a")], "pending", key="batch-a")
    table.offer("telegram-1", "memory", [("b", "batch b")], "pending", key="batch-b")
    table.offer("telegram-1", "settings", OPTIONS, "v1")
    assert table.take_numbered("telegram-1", "memory", 1).value == "batch b"
    assert table.take_numbered("telegram-1", "memory", 1).value == "batch a"
    assert table.take_numbered("telegram-1", "settings", 1).value == "value one"
