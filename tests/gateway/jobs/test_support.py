"""The support check: is an entry about a person found in what the person said?

Accepted paraphrases: a summary that keeps most of the person's words ("Prefers dark
mode" from "I like dark mode"), an inflection ("Lives" from "live", "Москве" from
"Москва"). Refused: a synonym ("physician" for "doctor"), a translation (an English
entry from Chinese words), a changed number, what only a quoted line said.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import pytest

from gateway.agent.tools import Tool
from gateway.jobs.grounding import NOT_SAID_CODE, Unsupported, grounded, unsupported
from gateway.jobs.support import OwnWords, check, distinctive_words, without_quotes
from memory_core import MEMORY_TOOL_SCHEMA


def supported(entry: str, *said: str) -> bool:
    return check(entry, OwnWords(said)).supported


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("User prefers dark mode", "I like dark mode in every editor"),
        ("Lives in Berlin", "I live in Berlin"),
        ("Works night shifts as a nurse", "I'm a nurse, night shifts this week"),
        ("Takes 20 mg of sertraline daily", "I take 20 mg sertraline every day"),
        ("L'utilisateur habite à Lyon avec deux chats", "j'habite à Lyon avec mes deux chats"),
        ("Hat zwei Hunde und wohnt in Hamburg", "ich wohne in Hamburg und habe zwei Hunde"),
        ("Trabaja como profesora de historia", "soy profesora de historia, trabajo en Madrid"),
        ("Живёт в Москве", "я живу в Москва уже давно, живёт вся семья"),
        ("用户喜欢喝咖啡", "我喜欢喝咖啡，不喝茶"),
        ("寿司が好き", "寿司が大好きです"),
        ("사용자는 서울에 산다", "저는 서울에 살아요"),
        ("दिल्ली में रहता है", "मैं दिल्ली में रहता हूँ"),
        ("يحب القهوة", "أنا أحب القهوة كثيرا"),
    ],
)
def test_what_the_person_said_supports_the_entry(entry: str, said: str) -> None:
    assert supported(entry, said)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("Is a physician", "I'm a doctor"),  # a synonym: refused (write their words)
        ("Likes coffee", "我喜欢喝咖啡"),  # a translation: refused
        ("Born in 1990", "I was born in 1991"),  # a number must be said as it is
        ("Allergic to peanuts", "what should I cook tonight?"),
        ("Has three kids: Carl, Dora and Emil", "my kids Anna and Ben are at school"),
        ("对花生过敏", "今天晚上吃什么"),
        ("Est végétarien depuis dix ans", "je mange de tout"),
        ("Is ok", "I'm ok"),  # no distinctive word at all
    ],
)
def test_what_the_person_did_not_say_does_not(entry: str, said: str) -> None:
    assert not supported(entry, said)


def test_at_least_half_of_the_words_and_every_number() -> None:
    said = OwnWords(["my sister Lena moved to Oslo in 2021"])
    assert check("Sister Lena lives in Oslo", said).supported  # 3 of 4
    assert check("Sister Lena, a dentist", said).supported  # 2 of 3
    assert not check("Sister works as dentist in Bergen", said).supported  # 1 of 4
    verdict = check("Sister moved to Oslo in 2022", said)
    assert not verdict.supported and verdict.missing == ("2022",)
    assert "'2022'" in verdict.reason()


def test_quoted_lines_are_not_the_persons_words() -> None:
    text = "> I'm allergic to peanuts\nis that common?"
    assert without_quotes(text) == "is that common?"
    assert not supported("Allergic to peanuts", text)
    assert not supported("Allergic to peanuts", "what about this?\n>>> allergic to peanuts\nyes")
    assert supported("Allergic to peanuts", "> what's that?\nI am allergic to peanuts")


def test_distinctive_words_leave_out_stopwords_short_words_and_words_about_the_person() -> None:
    assert distinctive_words("The user is a big fan of Go and of F1 2024") == (
        "big",
        "fan",
        "2024",
    )
    assert distinctive_words("用户喜欢猫") == ("喜欢", "欢猫")
    assert distinctive_words("猫") == ("猫",)
    assert distinctive_words("は") == ()  # a particle alone


# -- the memory tool of a background run --------------------------------------------------


class Recorder:
    """The real tool's stand-in: records what reached it."""

    def __init__(self) -> None:
        self.calls: list[Mapping[str, Any]] = []

    async def __call__(self, arguments: Mapping[str, Any]) -> str:
        self.calls.append(arguments)
        return json.dumps({"success": True})


def memory_tool(said: str) -> tuple[Tool, Recorder]:
    recorder = Recorder()
    [tool] = grounded([Tool(MEMORY_TOOL_SCHEMA, recorder)], OwnWords([said]), "test")
    return tool, recorder


async def test_an_unsaid_entry_never_reaches_the_tool_and_the_model_is_told_why() -> None:
    tool, recorder = memory_tool("I'm a nurse")
    answer = json.loads(
        await tool.handler({"target": "user", "action": "add", "content": "Allergic to peanuts"})
    )
    assert recorder.calls == []
    assert answer["success"] is False and answer["code"] == NOT_SAID_CODE
    assert "'allergic'" in answer["error"] and "'peanuts'" in answer["error"]

    said = {"target": "user", "action": "add", "content": "Works as a nurse"}
    assert json.loads(await tool.handler(said))["success"] is True
    assert recorder.calls == [said]


async def test_a_batch_with_one_unsaid_entry_is_refused_whole() -> None:
    tool, recorder = memory_tool("I'm a nurse")
    batch = {
        "target": "user",
        "operations": [
            {"action": "add", "content": "Works as a nurse"},
            {"action": "replace", "old_text": "nurse", "content": "Head of cardiology"},
        ],
    }
    answer = json.loads(await tool.handler(batch))
    assert answer["code"] == NOT_SAID_CODE and "Head of cardiology" in answer["error"]
    assert "Works as a nurse" not in answer["error"]
    assert recorder.calls == []


@pytest.mark.parametrize(
    "arguments",
    [
        {"target": "user", "action": "remove", "old_text": "peanuts"},  # forgetting is fine
        {"target": "memory", "action": "add", "content": "Deploys on Fridays"},  # tool refuses
        {"target": "user", "action": "explode", "content": "peanuts"},  # tool explains
        {"target": "user", "operations": "not a list"},
    ],
)
async def test_what_is_not_an_entry_about_the_person_goes_to_the_tool(
    arguments: dict[str, Any],
) -> None:
    tool, recorder = memory_tool("hello")
    await tool.handler(arguments)
    assert recorder.calls == [arguments]


def test_a_malformed_call_has_nothing_to_check() -> None:
    said = OwnWords(["hi"])
    assert unsupported("{not json", said) == ()
    assert unsupported('["a list"]', said) == ()
    [refused] = unsupported('{"target": "user", "action": "add", "content": "Owns a boat"}', said)
    assert refused.content == "Owns a boat"


async def test_with_a_stager_a_refused_call_is_staged_instead() -> None:
    staged: list[tuple[Mapping[str, Any], tuple[Unsupported, ...]]] = []

    async def stage(arguments: Mapping[str, Any], why: tuple[Unsupported, ...]) -> str:
        staged.append((arguments, why))
        return json.dumps({"success": True, "staged": True})

    recorder = Recorder()
    [tool] = grounded([Tool(MEMORY_TOOL_SCHEMA, recorder)], OwnWords(["hi"]), "test", stage)
    call = {"target": "user", "action": "add", "content": "Owns a boat"}
    assert json.loads(await tool.handler(call)) == {"success": True, "staged": True}
    assert recorder.calls == []
    assert [(a, [u.content for u in why]) for a, why in staged] == [(call, ["Owns a boat"])]
