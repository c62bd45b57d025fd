"""/memory, /forget, /memory history|archive|pending in the person's language and time zone."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import pytest

import memory_core.file_memory.approval as approval
import memory_core.file_memory.ledger as ledger
import memory_core.file_memory.pending as pending
import memory_core.safety.instruction_words as instruction_words
from gateway.app import Services, open_services
from gateway.commands.choices import PendingChoices
from gateway.commands.memory_history import ORIGIN_LABELS, UNDO_REFUSALS
from gateway.commands.memory_pending import (
    MEMORY_CORE_REASONS,
    REASON_SEPARATOR,
    PendingReview,
    StagedNotices,
)
from gateway.conversation import Conversations
from gateway.messages import InboundMessage, ReplySink
from memory_core import Operation, Origin, PendingChanges, Proposal
from memory_core.file_memory.origin import ORIGIN_KINDS
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import config_for, serving
from tests.gateway.sinks import ListSink

LI, ADA = "42", "77"  # Li chats in Chinese, Ada in English, in the same store
EVENING = datetime(2026, 3, 1, 20, 0, tzinfo=UTC).timestamp()  # 04:00 next day in Shanghai
REVIEW = Origin("review", 1)


@pytest.fixture
async def services(fake: FakeOpenAI, tmp_path: Path) -> AsyncIterator[Services]:
    config = config_for(fake.url, tmp_path / "data")
    async with open_services(config) as opened:
        yield opened


def key(user: str) -> str:
    return f"telegram-{user}"


def add(services: Services, user: str, *entries: str, origin: Origin = REVIEW) -> None:
    ops = [Operation("add", content=e) for e in entries]
    services.memory.apply("user", key(user), ops, origin)


def backdate(services: Services, user: str, at: float) -> None:
    """Every recorded change of `user`'s USER.md, and every entry, made at `at`."""
    path = ledger.history_path(services.memory.path("user", key(user)))
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    path.write_text("".join(json.dumps({**line, "at": at}) + "\n" for line in lines))
    records = path.with_name("USER.entries.json")  # who wrote each entry, and when
    held = json.loads(records.read_text())["entries"]
    records.write_text(json.dumps({"entries": {t: {**r, "at": at} for t, r in held.items()}}))


async def say(
    conversations: Conversations,
    text: str,
    user: str,
    language: str | None = None,
    chat_type: Literal["private", "group"] = "private",
) -> str:
    sink = ListSink()
    chat = user if chat_type == "private" else "-5"
    message = InboundMessage("telegram", chat, chat_type, user, text, language=language)
    await conversations.handle(message, sink)
    return sink.replies[-1]


async def test_memory_and_forget_answer_each_person_in_their_language(services: Services) -> None:
    add(services, LI, "Li keeps bees", "Li plays the erhu")
    add(services, ADA, "Ada keeps bees", "Ada plays the cello")
    conversations = serving(services)

    listing = await say(conversations, "/memory", LI, "zh-hans")
    assert listing.startswith("我记得的关于你的内容（")
    assert "1. Li keeps bees（后台学到的（回顾）" in listing
    assert "发送 /forget <编号> 删除一条" in listing
    english = await say(conversations, "/memory", ADA, "en-US")
    assert english.startswith("What I remember about you (")
    assert "1. Ada keeps bees (learned in the background (review), " in english

    assert "告诉我要忘记什么" in await say(conversations, "/forget", LI, "zh-hans")
    assert "Tell me what to forget" in await say(conversations, "/forget", ADA)
    forgotten = await say(conversations, "/forget keeps", LI, "zh-hans")  # one entry holds it
    assert forgotten.startswith("已忘记：Li keeps bees\n这是永久的，撤销也无法恢复。（现已使用 ")
    assert forgotten.endswith(" 字符。）")
    assert await say(conversations, "/forget 9", ADA) == (
        "There is no entry 9: I hold 2 about you, numbered 1 to 2 by /memory."
    )
    assert "没有第 9 条" in await say(conversations, "/forget 9", LI, "zh")
    in_group = await say(conversations, "/forget 1", LI, "zh-hans", chat_type="group")
    assert "只能在与我的私聊中使用" in in_group
    assert services.memory.read("user", key(LI)).entries == ("Li plays the erhu",)


async def test_a_chosen_language_outranks_the_platforms_hint(services: Services) -> None:
    add(services, LI, "Li keeps bees", "Li keeps wasps")
    services.locales.settings.update(key(LI), language="zh")  # type: ignore[union-attr]
    conversations = serving(services)
    offer = await say(conversations, "/forget keeps", LI, "en")
    assert offer.startswith("有 2 条记忆条目包含“keeps”。要忘记哪一条？")
    assert "/forget #1 到 /forget #2" in offer
    assert (await say(conversations, "/forget keeps", ADA, "en")).startswith("Nothing I remember")


async def test_history_and_undo_in_chinese_and_english(services: Services) -> None:
    add(services, LI, "Li keeps bees", origin=Origin("person", 1))
    add(services, ADA, "Ada keeps bees", origin=Origin("person", 2))
    conversations = serving(services)

    history = (await say(conversations, "/memory history", LI, "zh-hans")).splitlines()
    assert history[0] == "关于你的记忆的最近改动（最新的在前）："
    assert history[1].startswith("#1 ") and history[1].endswith("· 添加了“Li keeps bees”（你）")
    english = (await say(conversations, "/memory history", ADA)).splitlines()
    assert english[0] == "The latest changes to what I remember about you, newest first:"
    assert english[1].endswith("· added “Ada keeps bees” (you)")

    undone = await say(conversations, "/memory undo", LI, "zh-hans")
    assert undone == "已撤销 #1：删除了“Li keeps bees”。"
    assert await say(conversations, "/memory undo", LI, "zh-hans") == "没有可以撤销的改动了。"
    assert await say(conversations, "/memory undo 9", LI, "zh-hans") == "历史记录中没有改动 9。"
    assert await say(conversations, "/memory undo 9", ADA) == (
        "There is no change 9 in the history."
    )
    assert "没有任何改动" in await say(conversations, "/memory undo two", LI, "zh-hans")


async def test_dates_are_the_persons_day_in_their_zone(services: Services) -> None:
    add(services, LI, "Li keeps bees")
    add(services, ADA, "Ada keeps bees")
    backdate(services, LI, EVENING)
    backdate(services, ADA, EVENING)
    services.locales.settings.update(key(LI), timezone="Asia/Shanghai")  # type: ignore[union-attr]
    conversations = serving(services)

    assert "1. Li keeps bees（后台学到的（回顾），2026-03-02）" in await say(
        conversations, "/memory", LI, "zh"
    )
    assert "1. Ada keeps bees (learned in the background (review), 2026-03-01)" in await say(
        conversations, "/memory", ADA
    )
    assert "#1 2026-03-02 04:00 · " in await say(conversations, "/memory history", LI, "zh")
    assert "#1 2026-03-01 20:00 · " in await say(conversations, "/memory history", ADA)


async def test_the_archive_is_dated_in_the_persons_zone(fake: FakeOpenAI, tmp_path: Path) -> None:
    config = config_for(fake.url, tmp_path / "data", file_text="memory: {user_char_limit: 100}\n")
    async with open_services(config) as services:
        add(services, LI, "Li once lived in Lisbon near the river and the sea")
        backdate(services, LI, EVENING)
        roof = "Li keeps bees on the roof of her old building, in town"
        add(services, LI, roof, origin=Origin("person", 1))  # Lisbon moves out to make room
        path = services.memory.path("user", key(LI)).with_name("USER.archive.jsonl")
        moved = [json.loads(line) for line in path.read_text().splitlines()]
        path.write_text("".join(json.dumps({**m, "at": EVENING}) + "\n" for m in moved))
        services.locales.settings.update(key(LI), timezone="Asia/Shanghai")  # type: ignore[union-attr]
        archive = await say(serving(services), "/memory archive", LI, "zh-hans")
    assert archive.startswith("因记忆已满、为腾出空间而移出的条目")
    lisbon = "- Li once lived in Lisbon near the river and the sea\n"
    assert lisbon + "  （后台学到的（回顾）；2026-03-02 由改动" in archive


async def test_pending_and_its_notice_in_the_persons_language(services: Services) -> None:
    why = REASON_SEPARATOR.join((instruction_words.LINK, approval.EVERYTHING_BACKGROUND))
    for user in (LI, ADA):
        proposal = Proposal("add", "Blog: https://a.example", None, why, True)
        PendingChanges(services.memory).stage(key(user), [proposal], REVIEW, "batch")
    services.locales.settings.update(  # type: ignore[union-attr]
        key(LI), language="zh", timezone="Asia/Shanghai"
    )
    conversations = serving(services)

    listing = await say(conversations, "/memory pending", LI)
    assert listing.startswith(
        "等待你批准（1）：\n1\\. 添加“Blog: <https://a.example>”（后台学到的（回顾）；"
    )
    assert "它包含链接；我在后台学到的内容需要你批准）" in listing
    assert "，有效至 " in listing
    english = await say(conversations, "/memory pending", ADA)
    assert "it contains a link; what I learn in the background waits" in english

    await conversations.handle(InboundMessage("telegram", LI, "private", LI, "hi"), ListSink())
    sent: list[ListSink] = []

    def sink_for(message: InboundMessage) -> ReplySink:
        sent.append(ListSink())
        return sent[-1]

    review = PendingReview(PendingChanges(services.memory), PendingChoices())
    notices = StagedNotices(
        review, services.sessions, sink_for, services.locales.clock, services.locales.of_person
    )
    staged = PendingChanges(services.memory).list(key(LI))
    assert await notices.announce("telegram", key(LI), staged) is True
    [sink] = sent
    assert sink.replies[0].startswith("我想记住关于你的这些内容，需要你批准（7 天内有效）：")
    assert [b.label for b in sink.buttons] == ["批准", "拒绝"]

    assert await say(conversations, "/memory approve 1", LI) == (
        "已保存：添加“Blog: <https://a.example>”"
    )
    assert await say(conversations, "/memory reject all", ADA) == (
        "Dropped: add “Blog: <https://a.example>”"
    )
    assert "没有编号为 1 的待批准改动" in await say(conversations, "/memory approve 1", LI)


def test_every_reason_memory_core_gives_is_in_the_catalog_copies() -> None:
    made = {
        approval.EVERYTHING_BACKGROUND,
        approval.EVERYTHING_PERSON,
        approval.WITH_OTHERS,
        approval.JUDGE_UNSURE,
        instruction_words.LINK,
        instruction_words.EMAIL,
        instruction_words.CODE,
        instruction_words.ORDER,
        pending.CHANGED_MEANWHILE,
    }
    words = {v for n, v in vars(instruction_words).items() if n.isupper() and isinstance(v, str)}
    assert words <= made  # a new instruction reason must be added above and in the copies
    assert made == set(MEMORY_CORE_REASONS)
    assert all(REASON_SEPARATOR not in reason for reason in made)


def test_the_undo_refusals_and_origin_labels_are_memory_cores() -> None:
    assert UNDO_REFUSALS == ledger.UNDO_REFUSALS
    assert set(ORIGIN_LABELS) == set(ORIGIN_KINDS)
    assert all(ORIGIN_LABELS[kind] == Origin(kind).label() for kind in ORIGIN_KINDS)
