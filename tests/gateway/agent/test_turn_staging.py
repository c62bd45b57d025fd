"""`TurnStaging`: what a person's own turns staged, handed out once, to that person only."""

from __future__ import annotations

import json
from pathlib import Path

from gateway.agent.tools import TurnStaging, build_tools
from memory_core import FileMemoryStore, PendingChanges, SkillsStore

GROUP = "telegram:group:-1001"
ALICE, BOB = "telegram-111", "telegram-222"


def stores(tmp_path: Path) -> tuple[FileMemoryStore, SkillsStore]:
    (tmp_path / "skills").mkdir()
    return FileMemoryStore(tmp_path), SkillsStore(tmp_path / "skills", tmp_path / "manifest.json")


async def add(
    staging: TurnStaging,
    memory: FileMemoryStore,
    skills: SkillsStore,
    key: str,
    content: str,
    session: str = GROUP,
) -> dict[str, object]:
    approval = staging.approval(session, key, memory, approve_all=False)
    tools = build_tools(memory, skills, user_key=key, is_admin=False, approval=approval)
    result = await tools[0].handler({"target": "user", "action": "add", "content": content})
    return dict(json.loads(result))


async def test_one_group_session_keeps_each_persons_staged_changes_apart(tmp_path: Path) -> None:
    memory, skills = stores(tmp_path)
    staging = TurnStaging()
    assert "staged" in await add(staging, memory, skills, ALICE, "Blog at https://a.example/x")
    assert "staged" in await add(staging, memory, skills, BOB, "Site at https://b.example/y")

    alices = staging.take(GROUP, ALICE)

    assert [c.content for c in alices] == ["Blog at https://a.example/x"]
    assert staging.take(GROUP, ALICE) == ()  # once
    assert [c.content for c in staging.take(GROUP, BOB)] == ["Site at https://b.example/y"]


async def test_a_turn_without_a_reply_keeps_its_changes_for_the_next_one(tmp_path: Path) -> None:
    memory, skills = stores(tmp_path)
    staging = TurnStaging()
    await add(staging, memory, skills, ALICE, "Blog at https://a.example/x")  # no reply came
    await add(staging, memory, skills, ALICE, "Likes tea")  # written, nothing staged

    assert [c.content for c in staging.take(GROUP, ALICE)] == ["Blog at https://a.example/x"]
    assert memory.read("user", ALICE).entries == ("Likes tea",)


async def test_changes_decided_or_erased_meanwhile_are_not_announced(tmp_path: Path) -> None:
    memory, skills = stores(tmp_path)
    staging = TurnStaging()
    await add(staging, memory, skills, ALICE, "Blog at https://a.example/x")
    await add(staging, memory, skills, ALICE, "Shop at https://a.example/s")
    first = PendingChanges(memory).list(ALICE)[0]
    PendingChanges(memory).reject(ALICE, [first.id])
    assert [c.content for c in staging.take(GROUP, ALICE)] == ["Shop at https://a.example/s"]

    await add(staging, memory, skills, ALICE, "Blog at https://a.example/x")
    assert memory.erase_user(ALICE)
    await add(staging, memory, skills, ALICE, "Tea at https://a.example/t", session="other")
    assert staging.take(GROUP, ALICE) == ()  # erased: its id may be reused, its batch is not
