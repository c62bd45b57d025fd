"""`/recall <a time alone>` lists that window's conversations, and every /recall date and
time phrase is in the person's zone, read at the bot's (injected) clock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from datetime import UTC, datetime
from pathlib import Path

import pytest

from gateway.app import Services, open_services
from gateway.messages import InboundMessage
from memory_core import NewMessage, SessionOrigin
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import config_for, serving
from tests.gateway.sinks import ListSink
from tests.timing import scaled

ADA, BOB = "42", "77"
GROUP = "-100"
WEDNESDAY = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)  # last week: Mon 23 to Sun 29 November


@pytest.fixture
async def stack() -> AsyncIterator[AsyncExitStack]:
    async with AsyncExitStack() as opened:
        yield opened


async def open_at(
    stack: AsyncExitStack,
    fake: FakeOpenAI,
    home: Path,
    now: datetime,
    zone: str = "UTC",
    timeout: float = 5.0,
) -> Services:
    """Services whose clock reads `now` and whose default zone is `zone`."""
    text = f'clock_start: "{now.isoformat()}"\nlocale:\n  timezone: {zone}\n'
    config = config_for(fake.url, home / "data", recap_timeout=scaled(timeout), file_text=text)
    return await stack.enter_async_context(open_services(config))


def message(
    text: str, user: str = ADA, group: bool = False, language: str | None = None
) -> InboundMessage:
    return InboundMessage(
        platform="telegram",
        chat_id=GROUP if group else user,
        chat_type="group" if group else "private",
        user_id=user,
        text=text,
        language=language,
    )


async def seed(services: Services, user: str, words: str, when: str, group: bool = False) -> int:
    """An ended conversation of `user` at `when` (an ISO moment in UTC)."""
    chat = GROUP if group else user
    stamp = datetime.fromisoformat(when).replace(tzinfo=UTC).timestamp()
    origin = SessionOrigin(
        session_key=f"seed:{user}:{chat}:{stamp}",
        source="telegram",
        user_key=f"telegram-{user}",
        chat_id=chat,
        chat_type="group" if group else "private",
    )
    result = await services.sessions.append_messages(
        origin=origin,
        messages=[
            NewMessage("user", words, stamp, key="0"),
            NewMessage("assistant", "Noted.", stamp + 1, key="1"),
        ],
    )
    await services.sessions.end_session(result.session_id, "new")
    return result.session_id


async def ask(services: Services, msg: InboundMessage) -> str:
    sink = ListSink()
    await serving(services).handle(msg, sink)
    return sink.replies[-1]


def recap_requests(fake: FakeOpenAI) -> list[str]:
    return [str(r.body) for r in fake.requests if r.path.endswith("/chat/completions")]


async def test_a_time_alone_lists_that_weeks_conversations_in_the_senders_scope(
    fake: FakeOpenAI, tmp_path: Path, stack: AsyncExitStack
) -> None:
    services = await open_at(stack, fake, tmp_path, WEDNESDAY)
    await seed(services, ADA, "pasta recipe with Ada", "2026-11-25T10:00")
    await seed(services, ADA, "group trip plans", "2026-11-26T10:00", group=True)
    await seed(services, ADA, "two weeks ago dentist", "2026-11-18T10:00")
    await seed(services, ADA, "this week gym", "2026-12-01T10:00")
    await seed(services, BOB, "Bob's secret salary", "2026-11-25T11:00")
    await seed(services, BOB, "Bob in the group", "2026-11-27T11:00", group=True)
    fake.say("LINE-ONE")
    fake.say("LINE-TWO")
    reply = await ask(services, message("/recall last week"))
    assert reply.startswith("Our conversations from 2026-11-23 to 2026-11-29, newest first:")
    assert reply.index("2026-11-26 (telegram, a group):") < reply.index(
        "2026-11-25 (telegram, a private chat):"
    )
    assert "LINE-ONE" in reply and "LINE-TWO" in reply
    sent = recap_requests(fake)
    assert len(sent) == 2 and "'stream': True" not in str(sent)  # recaps only, no turn
    assert any("pasta recipe" in s for s in sent) and any("group trip" in s for s in sent)
    for leaked in ("dentist", "gym", "Bob"):
        assert not any(leaked in s for s in sent)
        assert leaked not in reply
    assert "2026-11-18" not in reply and "2026-12-01" not in reply

    fake.say("LINE-GROUP")
    reply = await ask(services, message("/recall last week", group=True))
    assert reply.startswith("Our conversations in this group, from 2026-11-23 to 2026-11-29")
    assert "LINE-GROUP" in reply and reply.count("(telegram,") == 1
    assert "Bob" not in recap_requests(fake)[-1] and "pasta" not in recap_requests(fake)[-1]


async def test_a_window_with_nothing_says_so_with_its_dates(
    fake: FakeOpenAI, tmp_path: Path, stack: AsyncExitStack
) -> None:
    services = await open_at(stack, fake, tmp_path, WEDNESDAY)
    await seed(services, ADA, "pasta recipe", "2026-11-25T10:00")
    assert await ask(services, message("/recall yesterday")) == "No conversations on 2026-12-01."
    reply = await ask(services, message("/recall yesterday", group=True))
    assert reply == "No conversations in this group, on 2026-12-01."
    assert recap_requests(fake) == []


async def test_at_most_ten_are_listed_and_the_rest_counted_and_a_failed_line_shows_first_words(
    fake: FakeOpenAI, tmp_path: Path, stack: AsyncExitStack
) -> None:
    services = await open_at(stack, fake, tmp_path, WEDNESDAY)
    for hour in range(12):
        await seed(services, ADA, f"topic {hour:02d}\nsecond line", f"2026-12-01T{hour:02d}:00")
    reply = await ask(services, message("/recall yesterday"))  # no line scripted: each fails
    assert reply.count("2026-12-01 (telegram, a private chat):") == 10
    assert "topic 11" in reply and "topic 02" in reply and "topic 01" not in reply
    assert reply.index("topic 11") < reply.index("topic 02")  # newest first
    assert "second line" not in reply
    assert "(no recap; it began with) “topic 11”" in reply
    assert reply.endswith(
        "…and 2 more conversations from that time; add a subject or a shorter time to see them."
    )


async def test_a_topic_and_a_time_still_search_inside_the_window(
    fake: FakeOpenAI, tmp_path: Path, stack: AsyncExitStack
) -> None:
    services = await open_at(stack, fake, tmp_path, WEDNESDAY)
    await seed(services, ADA, "pasta recipe", "2026-11-25T10:00")
    await seed(services, ADA, "gym routine", "2026-11-26T10:00")
    fake.say("RECAP-PASTA")
    reply = await ask(services, message("/recall pasta last week"))
    assert reply.startswith('What I found for "pasta" from 2026-11-23 to 2026-11-29')
    assert "RECAP-PASTA" in reply and len(recap_requests(fake)) == 1


@pytest.mark.parametrize(
    ("now", "local_day", "inside", "outside"),
    [
        # 07:30 on 2 December in Shanghai: yesterday is 1 December there
        ("2026-12-01T23:30:00+00:00", "2026-12-01", "2026-11-30T17:00", "2026-11-30T15:00"),
        # 23:30 on 1 December in Shanghai: yesterday is 30 November there
        ("2026-12-01T15:30:00+00:00", "2026-11-30", "2026-11-30T15:00", "2026-11-30T17:00"),
    ],
)
async def test_yesterday_is_the_persons_yesterday_on_both_sides_of_utc_midnight(
    fake: FakeOpenAI,
    tmp_path: Path,
    stack: AsyncExitStack,
    now: str,
    local_day: str,
    inside: str,
    outside: str,
) -> None:
    services = await open_at(
        stack, fake, tmp_path, datetime.fromisoformat(now), zone="Asia/Shanghai"
    )
    await seed(services, ADA, "inside the day", inside)
    await seed(services, ADA, "outside the day", outside)
    fake.say("LINE-INSIDE")
    reply = await ask(services, message("/recall 昨天"))
    assert reply.startswith(f"Our conversations on {local_day}, newest first:")
    assert f"{local_day} (telegram, a private chat): LINE-INSIDE" in reply
    sent = recap_requests(fake)
    assert len(sent) == 1 and "inside the day" in sent[0] and "outside" not in sent[0]


async def test_a_search_shows_each_date_as_the_persons_day(
    fake: FakeOpenAI, tmp_path: Path, stack: AsyncExitStack
) -> None:
    """17:00 UTC on 30 November is 1 December in Shanghai."""
    services = await open_at(stack, fake, tmp_path, WEDNESDAY, zone="Asia/Shanghai")
    await seed(services, ADA, "dentist booked", "2026-11-30T17:00")
    fake.say("RECAP-DENTIST")
    reply = await ask(services, message("/recall dentist"))
    assert "2026-12-01 (telegram, a private chat): RECAP-DENTIST" in reply
    assert "2026-11-30" not in reply


async def test_in_chinese_the_listing_and_its_dates_read_in_chinese(
    fake: FakeOpenAI, tmp_path: Path, stack: AsyncExitStack
) -> None:
    services = await open_at(stack, fake, tmp_path, WEDNESDAY)
    await seed(services, ADA, "健身计划 每周三次", "2026-11-25T10:00")
    fake.say("健身计划")
    reply = await ask(services, message("/recall 上周", language="zh-hans"))
    assert reply == (
        "2026-11-23 至 2026-11-29，我们的对话（从新到旧）：\n\n"
        "2026-11-25（telegram，私聊）：健身计划"
    )
    assert "Write the line in Simplified Chinese." in recap_requests(fake)[0]
    reply = await ask(services, message("/recall 昨天", language="zh-hans"))
    assert reply == "2026-12-01，我们没有聊过。"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("/recall la semana pasada",
         "Nuestras conversaciones del 2026-11-23 al 2026-11-29, de la más reciente a la más "
         "antigua:\n\n2026-11-25 (telegram, un chat privado): LÍNEA"),
        ("/recall hace 7 días",
         "Nuestras conversaciones el 2026-11-25, de la más reciente a la más antigua:\n\n"
         "2026-11-25 (telegram, un chat privado): LÍNEA"),
        ("/recall desde el lunes", "No hubo conversaciones desde el 2026-11-30."),
        ("/recall ayer", "No hubo conversaciones el 2026-12-01."),
        ("/recall pasta el mes pasado",
         'No encontré nada sobre "pasta" del 2026-11-01 al 2026-11-30.'),
    ],
)  # fmt: skip
async def test_in_spanish_phrases_and_replies_are_spanish(
    fake: FakeOpenAI, tmp_path: Path, stack: AsyncExitStack, text: str, expected: str
) -> None:
    services = await open_at(stack, fake, tmp_path, WEDNESDAY)
    await seed(services, ADA, "la receta de la paella", "2026-11-25T10:00")
    fake.say("LÍNEA")
    assert await ask(services, message(text, language="es")) == expected


async def test_the_persons_own_zone_from_settings_decides_their_yesterday(
    fake: FakeOpenAI, tmp_path: Path, stack: AsyncExitStack
) -> None:
    """The bot's zone is UTC; Ada chose Shanghai, Bob did not: at 23:30 UTC on 1 December
    her yesterday is 1 December, his is 30 November."""
    services = await open_at(stack, fake, tmp_path, datetime(2026, 12, 1, 23, 30, tzinfo=UTC))
    await ask(services, message("/settings timezone Asia/Shanghai"))
    assert await ask(services, message("/recall 昨天")) == "No conversations on 2026-12-01."
    reply = await ask(services, message("/recall 昨天", user=BOB))
    assert reply == "No conversations on 2026-11-30."
