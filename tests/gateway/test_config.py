"""Configuration: defaults, the example file, environment overrides, clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from gateway.config import Config, load_config
from gateway.errors import ConfigError

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
    assert config.sessions.group_sessions_per_user is True
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
    assert from_example == Config()


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
    assert config.is_admin("telegram", "42")
    assert not config.is_admin("discord", "42")
    assert config.telegram.allowed_users == ("42", "43")


def test_enabled_platform_needs_no_token_to_load(tmp_path: Path) -> None:
    config = load_config(write(tmp_path, "discord: {enabled: true}\n"), environ={})
    assert config.discord.active and config.discord.token is None
