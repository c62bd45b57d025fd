"""A background notice is written in its person's language and sent in their own mode."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from gateway.i18n import Catalogs
from gateway.jobs import summary_line
from gateway.messages import InboundMessage
from memory_core import MemoryChange, SkillChange
from tests.fakes.openai import FakeOpenAI, ToolCall
from tests.gateway.jobs.conftest import Bot, bot_config, message, running_bot, wait_for
from tests.gateway.sinks import ListSink

NURSE = ToolCall("memory", {"target": "user", "action": "add", "content": "Works as a nurse"})
BAKER = ToolCall("memory", {"target": "user", "action": "add", "content": "Works as a baker"})


async def tell(bot: Bot, msg: InboundMessage) -> str:
    sink = ListSink()
    await bot.conversations.handle(msg, sink)
    return sink.replies[-1]


async def reviewed(bot: Bot) -> bool:
    """Whether no review is scheduled or running (the last one told what it had to)."""
    return not any(job.id.startswith("review:") for job in bot.background.jobs())


def script(fake: FakeOpenAI, *calls: ToolCall) -> None:
    """One turn's reply, then its review's tool call and closing words, per call."""
    for call in calls:
        fake.say("Noted.")
        fake.call_tools(call)
        fake.say("Saved.")


async def test_the_memory_line_is_in_each_persons_language_in_one_run(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    script(fake, NURSE, BAKER, NURSE)
    async with running_bot(config) as bot:
        chinese = dataclasses.replace(message("I work as a nurse", "alice"), language="zh-hans")
        await tell(bot, chinese)
        await wait_for(lambda: reviewed(bot))
        await tell(bot, message("I work as a baker", "bob"))
        await wait_for(lambda: reviewed(bot))
        assert bot.services.locales.settings is not None
        bot.services.locales.settings.update("telegram-carol", language="es")
        await tell(bot, message("I work as a nurse", "carol", group="-100"))  # no hint: her setting
        await wait_for(lambda: reviewed(bot))
    assert [(to.chat_id, text) for to, text in bot.notes] == [
        ("alice", "💾 记忆已更新"),
        ("bob", "💾 Memory updated"),
        ("-100", "💾 Memoria actualizada"),  # where it goes today, in the person's language
    ]


async def test_notices_off_for_one_person_silence_only_their_line(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    script(fake, NURSE, BAKER)
    async with running_bot(config) as bot:
        assert await tell(bot, message("/settings notices off", "alice")) == (
            "Background notices: off (nothing is said when I learn something)."
        )
        await tell(bot, message("I work as a nurse", "alice"))
        await wait_for(lambda: reviewed(bot))
        await tell(bot, message("I work as a baker", "bob"))
        await wait_for(lambda: reviewed(bot))
        alice = await bot.user_entries("alice")
    assert alice == ("Works as a nurse",)  # saved, and not said
    assert [(to.chat_id, text) for to, text in bot.notes] == [("bob", "💾 Memory updated")]


async def test_a_persons_verbose_mode_lists_the_entries_where_the_config_says_on(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = bot_config(fake, tmp_path / "data", memory={"nudge_interval": 1})
    script(fake, NURSE)
    async with running_bot(config) as bot:
        assert bot.services.locales.settings is not None
        bot.services.locales.settings.update("telegram-alice", notices="verbose", language="zh")
        await tell(bot, message("I work as a nurse", "alice"))
        await wait_for(lambda: reviewed(bot))
    assert [text for _, text in bot.notes] == ["💾 记忆已更新\n➕ Works as a nurse"]


def test_the_summary_line_translates_its_skill_parts() -> None:
    catalogs = Catalogs()
    memory = [MemoryChange("user", "add", "Keeps bees", None)]
    skills = [SkillChange("patch", "deploy-checks"), SkillChange("create", "baking")]
    english = summary_line(memory, skills, "on", catalogs.translator("en"))
    assert english == "💾 Memory updated · skill 'deploy-checks' patched · skill 'baking' created"
    chinese = summary_line(memory, skills, "verbose", catalogs.translator("zh"))
    assert chinese == (
        "💾 记忆已更新 · 技能 'deploy-checks' 已修补 · 技能 'baking' 已创建\n➕ Keeps bees"
    )
    spanish = summary_line([], [SkillChange("unknown", "x")], "on", catalogs.translator("es"))
    assert spanish == "💾 habilidad 'x' modificada"
    assert summary_line(memory, skills, "off", catalogs.translator("zh")) is None
