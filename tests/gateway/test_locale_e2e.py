"""The person's language and time through the real `mnemo run` on Telegram.

Zhang's Telegram app says ``language_code: zh-hans``, Ann's says ``en``; one `mnemo
run` serves both, against the fake Bot API and the fake model. The bot's own lines
(/help, an admin-only refusal, the "💾" line after a review) reach each in their
language, the command menu is set once per language, and `/settings language en`
switches Zhang back. The bot's clock is injected (``MNEMO_CLOCK_START``) on either
side of midnight in Shanghai: once Zhang has set `/settings timezone Asia/Shanghai`,
`/recall 昨天` covers Zhang's yesterday, not UTC's, and `/recall 上周` lists last
week's conversations (Monday to Sunday in Shanghai) and no others. Expected lines
come from the shipped catalogs, so a missing translation fails here as well.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from gateway.i18n import Catalogs
from tests.fakes.openai import ToolCall
from tests.gateway.e2e_support import (
    fakes_fixture,
    learning_section,
    stopped_cleanly,
    telegram_section,
    write_config,
)
from tests.gateway.processes import MNEMO, mnemo_run, run_environment
from tests.gateway.test_telegram_e2e import TOKEN, Fakes, Mnemo
from tests.timing import scaled

pytestmark = pytest.mark.slow  # two mnemo runs of their own

ZHANG, ANN = 801, 802
ZH = Catalogs().translator("zh")
EN = Catalogs().translator("en")
BEFORE_MIDNIGHT = "2026-12-01T15:30:00+00:00"  # Tuesday 23:30 in Shanghai
AFTER_MIDNIGHT = "2026-12-01T16:30:00+00:00"  # Wednesday 00:30 in Shanghai

# Zhang's earlier conversations (UTC times; Shanghai is UTC+8). Last week in Shanghai is
# Monday 2026-11-23 to Sunday 2026-11-29.
ZHANG_SESSIONS = {
    "dentist": ("2026-11-17T04:00:00Z", "两周前 去看 牙医"),  # the week before last
    "moving": ("2026-11-25T04:00:00Z", "讨论 搬家 计划"),  # last week
    "guitar": ("2026-11-29T17:00:00Z", "开始 学 吉他"),  # UTC: Sunday; Shanghai: Monday 01:00
    "hotpot": ("2026-11-30T10:00:00Z", "预订 火锅 餐厅"),  # Monday 18:00 in Shanghai
    "bicycle": ("2026-12-01T02:00:00Z", "修理 自行车 刹车"),  # Tuesday 10:00 in Shanghai
}
ANN_SESSIONS = {"garden": ("2026-11-30T20:00:00Z", "planning the herb garden")}  # UTC Monday

fakes = fakes_fixture(Fakes)


def history_lines() -> list[str]:
    lines = []
    for user, sessions in ((ZHANG, ZHANG_SESSIONS), (ANN, ANN_SESSIONS)):
        for name, (when, said) in sessions.items():
            for role, text in (("user", said), ("assistant", "OK")):
                row = {
                    "session": name, "user": f"telegram-{user}", "platform": "telegram",
                    "chat": str(user), "chat_type": "private", "role": role,
                    "content": text, "timestamp": when,
                }  # fmt: skip
                lines.append(json.dumps(row, ensure_ascii=False))
    return lines


@pytest.fixture(scope="module")
def workdir(fakes: Fakes, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A data directory holding both people's earlier conversations, and the config."""
    workdir = tmp_path_factory.mktemp("locale")
    learning = learning_section(nudge=1, creation_nudge=0)  # a review after every reply
    write_config(workdir, telegram_section(fakes.tg.url, (ZHANG, ANN)) + learning)
    history = workdir / "history.jsonl"
    history.write_text("\n".join(history_lines()) + "\n", encoding="utf-8")
    env = run_environment(fakes.model.url, workdir)
    done = subprocess.run(
        [str(MNEMO), "sessions", "import", str(history)],
        env=env, cwd=workdir, capture_output=True, text=True, timeout=scaled(60),
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    fakes.call(fakes.tg.set_language, ZHANG, "zh-hans")
    fakes.call(fakes.tg.set_language, ANN, "en")
    return workdir


def start(fakes: Fakes, workdir: Path, clock: str) -> Mnemo:
    """`mnemo run` whose clock starts at `clock`; waits until it polls Telegram."""
    started = fakes.call(lambda: len(fakes.tg.calls_to("deleteWebhook")))
    process = mnemo_run(fakes.model.url, workdir, TELEGRAM_BOT_TOKEN=TOKEN, MNEMO_CLOCK_START=clock)
    try:
        fakes.wait(lambda: len(fakes.tg.calls_to("deleteWebhook")) > started)
    except TimeoutError:
        process.kill()
        raise AssertionError(f"mnemo run did not start: {process.communicate()[1]}") from None
    return Mnemo(process, workdir / "data")


@pytest.fixture(scope="module")
def before_midnight(fakes: Fakes, workdir: Path) -> Iterator[Mnemo]:
    with stopped_cleanly(start(fakes, workdir, BEFORE_MIDNIGHT)) as mnemo:
        yield mnemo


def ask(fakes: Fakes, user: int, line: str, contains: str = "") -> str:
    """What the bot answers `user`'s command `line` (the first new message holding
    `contains`)."""
    seen = len(fakes.bot_messages(user))
    fakes.command(user, user, line)
    return fakes.reply(user, seen, contains)


def test_help_and_a_refusal_come_in_each_persons_language(
    fakes: Fakes, before_midnight: Mnemo
) -> None:
    chinese = ask(fakes, ZHANG, "/help", "/forget")
    assert ZH._("Commands:") in chinese and "Commands:" not in chinese
    assert ZH._("search our past conversations, e.g. /recall kubernetes last week") in chinese
    english = ask(fakes, ANN, "/help", "/forget")
    assert "Commands:" in english and ZH._("Commands:") not in english
    refused = ZH._("/{name} is for admins only.", name="promote")
    assert refused != EN._("/{name} is for admins only.", name="promote")
    assert ask(fakes, ZHANG, "/promote notes", "promote") == refused
    assert ask(fakes, ANN, "/promote notes", "promote") == "/promote is for admins only."


def review_writes(fakes: Fakes, reply: str, fact: str) -> None:
    """The reply to the next message, then the review after it adds `fact`."""
    fakes.call(fakes.model.say, reply)
    add = {"target": "user", "action": "add", "content": fact}
    fakes.call(fakes.model.call_tools, ToolCall("memory", add))
    fakes.call(fakes.model.say, "Saved.")


def notice(fakes: Fakes, user: int, seen: int) -> str:
    def found() -> str | None:
        texts = [m.text or "" for m in fakes.tg.chat_messages(user)[seen:]]
        return next((t for t in texts if t.startswith("💾")), None)

    return fakes.wait(found)


def test_the_review_notice_is_in_each_persons_language(
    fakes: Fakes, before_midnight: Mnemo
) -> None:
    seen = len(fakes.bot_messages(ZHANG))
    review_writes(fakes, "好的。", "养了两只猫")
    fakes.text(ZHANG, ZHANG, "我养了两只猫")
    assert notice(fakes, ZHANG, seen) == "💾 " + ZH._("Memory updated")
    seen = len(fakes.bot_messages(ANN))
    review_writes(fakes, "Nice.", "Keeps two cats")
    fakes.text(ANN, ANN, "I keep two cats")
    assert notice(fakes, ANN, seen) == "💾 Memory updated"


def test_the_command_menu_is_set_once_per_language(fakes: Fakes, before_midnight: Mnemo) -> None:
    menus = {code: fakes.call(fakes.tg.commands, None, code) for code in ("", "en", "zh", "es")}
    described = {
        code: {c["command"]: c["description"] for c in menu} for code, menu in menus.items()
    }
    assert set(described[""]) == set(described["zh"]) == set(described["es"]) >= {"recall"}
    recall = "search our past conversations, e.g. /recall kubernetes last week"
    assert described[""]["recall"] == described["en"]["recall"] == recall
    assert described["zh"]["recall"] == ZH._(recall) != recall
    assert described["es"]["recall"] == Catalogs().translator("es")._(recall) != recall


def recalled(fakes: Fakes, user: int, line: str, day: str) -> tuple[str, str]:
    """The reply to `/recall …` (showing `day`), and what the recaps asked the model (each
    listed conversation is recapped: its words are in one of those requests)."""
    before = len(fakes.requests())
    reply = ask(fakes, user, line, day)
    asked = "\n".join(json.dumps(body, ensure_ascii=False) for body in fakes.requests()[before:])
    return reply, asked


def listed(asked: str, sessions: dict[str, tuple[str, str]]) -> set[str]:
    """The sessions whose words were sent to be recapped."""
    return {name for name, (_, said) in sessions.items() if said.split()[-1] in asked}


def test_yesterday_and_last_week_are_the_persons_own_before_midnight(
    fakes: Fakes, before_midnight: Mnemo
) -> None:
    ask(fakes, ZHANG, "/settings timezone Asia/Shanghai", "Asia/Shanghai")
    # 23:30 on Tuesday in Shanghai: yesterday is Monday 11-30 there (in UTC, 11-30 too,
    # but from 00:00 UTC: the guitar lesson, at 01:00 on Monday in Shanghai, is not in it)
    yesterday, asked = recalled(fakes, ZHANG, "/recall 昨天", "2026-11-30")
    assert listed(asked, ZHANG_SESSIONS) == {"guitar", "hotpot"}, asked
    assert yesterday.count("2026-11-30（") == 2, yesterday  # each listed with its day there
    last_week, asked = recalled(fakes, ZHANG, "/recall 上周", "2026-11-25")
    assert listed(asked, ZHANG_SESSIONS) == {"moving"}, asked
    assert "2026-11-23" in last_week and last_week.count("（telegram") == 1, last_week


def test_settings_language_en_switches_back(fakes: Fakes, before_midnight: Mnemo) -> None:
    switched = ask(fakes, ZHANG, "/settings language en", "English")
    assert ZH._("Commands:") not in switched
    english = ask(fakes, ZHANG, "/help", "/forget")
    assert "Commands:" in english and ZH._("Commands:") not in english


def test_after_midnight_in_shanghai_yesterday_is_tuesday(
    fakes: Fakes, workdir: Path, before_midnight: Mnemo
) -> None:
    code, err = before_midnight.stop()
    assert code == 0, err
    with stopped_cleanly(start(fakes, workdir, AFTER_MIDNIGHT)):
        # 00:30 on Wednesday in Shanghai (16:30 on Tuesday in UTC): yesterday is Tuesday
        _, asked = recalled(fakes, ZHANG, "/recall 昨天", "2026-12-01")
        assert listed(asked, ZHANG_SESSIONS) == {"bicycle"}, asked
        # Ann chose no zone: her yesterday is UTC's Monday, the same moment
        _, asked = recalled(fakes, ANN, "/recall yesterday", "2026-11-30")
        assert listed(asked, ANN_SESSIONS) == {"garden"}, asked
        assert not listed(asked, ZHANG_SESSIONS)  # never another person's
