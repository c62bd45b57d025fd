"""Configuration: defaults, the example file, environment overrides, clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from gateway.config import Config, SkillsConfig, load_config, storage_settings
from gateway.errors import ConfigError
from gateway.urls import redact_url_credentials, redact_url_password

EXAMPLE = Path(__file__).resolve().parents[2] / "config" / "mnemo.example.yaml"


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "mnemo.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def test_defaults_without_a_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    config = load_config(None, environ={})
    assert config.home == Path("data")
    assert config.memory.memory_char_limit == 2200
    assert config.memory.user_char_limit == 1375
    assert config.memory.profile_in_groups is False
    assert config.memory.notifications == "on"
    assert config.providers.external is None
    assert config.aux_model == config.llm.model
    assert not config.telegram.active and not config.discord.active


def _fields(model: type[BaseModel], prefix: str = "") -> set[str]:
    keys: set[str] = set()
    for name, field in model.model_fields.items():
        if field.exclude:  # secrets: environment only
            continue
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            keys |= _fields(ann, f"{prefix}{name}.")
        else:
            keys.add(f"{prefix}{name}")
    return keys


def _flatten(data: dict[str, Any], prefix: str = "") -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in data.items():
        if isinstance(value, dict):
            out.update(_flatten(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = value
    return out


def test_example_documents_every_key_with_its_default() -> None:
    documented = _flatten(yaml.safe_load(EXAMPLE.read_text(encoding="utf-8")))
    assert set(documented) == _fields(Config)
    from_example = load_config(EXAMPLE, environ={})
    beside = EXAMPLE.parent  # the file's relative paths are relative to its folder
    expected = Config(home=beside / "data", skills=SkillsConfig(dir=beside / "skills"))
    expected.skills._named = True  # the example names skills.dir
    assert from_example == expected


def test_environment_overrides_file(tmp_path: Path) -> None:
    path = write(tmp_path, "home: /from/file\nllm: {base_url: http://file/v1}\n")
    env = {
        "MNEMO_HOME": "/from/env",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
        "OPENAI_API_KEY": "sk-env",
        "TELEGRAM_BOT_TOKEN": "123:abc",
        "MNEMO_SKILLS_DIR": "/skills",
    }
    config = load_config(path, environ=env)
    assert config.home == Path("/from/env")
    assert config.llm.base_url == "http://127.0.0.1:9/v1"
    assert config.llm.api_key == "sk-env"
    assert config.skills.dir == Path("/skills")
    assert config.telegram.token == "123:abc" and config.telegram.active
    assert not config.discord.active


def test_config_is_frozen() -> None:
    config = Config()
    with pytest.raises(ValueError):
        config.memory.user_char_limit = 5  # type: ignore[misc]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("llm: {modle: gpt}\n", "config error: llm.modle: unknown key"),
        ("llm: {timeout: abc}\n", "config error: llm.timeout:"),
        ("memory: {notifications: loud}\n", "config error: memory.notifications:"),
        ("admins: [telegram-1]\n", "config error: admins: Value error, 'telegram-1' is not"),
        ("homee: x\n", "config error: homee: unknown key"),
        ("llm: {api_key: sk-x}\n", "llm.api_key: secrets are not read from the file; set OPENAI"),
        ("telegram: {token: x}\n", "telegram.token: secrets are not read from the file"),
        ("- a\n- b\n", "the top level must be a mapping"),
        ("llm: [1, 2]\n", "config error: llm:"),
        ("llm: {model: [unclosed\n", "at line"),
    ],
)
def test_bad_config_names_the_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(write(tmp_path, text), environ={})
    message = str(info.value)
    assert expected in message
    assert "\n" not in message


def test_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read config file"):
        load_config(tmp_path / "nope.yaml", environ={})


def test_admins_and_allowlists_accept_numbers(tmp_path: Path) -> None:
    path = write(tmp_path, "admins: ['telegram:42']\ntelegram: {allowed_users: [42, 43]}\n")
    config = load_config(path, environ={})
    assert config.admins == ("telegram:42",)
    assert config.telegram.allowed_users == ("42", "43")


def test_enabled_platform_needs_no_token_to_load(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "discord: {enabled: true}\n"), environ={})
    assert config.discord.active and config.discord.token is None


BILLION_LAUGHS = """\
a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]
b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]
c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]
d: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]
e: &e [*d,*d,*d,*d,*d,*d,*d,*d,*d]
f: &f [*e,*e,*e,*e,*e,*e,*e,*e,*e]
g: &g [*f,*f,*f,*f,*f,*f,*f,*f,*f]
h: &h [*g,*g,*g,*g,*g,*g,*g,*g,*g]
i: &i [*h,*h,*h,*h,*h,*h,*h,*h,*h]
"""


def one_line_error(path: Path, environ: dict[str, str] | None = None) -> str:
    with pytest.raises(ConfigError) as info:
        load_config(path, environ=environ or {})
    message = str(info.value)
    assert "\n" not in message
    assert len(message) < 300
    return message


def test_an_alias_bomb_is_refused_before_it_expands(tmp_path: Path) -> None:
    message = one_line_error(write(tmp_path, BILLION_LAUGHS))
    assert message == (
        f"config file {tmp_path / 'mnemo.yaml'} at line 2: aliases (*name) are not allowed"
    )


def test_an_alias_inside_a_section_is_refused(tmp_path: Path) -> None:
    text = "llm: {model: &m gpt-4o}\nauxiliary: {model: *m}\n"
    assert "aliases (*name) are not allowed" in one_line_error(write(tmp_path, text))


def test_a_non_utf8_file_names_the_file_and_the_byte_offset(tmp_path: Path) -> None:
    path = tmp_path / "mnemo.yaml"
    path.write_bytes(b"llm:\n  model: caf\xe9\n")
    message = one_line_error(path)
    assert message == f"config file {path} is not UTF-8: invalid byte 0xe9 at offset 17"


def test_a_file_over_the_size_cap_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "mnemo.yaml"
    path.write_bytes(b"# " + b"x" * (1 << 20) + b"\n")
    assert one_line_error(path) == f"config file {path} is larger than 1 MiB"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("llm: " + "[" * 5000 + "]" * 5000 + "\n", "nesting deeper than"),
        ("a: " + "{a: " * 5000 + "1" + "}" * 5000 + "\n", "nesting deeper than"),
        ("llm: {timeout: " + "9" * 10000 + "}\n", "cannot read a value"),
        ("llm: {model: [" + "1," * 6000 + "]}\n", "line 1: more than 5000 keys and values"),
    ],
    ids=["deep-lists", "deep-maps", "huge-int", "many-values"],
)
def test_pathological_yaml_is_one_line(tmp_path: Path, text: str, expected: str) -> None:
    assert expected in one_line_error(write(tmp_path, text))


@pytest.mark.parametrize(
    "text",
    [
        "llm: {model: [" + ", ".join(["'xxxxxxxxxx'"] * 2000) + "]}\n",
        "llm: {timeout: '" + "y" * 100_000 + "'}\n",
        "telegram:\n  allowed_users:\n    ? " + "z" * 5000 + "\n    : 1\n",
    ],
    ids=["long-list", "long-string", "long-key-in-value"],
)
def test_errors_never_echo_a_large_value(tmp_path: Path, text: str) -> None:
    message = one_line_error(write(tmp_path, text))
    assert message.startswith("config error: llm.") or message.startswith("config error: telegram.")
    assert "xxxxxxxxxx', 'xxxxxxxxxx" not in message and "yyyyyyyyyy" not in message
    assert "zzzzzzzzzz" not in message


def test_a_short_bad_value_is_still_shown(tmp_path: Path) -> None:
    message = one_line_error(write(tmp_path, "llm: {timeout: abc}\n"))
    assert "(got 'abc')" in message


def test_a_huge_unknown_key_is_shortened(tmp_path: Path) -> None:
    message = one_line_error(write(tmp_path, "llm:\n  ? " + "k" * 10_000 + "\n  : 1\n"))
    assert message.startswith("config error: llm.kkkk") and message.endswith("…: unknown key")


URL_KEYS = [
    ("llm", "base_url", "https", "OPENAI_API_KEY"),
    ("auxiliary", "base_url", "https", "OPENAI_API_KEY"),
    ("telegram", "base_url", "https", "TELEGRAM_BOT_TOKEN"),
    ("telegram", "base_file_url", "https", "TELEGRAM_BOT_TOKEN"),
    ("discord", "api_base", "https", "DISCORD_BOT_TOKEN"),
    ("discord", "gateway_url", "wss", "DISCORD_BOT_TOKEN"),
]


@pytest.mark.parametrize(("section", "key", "scheme", "var"), URL_KEYS)
@pytest.mark.parametrize("userinfo", ["user:sk-abc123@", "sk-abc123@", "u:sk-abc123@x@"])
def test_credentials_in_a_url_are_refused_like_any_secret(
    tmp_path: Path, section: str, key: str, scheme: str, var: str, userinfo: str
) -> None:
    text = f"{section}:\n  {key}: {scheme}://{userinfo}host.example:99999/v1\n"
    message = one_line_error(write(tmp_path, text))
    assert message.startswith(f"config error: {section}.{key}: credentials in a URL")
    assert var in message
    assert "sk-abc123" not in message


def test_credentials_in_the_base_url_from_the_environment_are_accepted(tmp_path: Path) -> None:
    env = {"OPENAI_BASE_URL": "http://user:sk-abc123@127.0.0.1:8080/v1"}
    config = load_config(write(tmp_path, ""), environ=env)
    assert config.llm.base_url == env["OPENAI_BASE_URL"]


def test_a_bad_url_from_the_environment_is_reported_without_its_credentials(
    tmp_path: Path,
) -> None:
    env = {"OPENAI_BASE_URL": "http://user:sk-abc123@127.0.0.1:99999/v1"}
    message = one_line_error(write(tmp_path, ""), environ=env)
    assert message.startswith("config error: llm.base_url:")
    assert "sk-abc123" not in message and "http://***@127.0.0.1:99999/v1" in message


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("see http://user:sk-abc@host/v1 and wss://t@h", "see http://***@host/v1 and wss://***@h"),
        ("https://u:p@ss@host:1/x?y=a@b", "https://***@host:1/x?y=a@b"),
        ("https://host/v1 mail me@example.org", "https://host/v1 mail me@example.org"),
    ],
)
def test_redact_url_credentials(text: str, expected: str) -> None:
    assert redact_url_credentials(text) == expected


def test_webhook_mode_needs_a_well_formed_secret(tmp_path: Path) -> None:
    path = write(tmp_path, "telegram: {webhook: {url: https://bot.example.org/hook}}\n")
    with pytest.raises(ConfigError, match=r"telegram: .*TELEGRAM_WEBHOOK_SECRET"):
        load_config(path, environ={})
    with pytest.raises(ConfigError, match="must be 1-256 characters"):
        load_config(path, environ={"TELEGRAM_WEBHOOK_SECRET": "has spaces"})
    config = load_config(path, environ={"TELEGRAM_WEBHOOK_SECRET": "s3cret_-x"})
    assert config.telegram.webhook_secret == "s3cret_-x"
    assert "s3cret" not in config.model_dump_json()  # a secret is never dumped


def test_the_webhook_url_may_come_from_the_environment(tmp_path: Path) -> None:
    path = write(tmp_path, "telegram: {webhook: {listen: 0.0.0.0, port: 8444}}\n")
    env = {"TELEGRAM_WEBHOOK_URL": "https://bot.example.org/tg", "TELEGRAM_WEBHOOK_SECRET": "s"}
    webhook = load_config(path, environ=env).telegram.webhook
    assert (webhook.url, webhook.listen, webhook.port) == (
        "https://bot.example.org/tg",
        "0.0.0.0",
        8444,
    )
    with pytest.raises(ConfigError, match=r"^config error: telegram.webhook.url: Value error"):
        load_config(path, environ=env | {"TELEGRAM_WEBHOOK_URL": "ftp://x"})


def test_allowed_users_take_a_star_for_everyone(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'telegram: {allowed_users: ["*"]}\ndiscord: {allowed_users: [42], guild_ids: [7]}\n',
    )
    config = load_config(path, environ={})
    assert config.telegram.allowed_users == ("*",)
    assert config.discord.allowed_users == ("42",)
    assert config.discord.guild_ids == ("7",)


def test_ids_with_stray_spaces_are_read_as_the_ids(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'admins: [" telegram : 42 "]\n'
        'telegram: {allowed_users: [" 1001", "1002 "]}\n'
        'discord: {allowed_users: [" * "]}\n',
    )
    config = load_config(path, environ={})
    assert config.admins == ("telegram:42",)
    assert config.telegram.allowed_users == ("1001", "1002")
    assert config.discord.allowed_users == ("*",)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            'admins: ["telegram:*"]\n',
            "config error: admins: Value error, 'telegram:*': admins are named one by one; "
            "a wildcard is not allowed",
        ),
        ('admins: ["*:42"]\n', "admins: Value error, '*:42': the platform must be one of"),
        ('admins: ["slack:42"]\n', "admins: Value error, 'slack:42': the platform must be"),
        ('admins: ["telegram:@alice"]\n', "'telegram:@alice': '@alice' is not a user id"),
        (
            'telegram: {allowed_users: ["alice"]}\n',
            "config error: telegram.allowed_users: Value error, 'alice' is not a user id",
        ),
        ('telegram: {allowed_users: ["10 01"]}\n', "'10 01' is not a user id"),
        ('discord: {allowed_users: ["*1"]}\n', "discord.allowed_users: Value error, '*1' is not"),
        ('discord: {allowed_users: [""]}\n', "discord.allowed_users: Value error, '' is not"),
        ("telegram: {allowed_users: [true]}\n", "'True' is not a user id"),
    ],
)
def test_ids_that_would_match_nobody_are_refused_naming_the_key(
    tmp_path: Path, text: str, expected: str
) -> None:
    assert expected in one_line_error(write(tmp_path, text))


def test_shared_group_sessions_are_refused_with_one_line(tmp_path: Path) -> None:
    for value in ("false", "true"):  # the key is gone: either value is a line to delete
        path = write(tmp_path, f"sessions: {{group_sessions_per_user: {value}}}\n")
        with pytest.raises(ConfigError) as error:
            load_config(path, environ={})
        line = str(error.value)
        assert "\n" not in line and line.startswith("config error: sessions")
        assert "group_sessions_per_user was removed" in line and "delete the key" in line


# ----- paths in a file are relative to the file -------------------------------------------


def test_relative_paths_in_a_file_are_relative_to_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deploy, elsewhere = tmp_path / "deploy", tmp_path / "elsewhere"
    deploy.mkdir()
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    path = write(deploy, "home: state\nskills: {dir: ../shared-skills}\npersona_file: me.txt\n")
    config = load_config(Path("../deploy/mnemo.yaml"), environ={})
    assert config.home == deploy / "state"
    assert config.skills.dir.resolve() == tmp_path / "shared-skills"
    assert config.persona_file == deploy / "me.txt"
    assert load_config(path, environ={}) == config  # the same from any directory


def test_with_a_file_the_default_paths_sit_beside_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "deploy").mkdir()
    path = write(tmp_path / "deploy", "skills:\nllm: {model: m}\n")
    config = load_config(path, environ={})
    assert config.home == tmp_path / "deploy" / "data"
    assert config.skills.dir == tmp_path / "deploy" / "skills"
    assert config.persona_file is None


def test_absolute_and_home_relative_paths_are_kept(tmp_path: Path) -> None:
    path = write(tmp_path, f"home: {tmp_path / 'abs'}\nskills: {{dir: ~/mnemo-skills}}\n")
    config = load_config(path, environ={})
    assert config.home == tmp_path / "abs"
    assert config.skills.dir == Path.home() / "mnemo-skills"


def test_paths_from_the_environment_stay_relative_to_the_current_directory(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "home: state\n")
    env = {"MNEMO_HOME": "here", "MNEMO_SKILLS_DIR": "my-skills"}
    config = load_config(path, environ=env)
    assert config.home == Path("here") and config.skills.dir == Path("my-skills")


def test_a_bad_path_section_is_still_named(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"^config error: skills: "):
        load_config(write(tmp_path, "skills: [a]\n"), environ={})


def test_storage_defaults_to_sqlite_and_takes_a_postgres_url_from_the_environment(
    tmp_path: Path,
) -> None:
    assert load_config(None, environ={}).storage.url is None
    url = "postgresql://mnemo:s3cret@db.internal:5432/mnemo"
    config = load_config(
        write(tmp_path, "storage: {pool_size: 4}\n"), environ={"MNEMO_DATABASE_URL": url}
    )
    assert config.storage.url == url and config.storage.postgres
    settings = storage_settings(config)  # what the bot and every CLI command open
    assert (settings.url, settings.pool_size, settings.home) == (url, 4, config.home)
    assert settings.backend == "postgresql" and storage_settings(Config()).backend == "sqlite"


def test_storage_url_in_the_file_may_name_a_user_but_not_a_password(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "storage: {url: 'postgresql://mnemo@db/mnemo'}\n"), {})
    assert config.storage.url == "postgresql://mnemo@db/mnemo"
    for url in ("postgresql://mnemo:s3cret@db/mnemo", "postgresql://db/mnemo?password=s3cret"):
        with pytest.raises(ConfigError) as caught:
            load_config(write(tmp_path, f"storage: {{url: '{url}'}}\n"), {})
        assert "MNEMO_DATABASE_URL" in str(caught.value) and "s3cret" not in str(caught.value)


@pytest.mark.parametrize("url", ["mysql://db/mnemo", "postgresql://db:port/x", "state.db"])
def test_a_storage_url_that_is_not_postgres_is_one_clear_error(tmp_path: Path, url: str) -> None:
    with pytest.raises(ConfigError, match=r"storage\.url"):
        load_config(None, environ={"MNEMO_DATABASE_URL": url})


def test_off_and_on_unquoted_read_as_the_words_written(tmp_path: Path) -> None:
    path = tmp_path / "mnemo.yaml"
    path.write_text("memory:\n  write_approval: off\n  notifications: on\n", encoding="utf-8")
    memory = load_config(path, environ={}).memory
    assert (memory.write_approval, memory.notifications) == ("off", "on")
    path.write_text("memory:\n  notifications: off\n", encoding="utf-8")
    assert load_config(path, environ={}).memory.notifications == "off"


def test_a_zone_off_earth_is_one_line_and_a_half_hour_offset_a_zone(tmp_path: Path) -> None:
    path = tmp_path / "mnemo.yaml"
    path.write_text("locale:\n  timezone: UTC-13\n", encoding="utf-8")
    with pytest.raises(ConfigError, match="'UTC-13' is not a time zone"):
        load_config(path, environ={})
    path.write_text("locale:\n  timezone: UTC+5:30\n", encoding="utf-8")
    assert load_config(path, environ={}).locale.timezone == "UTC+5:30"


def test_a_url_shown_to_paste_masks_the_password_only() -> None:
    assert redact_url_password("postgresql://mnemo@db:5432/mnemo") == (
        "postgresql://mnemo@db:5432/mnemo"
    )
    assert redact_url_password("postgresql://mnemo:s3cret@db/mnemo") == (
        "postgresql://mnemo:***@db/mnemo"
    )
    assert redact_url_password("postgresql://db/m?user=x&password=abc") == (
        "postgresql://db/m?user=x&password=***"
    )
