"""`AccessPolicy`: the one place that decides who is served and who is an admin."""

from __future__ import annotations

from gateway.access import AccessPolicy


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
