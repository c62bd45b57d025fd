"""`AccessList`: the data dir's list and its pairing codes, on a real file and lock."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

from gateway.errors import AccessListError
from gateway.pairing import ALPHABET, CODE_LENGTH, CODE_TTL, AccessList, Grant
from memory_core import FileDocument

ALICE, BOB = Grant("telegram", "42"), Grant("telegram", "43")


def test_codes_are_short_unambiguous_and_one_per_person(tmp_path: Path) -> None:
    access = AccessList(FileDocument(tmp_path / "access.json"))
    first = access.issue_code("telegram", "42")
    assert len(first) == CODE_LENGTH and set(first) <= set(ALPHABET)
    assert not set("0O1IL") & set(ALPHABET)
    second = access.issue_code("telegram", "42")  # told again: the old code stops working
    with pytest.raises(AccessListError, match="unknown or already used"):
        access.redeem(first)
    assert access.redeem(second) == ALICE


def test_a_code_expires(tmp_path: Path) -> None:
    now = [1_000_000.0]
    access = AccessList(FileDocument(tmp_path / "access.json"), clock=lambda: now[0])
    code = access.issue_code("discord", "9")
    now[0] += CODE_TTL + 1
    with pytest.raises(AccessListError, match="has expired"):
        access.redeem(code)
    assert access.granted("discord") == frozenset()
    with pytest.raises(AccessListError, match="unknown or already used"):
        access.redeem(code)  # an expired code is used up by the attempt too


def test_another_writer_is_seen_at_the_next_decision(tmp_path: Path) -> None:
    path = tmp_path / "access.json"
    bot, cli = AccessList(FileDocument(path)), AccessList(FileDocument(path))
    assert bot.granted("telegram") == frozenset()
    cli.allow(ALICE)
    assert bot.granted("telegram") == {"42"}
    code = bot.issue_code("telegram", "43")  # the bot's write keeps the CLI's
    assert cli.redeem(code) == BOB
    assert bot.granted("telegram") == {"42", "43"}
    assert cli.deny(ALICE) and not cli.deny(ALICE)
    assert bot.granted("telegram") == {"43"}


def test_a_broken_file_is_refused_and_kept(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "access.json"
    bot = AccessList(FileDocument(path))
    bot.allow(ALICE)
    assert bot.granted("telegram") == {"42"}
    path.write_text('{"allowed": {"telegram": [42]}}')  # a hand edit gone wrong
    with pytest.raises(AccessListError, match="not a valid access list"):
        AccessList(FileDocument(path)).allow(BOB)
    assert path.read_text() == '{"allowed": {"telegram": [42]}}'  # nothing lost
    with caplog.at_level(logging.WARNING):
        assert bot.granted("telegram") == {"42"}  # the bot keeps what it read before
    assert "keeping the access list read before" in caplog.text


def test_codes_are_never_logged_in_full(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    access = AccessList(FileDocument(tmp_path / "access.json"))
    with caplog.at_level(logging.DEBUG):
        code = access.issue_code("telegram", "42")
        access.redeem(code)
        with pytest.raises(AccessListError):
            access.redeem(code)
    assert code[:2] in caplog.text and code not in caplog.text
    assert code not in (tmp_path / "access.json").read_text()
