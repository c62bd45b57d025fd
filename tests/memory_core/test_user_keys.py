"""User keys are path-safe, stable and injective."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.errors import InvalidUserKeyError
from memory_core.user_keys import check_user_key, make_user_key, split_user_key


def test_plain_numeric_ids_stay_readable() -> None:
    assert make_user_key("telegram", "12345") == "telegram-12345"
    assert make_user_key("discord", "80351110224678912") == "discord-80351110224678912"


@pytest.mark.parametrize(
    "user_id", ["../../etc", "..", ".", "a/b", "a\\b", "\x00", "Ab", "with space", "ü", "%41"]
)
def test_unsafe_ids_are_escaped_into_one_safe_name(user_id: str) -> None:
    key = make_user_key("console", user_id)
    assert "/" not in key and "\\" not in key and "\x00" not in key
    assert key not in (".", "..")
    assert key == key.lower() or "%" in key
    assert split_user_key(key) == ("console", user_id)


@pytest.mark.parametrize(
    "key",
    [
        "../../etc",
        "..",
        "",
        "telegram",
        "telegram-",
        "-123",
        "Telegram-1",
        "telegram-a/b",
        "telegram-%61",  # not the canonical spelling of "a"
        "telegram-%zz",
        "telegram-%FF",  # not UTF-8
        "telegram-" + "1" * 300,
    ],
)
def test_malformed_keys_are_refused(key: str) -> None:
    with pytest.raises(InvalidUserKeyError):
        check_user_key(key)


@pytest.mark.parametrize("platform", ["", "Tele", "tele-gram", "a/b", "x" * 40])
def test_bad_platforms_are_refused(platform: str) -> None:
    with pytest.raises(InvalidUserKeyError, match="platform"):
        make_user_key(platform, "1")


def test_empty_id_is_refused() -> None:
    with pytest.raises(InvalidUserKeyError, match="empty"):
        make_user_key("telegram", "")


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20))
def test_different_ids_never_share_a_key(a: str, b: str) -> None:
    ka, kb = make_user_key("matrix", a), make_user_key("matrix", b)
    assert (ka == kb) == (a == b)
    # Even a case-insensitive filesystem keeps them apart.
    assert (ka.lower() == kb.lower()) == (a == b)
    assert check_user_key(ka) == ka
    assert split_user_key(ka) == ("matrix", a)
