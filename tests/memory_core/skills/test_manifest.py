"""The skills manifest on its own: reading, writing, recording and ownership."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memory_core.errors import SkillManifestError
from memory_core.skills.manifest import (
    MANIFEST_VERSION,
    is_bot_owned,
    locked,
    read_manifest,
    record,
    text_digest,
    write_manifest,
)


def test_a_missing_manifest_has_no_entries(tmp_path: Path) -> None:
    assert read_manifest(tmp_path / "absent.json") == {}


def test_written_entries_read_back_sorted_with_the_version(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    entries = {"zeta": {"path": "zeta", "sha256": "1"}, "alpha": {"path": "ops/alpha"}}
    write_manifest(path, entries)
    data = json.loads(path.read_text(encoding="utf-8"))
    assert data["version"] == MANIFEST_VERSION
    assert list(data["skills"]) == ["alpha", "zeta"]
    assert read_manifest(path) == entries


@pytest.mark.parametrize(
    ("content", "problem"),
    [
        ("{not json", "not valid JSON"),
        ('{"skills": []}', "unexpected shape"),
        ('{"skills": {"a": "b"}}', "unexpected shape"),
        ("[]", "unexpected shape"),
    ],
)
def test_a_damaged_manifest_is_a_manifest_error(tmp_path: Path, content: str, problem: str) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(SkillManifestError, match=problem):
        read_manifest(path)


def test_recording_again_keeps_the_creation_time() -> None:
    entries: dict[str, dict[str, str]] = {}
    record(entries, "notes", "notes", text_digest("v1"))
    entries["notes"]["created_at"] = "2020-01-01T00:00:00Z"
    record(entries, "notes", "ops/notes", text_digest("v2"))
    assert entries["notes"]["created_at"] == "2020-01-01T00:00:00Z"
    assert entries["notes"]["path"] == "ops/notes"
    assert entries["notes"]["sha256"] == text_digest("v2")


def test_a_skill_is_the_bots_only_while_path_and_digest_match() -> None:
    digest = text_digest("body")
    entry = {"path": "ops/notes", "sha256": digest}
    assert is_bot_owned(entry, "ops/notes", digest)
    assert not is_bot_owned(entry, "notes", digest)
    assert not is_bot_owned(entry, "ops/notes", text_digest("edited by hand"))
    assert not is_bot_owned(None, "ops/notes", digest)
    assert not is_bot_owned({}, "ops/notes", digest)


def test_locked_reads_the_entries_and_creates_the_folder(tmp_path: Path) -> None:
    path = tmp_path / "home" / "manifest.json"
    with locked(path, timeout=1.0) as entries:
        assert entries == {}
        assert path.parent.is_dir()
