"""`AccessPolicy`: the one place that decides who is served and who is an admin."""

from __future__ import annotations

from pathlib import Path

from gateway.access import AccessPolicy
from gateway.pairing import AccessList
from memory_core import FileDocument


def test_admins_are_the_listed_ids_and_the_console() -> None:
    policy = AccessPolicy({"telegram": ["42", "43"]}, admins=["telegram:42"])
    assert policy.is_admin("telegram", "42")
    assert not policy.is_admin("telegram", "43")  # served, but not an admin
    assert not policy.is_admin("discord", "42")  # the same id on another platform
    assert policy.is_admin("console", "anyone")  # the operator sits at the console


def test_everyone_serves_every_platform_and_keeps_its_admins() -> None:
    policy = AccessPolicy.everyone(admins=["discord:7"])
    assert policy.allows("telegram", "1") and policy.allows("discord", "2")
    assert policy.allows("matrix", "3")  # a platform it never heard of
    assert policy.is_admin("discord", "7")
    assert not policy.is_admin("telegram", "1")


def test_a_platform_not_named_serves_nobody_by_default() -> None:
    policy = AccessPolicy({"telegram": ["*"]})
    assert policy.allows("telegram", "1")
    assert not policy.allows("discord", "1")
    assert policy.decide("discord", "1").reply is not None  # told their id, once


async def test_a_stranger_in_a_group_is_refused_silently_and_told_in_private(
    tmp_path: Path,
) -> None:
    granted = AccessList(FileDocument(tmp_path / "access.json"))
    policy = AccessPolicy({"telegram": ["1"]}, granted=granted)
    in_group = await policy.admit("telegram", "99", "group")
    assert not in_group.allowed and in_group.reply is None  # no id, no code before the group
    assert not (tmp_path / "access.json").exists()  # no code was issued for it
    in_private = await policy.admit("telegram", "99", "private")
    assert not in_private.allowed and in_private.reply is not None
    assert in_private.values["user_id"] == "99" and in_private.values.get("code")
