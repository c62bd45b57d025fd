"""The skills contract: a SkillsStore on folders and on PostgreSQL, same calls, same results.

Each test runs once per backend (`backend` is parametrised): people's own skills in
folders (`FolderPrivateSkills`, the default) or in rows (`PgPrivateSkills`). The
shared folder is a folder on both.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from memory_core.errors import (
    PersonErasedError,
    SkillExistsError,
    SkillNotFoundError,
    SkillPathError,
    SkillProtectedError,
)
from memory_core.fence import ErasureFence, working
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.skills import PgPrivateSkills
from memory_core.pg.skills_schema import SKILLS_MIGRATIONS
from memory_core.skills import SkillsStore, SkillsTools
from tests.timing import scaled

A, B = "telegram-1", "discord-2"
MakeStore = Callable[[], SkillsStore]


def skill_md(name: str, description: str = "Does a thing.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\n1. Step one.\n"


def put_shared(root: Path, name: str, description: str = "The operator's way.") -> None:
    (root / name).mkdir(parents=True)
    (root / name / "SKILL.md").write_text(skill_md(name, description), encoding="utf-8")


@pytest.fixture
def pg_db(pg_database: str) -> Iterator[PgSyncDatabase]:
    with PgSyncDatabase(pg_database, max_size=6) as db:
        db.migrate(SKILLS_MIGRATIONS)
        yield db


@pytest.fixture(params=["folders", "pg"])
def make(request: pytest.FixtureRequest, tmp_path: Path) -> MakeStore:
    """A factory of SkillsStores over one backend (several stand for several processes)."""
    root, home = tmp_path / "skills", tmp_path / "home"
    root.mkdir()
    fence = ErasureFence()
    db: PgSyncDatabase | None = None
    if request.param == "pg":
        db = request.getfixturevalue("pg_db")

    def build() -> SkillsStore:
        return SkillsStore(
            root,
            home / "skills-manifest.json",
            private_dir=home / "skills-private",
            archive_dir=home / "skills-archive",
            fence=fence,
            private=PgPrivateSkills(db) if db is not None else None,
        )

    return build


@pytest.fixture
def store(make: MakeStore) -> SkillsStore:
    return make()


def test_a_persons_skill_is_created_changed_and_deleted(store: SkillsStore) -> None:
    skill = store.create("deploy", skill_md("deploy"), "ops", user_key=A)
    assert (skill.owner, skill.user_key, skill.relpath) == ("user", A, "ops/deploy")
    assert store.get("deploy", A).description == "Does a thing."
    store.edit("deploy", skill_md("deploy", "How we ship."), user_key=A)
    assert store.patch("deploy", "Step one.", "Build.", user_key=A) == 1
    store.write_file("deploy", "references/steps.md", "1. build\n2. build\n", user_key=A)
    store.write_file("deploy", "references/deep/more.md", "more\n", user_key=A)
    count = store.patch(
        "deploy", "build", "ship", user_key=A, replace_all=True, file_path="references/steps.md"
    )
    assert count == 2
    assert store.support_files("deploy", user_key=A) == (
        "references/deep/more.md",
        "references/steps.md",
    )
    assert store.read_text("deploy", "references/steps.md", user_key=A) == "1. ship\n2. ship\n"
    text = store.read_text("deploy", user_key=A)
    assert "How we ship." in text and "Build." in text
    assert "ops:\n- deploy: How we ship." in store.index_block(A)
    with pytest.raises(SkillPathError, match="is a folder"):
        store.write_file("deploy", "references/deep", "x", user_key=A)
    store.remove_file("deploy", "references/steps.md", user_key=A)
    with pytest.raises(SkillNotFoundError):
        store.remove_file("deploy", "references/steps.md", user_key=A)
    assert store.support_files("deploy", user_key=A) == ("references/deep/more.md",)
    archived = store.delete("deploy", user_key=A)
    assert archived is not None and archived.name.startswith("deploy-")
    assert store.skills(A) == () and store.index_block(A) == ""
    with pytest.raises(SkillNotFoundError):
        store.get("deploy", A)


def test_names_and_categories_in_the_way_are_refused(store: SkillsStore) -> None:
    store.create("deploy", skill_md("deploy"), user_key=A)
    store.create("notes", skill_md("notes"), "ops", user_key=A)
    with pytest.raises(SkillExistsError, match="already have"):
        store.create("deploy", skill_md("deploy"), "ops", user_key=A)
    with pytest.raises(SkillExistsError, match="is the name of a skill"):
        store.create("x", skill_md("x"), "deploy", user_key=A)
    with pytest.raises(SkillExistsError, match="in the way"):
        store.create("ops", skill_md("ops"), user_key=A)
    assert [s.relpath for s in store.skills(A)] == ["deploy", "ops/notes"]


def test_another_person_never_sees_or_changes_it(store: SkillsStore) -> None:
    store.create("deploy", skill_md("deploy", "A's way."), user_key=A)
    for view in (B, None):
        assert store.skills(view) == () and "deploy" not in store.index_block(view)
    attempts = [
        lambda: store.get("deploy", B),
        lambda: store.edit("deploy", skill_md("deploy", "B's."), user_key=B),
        lambda: store.patch("deploy", "Step one.", "x", user_key=B),
        lambda: store.write_file("deploy", "references/x.md", "x", user_key=B),
        lambda: store.remove_file("deploy", "references/x.md", user_key=B),
        lambda: store.delete("deploy", user_key=B),
    ]
    for attempt in attempts:
        with pytest.raises(SkillNotFoundError):
            attempt()
    store.create("deploy", skill_md("deploy", "B's way."), user_key=B)
    assert store.get("deploy", A).description == "A's way."
    assert store.get("deploy", B).description == "B's way."
    assert [(s.name, s.user_key) for s in store.every_skill()] == [("deploy", B), ("deploy", A)]
    assert store.people() == sorted([A, B])


def test_a_shared_skill_of_the_same_name_wins(store: SkillsStore) -> None:
    store.create("deploy", skill_md("deploy", "A's way."), user_key=A)
    put_shared(store.skills_dir, "deploy")  # added later by the operator
    assert store.get("deploy", A).owner == "operator"
    assert "A's way." not in store.index_block(A)
    with pytest.raises(SkillProtectedError, match="shared with everyone"):
        store.patch("deploy", "Step one.", "x", user_key=A)
    with pytest.raises(SkillExistsError, match="shared skill"):
        store.create("deploy", skill_md("deploy"), user_key=B)
    store.delete("deploy", user_key=A)  # A may clear out the hidden copy
    assert [(s.name, s.owner) for s in store.every_skill()] == [("deploy", "operator")]


def test_promotion_moves_a_persons_skill_into_the_shared_folder(store: SkillsStore) -> None:
    store.create("notes", skill_md("notes"), user_key=A)
    put_shared(store.skills_dir / "misc", "notes")
    with pytest.raises(SkillExistsError, match="already exists"):
        store.promote("notes", A)
    assert "Step one." in store.private.read(A, "notes", None)  # refused: A keeps it
    store.create("deploy", skill_md("deploy", "How we deploy."), "ops", user_key=A)
    store.write_file("deploy", "references/steps.md", "1. build\n", user_key=A)
    assert store.promotion_owner("deploy") == A
    skill = store.promote("deploy", A)
    assert skill.owner == "operator" and skill.folder == store.skills_dir / "ops" / "deploy"
    files = sorted(p.relative_to(skill.folder).as_posix() for p in skill.folder.rglob("*.md"))
    assert files == ["SKILL.md", "references/steps.md"]
    assert (skill.folder / "references/steps.md").read_text() == "1. build\n"
    assert store.get("deploy", B).owner == "operator"
    deploys = [(s.owner, s.user_key) for s in store.every_skill() if s.name == "deploy"]
    assert deploys == [("operator", None)]  # A's copy went
    assert store.private.read_manifest().promoted["deploy"]["from"] == A
    with pytest.raises(SkillExistsError):
        store.create("deploy", skill_md("deploy"), user_key=A)


def test_erasure_removes_skills_and_archive(store: SkillsStore) -> None:
    store.create("deploy", skill_md("deploy"), user_key=A)
    store.create("notes", skill_md("notes"), user_key=A)
    store.delete("notes", user_key=A)
    store.create("deploy", skill_md("deploy"), user_key=B)
    assert store.erase_user(A) == 2  # their skills and their archive
    assert store.skills(A) == () and store.people() == [B]
    assert store.erase_user(A) == 0
    assert [s.user_key for s in store.every_skill()] == [B]


def test_a_write_begun_before_an_erasure_is_refused(store: SkillsStore) -> None:
    store.create("deploy", skill_md("deploy"), user_key=A)
    with working():
        store.fence.erasing(A)
        with pytest.raises(PersonErasedError):
            store.create("notes", skill_md("notes"), user_key=A)
        with pytest.raises(PersonErasedError):
            store.patch("deploy", "Step one.", "x", user_key=A)
        store.create("notes", skill_md("notes"), user_key=B)  # another person is not fenced
    assert "Step one." in store.read_text("deploy", user_key=A)
    store.create("notes", skill_md("notes"), user_key=A)  # work begun after the erasure


def test_another_writer_s_change_is_seen_at_the_next_read(make: MakeStore) -> None:
    first, second = make(), make()
    assert first.skills(A) == ()
    second.create("deploy", skill_md("deploy"), user_key=A)
    assert [s.name for s in first.skills(A)] == ["deploy"]
    assert first.private.scan(A) is first.private.scan(A)  # unchanged: the cached scan
    second.edit("deploy", skill_md("deploy", "Changed elsewhere."), user_key=A)
    assert "Changed elsewhere." in first.index_block(A)
    second.erase_user(A)
    assert first.skills(A) == ()


def test_writers_racing_on_one_person_keep_one_skill_per_name(make: MakeStore) -> None:
    stores = [make() for _ in range(4)]
    start = threading.Barrier(len(stores))
    outcomes: list[str] = []

    def race(i: int) -> None:
        start.wait(timeout=scaled(10))
        stores[i].create(f"own-{i}", skill_md(f"own-{i}"), user_key=A)
        try:
            stores[i].create("deploy", skill_md("deploy", f"Writer {i}."), user_key=A)
            outcomes.append("made")
        except SkillExistsError:
            outcomes.append("exists")

    threads = [threading.Thread(target=race, args=(i,)) for i in range(len(stores))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=scaled(20))
    assert sorted(outcomes) == ["exists", "exists", "exists", "made"]
    names = [s.name for s in make().skills(A)]
    assert names == ["deploy", "own-0", "own-1", "own-2", "own-3"]


def test_the_turn_quota_holds_on_either_backend(store: SkillsStore) -> None:
    tools = SkillsTools(store, user_key=A, max_files=2)
    for name in ("one", "two", "three"):
        args = {"action": "create", "name": name, "content": skill_md(name)}
        result = json.loads(tools.handle("skill_manage", args))
    assert result["success"] is False and "skill files" in result["error"]
    assert [s.name for s in store.skills(A)] == ["one", "two"]
