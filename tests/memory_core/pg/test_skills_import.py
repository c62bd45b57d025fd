"""Copying people's skill folders into PostgreSQL, and the digest that verifies the copy."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memory_core.errors import SkillStorageError
from memory_core.pg.blocking import PgSyncDatabase
from memory_core.pg.skills import PgPrivateSkills
from memory_core.pg.skills_schema import SKILLS_MIGRATIONS
from memory_core.skills import SkillsStore

A, B = "telegram-1", "discord-2"


def skill_md(name: str, description: str = "Does a thing.") -> str:
    return f"---\nname: {name}\ndescription: {description}\n---\n# {name}\n\n1. Step one.\n"


@pytest.fixture
def pg_db(pg_database: str) -> Iterator[PgSyncDatabase]:
    with PgSyncDatabase(pg_database, max_size=2) as db:
        db.migrate(SKILLS_MIGRATIONS)
        yield db


def folders(tmp_path: Path) -> SkillsStore:
    """A data dir with two people's skills, an archive, a bad skill, a binary file, a
    manifest with an unowned skill and a promotion."""
    root, home = tmp_path / "skills", tmp_path / "home"
    (root / "old-bot").mkdir(parents=True)
    (root / "old-bot" / "SKILL.md").write_text(skill_md("old-bot"))
    store = SkillsStore(root, home / "skills-manifest.json", archive_dir=home / "skills-archive")
    store.create("deploy", skill_md("deploy", "A's way."), "ops", user_key=A)
    store.write_file("deploy", "references/steps.md", "1. build\n", user_key=A)
    store.create("notes", skill_md("notes"), user_key=A)
    store.write_file("notes", "templates/t.md", "a template\n", user_key=A)
    store.delete("notes", user_key=A)
    store.create("deploy", skill_md("deploy", "B's way."), user_key=B)
    store.create("shared", skill_md("shared", "Promoted."), user_key=B)
    store.promote("shared", B)
    broken = home / "skills-private" / B / "broken"
    broken.mkdir()
    (broken / "SKILL.md").write_text("no front matter\n")
    (home / "skills-private" / A / "ops" / "deploy" / "assets").mkdir()
    (home / "skills-private" / A / "ops" / "deploy" / "assets" / "logo.png").write_bytes(b"\x89P")
    manifest = json.loads(store.manifest_path.read_text())
    manifest["unowned"]["old-bot"] = {"path": "old-bot", "sha256": "0" * 64}
    store.manifest_path.write_text(json.dumps(manifest))
    return store


def view(store: SkillsStore) -> list[tuple[object, ...]]:
    return [
        (s.relpath, s.owner, s.user_key, s.description, s.digest, store.files_of(s))
        for s in store.every_skill()
    ]


def test_a_copy_into_postgresql_holds_the_same_skills_and_digest(
    tmp_path: Path, pg_db: PgSyncDatabase
) -> None:
    source = folders(tmp_path)
    private = PgPrivateSkills(pg_db)
    assert private.is_empty()
    counts = private.import_from_folders(
        source.private_dir, source.archive_dir, source.manifest_path
    )
    assert counts == {
        "people": 2,
        "skills": 3,
        "files": 4,
        "archived files": 2,
        "manifest": 1,
        "files left behind": 1,  # the binary logo: skills hold text
    }
    assert not private.is_empty()
    target = SkillsStore(source.skills_dir, tmp_path / "unused.json", private=private)
    assert target.content_digest() == source.content_digest()
    logo = source.private_dir / A / "ops" / "deploy" / "assets" / "logo.png"
    assert "assets/logo.png" in source.support_files("deploy", user_key=A)
    logo.unlink()
    assert source.content_digest() == target.content_digest()  # the digest never saw it
    assert view(target) == view(source)
    assert target.read_text("deploy", "references/steps.md", user_key=A) == "1. build\n"
    assert [p.message for p in target.problems()] == [p.message for p in source.problems()]
    assert target.private.read_manifest() == source.private.read_manifest()
    target.patch("deploy", "Step one.", "Changed.", user_key=B)
    assert target.content_digest() != source.content_digest()
    with pytest.raises(SkillStorageError, match="not empty"):
        private.import_from_folders(source.private_dir, source.archive_dir, source.manifest_path)


def test_empty_folders_and_an_empty_database_have_one_digest(
    tmp_path: Path, pg_db: PgSyncDatabase
) -> None:
    source = SkillsStore(tmp_path / "skills", tmp_path / "home" / "skills-manifest.json")
    private = PgPrivateSkills(pg_db)
    counts = private.import_from_folders(source.private_dir, None, source.manifest_path)
    assert set(counts.values()) == {0}
    assert private.is_empty()
    assert private.content_digest() == source.content_digest()
