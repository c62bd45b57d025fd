"""atomic_write_text: whole files or nothing, no temp files left behind."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from memory_core.atomic import atomic_write_text
from memory_core.errors import AtomicWriteError, MemoryCoreError


def _mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_writes_new_file_private_and_exact(tmp_path: Path) -> None:
    target = tmp_path / "notes.md"
    atomic_write_text(target, "one\r\ntwo §\n")
    assert target.read_bytes() == "one\r\ntwo §\n".encode()
    assert _mode(target) == 0o600
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notes.md"]


def test_replacing_keeps_the_mode_of_the_existing_file(tmp_path: Path) -> None:
    target = tmp_path / "SKILL.md"
    target.write_text("old")
    target.chmod(0o644)
    atomic_write_text(target, "new")
    assert target.read_text() == "new"
    assert _mode(target) == 0o644


def test_explicit_mode_wins(tmp_path: Path) -> None:
    target = tmp_path / "x"
    atomic_write_text(target, "data", mode=0o640)
    assert _mode(target) == 0o640


def test_missing_folder_is_a_clear_error_and_creates_nothing(tmp_path: Path) -> None:
    with pytest.raises(AtomicWriteError, match="cannot write"):
        atomic_write_text(tmp_path / "missing" / "f.md", "x")
    assert list(tmp_path.iterdir()) == []


def test_failure_during_replace_removes_the_temp_file_and_keeps_the_old_one(
    tmp_path: Path,
) -> None:
    target = tmp_path / "dir-in-the-way"
    target.mkdir()
    (target / "child").write_text("keep me")  # os.replace cannot replace a non-empty folder
    with pytest.raises(MemoryCoreError):
        atomic_write_text(target, "x")
    assert (target / "child").read_text() == "keep me"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dir-in-the-way"]


def test_unencodable_text_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "f.md"
    target.write_text("before")
    with pytest.raises(UnicodeEncodeError):
        atomic_write_text(target, "lone surrogate \ud800")
    assert target.read_text() == "before"
    assert [p.name for p in tmp_path.iterdir()] == ["f.md"]


def test_a_reader_never_sees_a_partial_file(tmp_path: Path) -> None:
    target = tmp_path / "f.md"
    big_a, big_b = "a" * 200_000, "b" * 200_000
    atomic_write_text(target, big_a)
    pid = os.fork()
    if pid == 0:  # child: rewrite the file many times, then exit without cleanup
        try:
            for i in range(60):
                atomic_write_text(target, big_b if i % 2 else big_a)
        finally:
            os._exit(0)
    seen: set[str] = set()
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        seen.add(target.read_text())
    seen.add(target.read_text())
    assert seen <= {big_a, big_b}
