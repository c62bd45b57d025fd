"""The skills manifest on its own: versions 1 and 2, promotions, and unowned skills."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_core.errors import SkillManifestError
from memory_core.skills.manifest import (
    MANIFEST_VERSION,
    Manifest,
    is_bot_owned,
    locked,
    read_manifest,
    record_promotion,
    text_digest,
    write_manifest,
)


def test_a_missing_manifest_is_empty(tmp_path: Path) -> None:
    assert read_manifest(tmp_path / "absent.json") == Manifest()


def test_written_entries_read_back_sorted_with_the_version(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    manifest = Manifest(
        unowned={"zeta": {"path": "zeta", "sha256": "1"}, "alpha": {"path": "ops/alpha"}},
        promoted={"deploy": {"path": "deploy", "from": "telegram-1"}},
    )
    write_manifest(path, manifest)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == MANIFEST_VERSION == 2
    assert list(data["unowned"]) == ["alpha", "zeta"]
    assert read_manifest(path) == manifest


def test_a_version_1_manifest_reads_as_unowned_skills(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    entry = {"path": "ops/notes", "sha256": text_digest("x"), "created_at": "2025-01-01T00:00:00Z"}
    path.write_text(json.dumps({"version": 1, "skills": {"notes": entry}}), encoding="utf-8")
    assert read_manifest(path) == Manifest(unowned={"notes": entry})


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"skills": []}', "unexpected shape"),
        ('{"skills": {"a": "b"}}', "unexpected shape"),
        ('{"version": 2, "promoted": {"a": 1}}', "unexpected shape"),
        ('{"version": 3, "unowned": {}}', "newer than this Mnemo"),
        ("[]", "unexpected shape"),
    ],
)
def test_a_damaged_manifest_is_a_manifest_error(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SkillManifestError, match=problem):
        read_manifest(path)


def test_a_promotion_is_recorded_and_ends_unowned() -> None:
    manifest = Manifest(unowned={"notes": {"path": "notes", "sha256": "1"}})
    record_promotion(manifest, "notes", "notes", None)
    record_promotion(manifest, "deploy", "ops/deploy", "telegram-1")
    assert manifest.unowned == {}
    assert manifest.promoted["notes"]["from"] == ""
    assert manifest.promoted["deploy"]["from"] == "telegram-1"
    assert manifest.promoted["deploy"]["path"] == "ops/deploy"


def test_a_skill_is_the_bots_only_while_path_and_digest_match() -> None:
    digest = text_digest("body")
    entry = {"path": "ops/notes", "sha256": digest}
    assert is_bot_owned(entry, "ops/notes", digest)
    assert not is_bot_owned(entry, "notes", digest)
    assert not is_bot_owned(entry, "ops/notes", text_digest("edited by hand"))
    assert not is_bot_owned(None, "ops/notes", digest)
    assert not is_bot_owned({}, "ops/notes", digest)


def test_locked_creates_the_folder_and_the_lock_file(tmp_path: Path) -> None:
    path = tmp_path / "home" / "manifest.json"
    with locked(path, timeout=1.0):
        assert path.parent.is_dir()
        assert (tmp_path / "home" / "manifest.json.lock").exists()
