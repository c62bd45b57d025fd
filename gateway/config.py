"""Configuration: one YAML file plus environment variables, validated once.

`load_config()` reads the file (``--config``, else ``./mnemo.yaml`` when it
exists), applies the environment overrides, validates everything into frozen
objects and returns a `Config`. Secrets come from the environment only; a
secret written into the file, including credentials in a URL
(``https://user:key@host``), is refused. Relative paths in the file (and the
default ``data`` and ``skills`` when there is a file) are relative to the file's
folder; those from the environment, or with no file at all, to the current
directory. The file is read defensively: at most 1 MiB of UTF-8, no YAML aliases
(no "billion laughs"), bounded nesting and node count (PyYAML parses about 10,000
values a second). Any problem raises `ConfigError` with one line that names the
key and says what is wrong; it never echoes a large value or URL credentials.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import (
    AfterValidator,
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    field_validator,
    model_validator,
)

from gateway.config_yaml import SHOWN_CHARS, capped, read_yaml
from gateway.errors import ConfigError
from gateway.i18n import LANGUAGES, negotiate, parse_zone
from gateway.urls import (
    PASSWORD_IN_URL,
    USERINFO,
    check_url,
    redact_url_credentials,
)

if TYPE_CHECKING:
    from memory_core import StorageSettings

DEFAULT_CONFIG_FILE = Path("mnemo.yaml")
REMOVED_GROUP_SESSIONS = (  # a shared session mixed people's sessions and commands
    "group_sessions_per_user was removed (each person in a group has a session of their "
    "own); delete the key"
)


def _http_url(value: str | None) -> str | None:
    return check_url(value, ("http", "https"))


def _ws_url(value: str | None) -> str | None:
    return check_url(value, ("ws", "wss"))


HttpUrl = Annotated[str, AfterValidator(_http_url)]
OptionalHttpUrl = Annotated[str | None, AfterValidator(_http_url)]
WsUrl = Annotated[str, AfterValidator(_ws_url)]


class _Section(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class LLMConfig(_Section):
    """The main model endpoint (any OpenAI-compatible server)."""

    base_url: HttpUrl = "https://api.openai.com/v1"
    model: str = "gpt-4o-mini"
    timeout: float = Field(default=60.0, gt=0)
    stall_timeout: float = Field(default=30.0, gt=0)  # silence that counts as a stalled reply
    max_concurrency: int = Field(default=4, ge=1)
    max_tool_steps: int = Field(default=20, ge=1)  # model replies with tool calls per turn
    context_chars: int = Field(default=200_000, ge=10_000)  # request budget; compress near it
    vision: bool = False  # the model reads pictures: a photo reaches it as an image part
    api_key: str | None = Field(default=None, exclude=True)  # from OPENAI_API_KEY only


class AuxiliaryConfig(_Section):
    """The model for recaps, review and extraction; unset fields follow `llm`."""

    base_url: OptionalHttpUrl = None
    model: str | None = None
    timeout: float | None = Field(default=None, gt=0)
    recap_timeout: float = Field(default=20.0, gt=0)  # one deadline for a search's recaps


class MemoryConfig(_Section):
    memory_char_limit: int = Field(default=2200, ge=100)
    user_char_limit: int = Field(default=1375, ge=100)
    profile_in_groups: bool = False
    nudge_interval: int = Field(default=10, ge=0)
    notifications: Literal["off", "on", "verbose"] = "on"
    # off: write directly; background: the review's and extraction's writes wait for the
    # person's approval; all: the person's own memory-tool writes in a turn too.
    write_approval: Literal["off", "background", "all"] = "off"
    judge: bool = False  # ask the auxiliary model whether each background entry is a fact

    @field_validator("notifications", "write_approval", mode="before")
    @classmethod
    def _yaml_words(cls, value: object) -> object:
        """`off` and `on` unquoted are YAML 1.1 booleans: read them as the words written."""
        if value is False:
            return "off"
        if value is True:
            return "on"
        return value


class SkillsConfig(_Section):
    dir: Path = Path("skills")
    creation_nudge_interval: int = Field(default=10, ge=0)
    _named: bool = PrivateAttr(default=False)  # set by `load_config`, never from a file

    @property
    def named(self) -> bool:
        """Whether the operator named `dir` (in the file or MNEMO_SKILLS_DIR): a missing
        folder they named is a mistake; the default one is made, empty."""
        return self._named


class SessionsConfig(_Section):
    idle_minutes: int = Field(default=120, ge=1)  # quiet this long: extract (end, if idle_reset)
    idle_reset: bool = False  # True: a quiet session ends; False: it is extracted and stays open
    max_open: int = Field(default=1000, ge=1)  # sessions held in memory; the rest resume from disk

    @model_validator(mode="before")
    @classmethod
    def _no_shared_group_sessions(cls, data: Any) -> Any:
        if isinstance(data, Mapping) and "group_sessions_per_user" in data:
            raise ValueError(REMOVED_GROUP_SESSIONS)
        return data


class StorageConfig(_Section):
    """Where the bot's state lives. `url` unset: SQLite (state.db) and files under `home`;
    a ``postgresql://`` URL (or MNEMO_DATABASE_URL): sessions, memory, settings, private
    skills and the skills manifest in that database. Shared skills stay `skills.dir`."""

    url: str | None = None
    pool_size: int = Field(default=8, ge=2, le=100)  # connections per pool (sessions, memory)

    @field_validator("url")
    @classmethod
    def _postgres_url(cls, value: str | None) -> str | None:
        if value is None or not value.strip():
            return None
        try:
            parts = urlsplit(value)
            parts.port  # noqa: B018 - raises ValueError for a bad port
        except ValueError as exc:
            raise ValueError(f"not a valid URL ({exc})") from None
        if parts.scheme not in ("postgresql", "postgres"):
            raise ValueError("must be a postgresql:// URL (unset: SQLite under home)")
        return value

    @property
    def postgres(self) -> bool:
        return self.url is not None


class ProvidersConfig(_Section):
    external: str | None = None
    history_recall: bool = True
    prefetch_timeout: float = Field(default=3.0, gt=0)


class TelegramWebhook(_Section):
    """Webhook mode: Telegram posts updates to `url`; Mnemo listens on `listen`:`port`."""

    url: OptionalHttpUrl = None  # the public HTTPS URL; null: long polling
    listen: str = "127.0.0.1"
    port: int = Field(default=8443, ge=1, le=65535)
    header_timeout: float = Field(default=10.0, gt=0)  # seconds to send a request's head
    body_timeout: float = Field(default=10.0, gt=0)  # seconds to send a request's body
    max_connections: int = Field(default=256, ge=1)  # open at once; more are closed at once


class TelegramConfig(_Section):
    enabled: bool | None = None  # None: on when TELEGRAM_BOT_TOKEN is set
    base_url: HttpUrl = "https://api.telegram.org/bot"
    base_file_url: HttpUrl = "https://api.telegram.org/file/bot"
    allowed_users: tuple[str, ...] = ()  # user ids, or "*" for everyone; empty: nobody
    group_trigger: Literal["mention", "all"] = "mention"
    edit_interval: float = Field(default=1.0, gt=0)  # seconds between edits of one chat
    calls_per_second: float = Field(default=30.0, ge=0)  # the bot's, all replicas; 0: no limit
    webhook: TelegramWebhook = TelegramWebhook()
    token: str | None = Field(default=None, exclude=True)  # from TELEGRAM_BOT_TOKEN only
    webhook_secret: str | None = Field(default=None, exclude=True)  # TELEGRAM_WEBHOOK_SECRET

    @field_validator("allowed_users", mode="before")
    @classmethod
    def _ids_as_strings(cls, value: Any) -> Any:
        return _allowed_ids(value)

    @property
    def active(self) -> bool:
        return bool(self.token) if self.enabled is None else self.enabled

    @model_validator(mode="after")
    def _webhook_has_a_secret(self) -> TelegramConfig:
        if self.webhook.url is not None and not self.webhook_secret:
            raise ValueError(
                "webhook.url is set: set TELEGRAM_WEBHOOK_SECRET too (1-256 characters of "
                "A-Z, a-z, 0-9, _ and -), so that only Telegram can post updates"
            )
        if self.webhook_secret and not re.fullmatch(r"[A-Za-z0-9_-]{1,256}", self.webhook_secret):
            raise ValueError(
                "TELEGRAM_WEBHOOK_SECRET must be 1-256 characters of A-Z, a-z, 0-9, _ and -"
            )
        return self


class DiscordConfig(_Section):
    enabled: bool | None = None  # None: on when DISCORD_BOT_TOKEN is set
    api_base: HttpUrl = "https://discord.com/api/v10"
    gateway_url: WsUrl = "wss://gateway.discord.gg"
    allowed_users: tuple[str, ...] = ()  # user ids, or "*" for everyone; empty: nobody
    allowed_guilds: tuple[str, ...] = ()  # server ids the bot answers in; empty: any server
    guild_ids: tuple[str, ...] = ()  # slash commands synced to these servers; empty: globally
    edit_interval: float = Field(default=1.0, gt=0)  # seconds between edits of one channel
    shard_count: int | None = Field(default=None, ge=1)  # None: one connection, no sharding
    shard_ids: tuple[int, ...] = ()  # the shards this process runs; empty: its replica's
    token: str | None = Field(default=None, exclude=True)  # from DISCORD_BOT_TOKEN only

    @field_validator("allowed_users", mode="before")
    @classmethod
    def _user_ids(cls, value: Any) -> Any:
        return _allowed_ids(value)

    @model_validator(mode="after")
    def _shards_in_range(self) -> DiscordConfig:
        if self.shard_ids and self.shard_count is None:
            raise ValueError("shard_ids is set: set shard_count too (the shards in all)")
        count = self.shard_count or 0
        for shard in self.shard_ids:
            if not 0 <= shard < count:
                raise ValueError(f"shard_ids: {shard} is not a shard of 0..{count - 1}")
        if len(set(self.shard_ids)) != len(self.shard_ids):
            raise ValueError("shard_ids: a shard is named twice")
        return self

    @field_validator("allowed_guilds", "guild_ids", mode="before")
    @classmethod
    def _ids_as_strings(cls, value: Any) -> Any:
        return _ids_as_strings(value)

    @property
    def active(self) -> bool:
        return bool(self.token) if self.enabled is None else self.enabled


class LoggingConfig(_Section):
    """How log lines are written to stderr."""

    format: Literal["text", "json"] = "text"  # json: one object per line, for log shippers


class TranscriptionConfig(_Section):
    """Voice notes and audio to text: an OpenAI-compatible ``POST /audio/transcriptions``."""

    model: str | None = None  # e.g. whisper-1; None: voice notes get one line naming this key
    base_url: OptionalHttpUrl = None  # None: llm.base_url (and its OPENAI_API_KEY)
    timeout: float = Field(default=60.0, gt=0)


class MediaConfig(_Section):
    """What people send from their phones: voice notes, audio, pictures."""

    max_bytes: int = Field(default=20 * 1024 * 1024, ge=1024)  # one file, downloaded
    max_seconds: float = Field(default=600.0, gt=0)  # a longer voice note or audio is refused
    max_image_side: int = Field(default=1568, ge=64)  # a picture is scaled down to fit
    download_timeout: float = Field(default=30.0, gt=0)
    transcription: TranscriptionConfig = TranscriptionConfig()


class LocaleConfig(_Section):
    """The bot's own lines and dates for a person who chose nothing and whose platform gave
    no hint: a shipped language (en, zh, es) and an IANA time zone (or "UTC+8")."""

    language: str = "en"
    timezone: str = "UTC"

    @field_validator("language")
    @classmethod
    def _shipped_language(cls, value: str) -> str:
        language = negotiate(value)
        if language is None:
            raise ValueError(f"{value!r} is not a shipped language ({', '.join(LANGUAGES)})")
        return language

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        if parse_zone(value) is None:
            raise ValueError(f"{value!r} is not a time zone (e.g. Asia/Shanghai, UTC+8)")
        return value


class HealthConfig(_Section):
    """The HTTP endpoint for supervisors: /healthz and /metrics (on in the image)."""

    enabled: bool = False  # MNEMO_HEALTH_ENABLED; the image sets it
    listen: str = "127.0.0.1"  # MNEMO_HEALTH_LISTEN; the image listens on 0.0.0.0
    port: int = Field(default=8080, ge=0, le=65535)  # 0: any free port (tests)


class ReplicasConfig(_Section):
    """Several `mnemo run` on one PostgreSQL (`storage.url`): which one this is. Discord
    shard i runs on replica i % count (unless `discord.shard_ids`), and replica 0 alone
    syncs the slash commands."""

    index: int = Field(default=0, ge=0)  # MNEMO_REPLICA_INDEX
    count: int = Field(default=1, ge=1)  # MNEMO_REPLICA_COUNT

    @model_validator(mode="after")
    def _index_below_count(self) -> ReplicasConfig:
        if self.index >= self.count:
            raise ValueError(f"index {self.index} is not below count {self.count}")
        return self


class Config(_Section):
    """The whole validated configuration, frozen."""

    home: Path = Path("data")
    persona_file: Path | None = None  # replaces the default identity text of the prompt
    llm: LLMConfig = LLMConfig()
    auxiliary: AuxiliaryConfig = AuxiliaryConfig()
    memory: MemoryConfig = MemoryConfig()
    storage: StorageConfig = StorageConfig()
    skills: SkillsConfig = SkillsConfig()
    sessions: SessionsConfig = SessionsConfig()
    providers: ProvidersConfig = ProvidersConfig()
    telegram: TelegramConfig = TelegramConfig()
    discord: DiscordConfig = DiscordConfig()
    health: HealthConfig = HealthConfig()
    replicas: ReplicasConfig = ReplicasConfig()
    locale: LocaleConfig = LocaleConfig()
    media: MediaConfig = MediaConfig()
    logging: LoggingConfig = LoggingConfig()
    admins: tuple[str, ...] = ()
    shutdown_grace: float = Field(default=20.0, gt=0)  # seconds in-flight turns get at a stop
    clock_start: AwareDatetime | None = None
    """MNEMO_CLOCK_START: the bot's clock starts at this moment and runs on from it (for
    reproducing what a date does, as the tests do); None: the system clock."""

    @field_validator("admins", mode="before")
    @classmethod
    def _admins_are_platform_ids(cls, value: Any) -> Any:
        value = _ids_as_strings(value)
        if not isinstance(value, tuple):
            return value  # not a list: the type check says so
        return tuple(_admin(str(item)) for item in value)

    @model_validator(mode="after")
    def _replicas_share_a_database(self) -> Config:
        replicas = self.replicas
        if replicas.count > 1 and not self.storage.postgres:
            raise ValueError(
                "replicas.count is above 1: set storage.url (MNEMO_DATABASE_URL) too; on "
                "SQLite one mnemo runs per data directory"
            )
        shards = self.discord.shard_count
        if not self.discord.shard_ids and shards is not None and shards < replicas.count:
            raise ValueError(
                f"discord.shard_count ({shards}) is below replicas.count ({replicas.count}): "
                "a replica would have no shard"
            )
        return self

    @property
    def aux_model(self) -> str:
        return self.auxiliary.model or self.llm.model

    @property
    def aux_base_url(self) -> str:
        return self.auxiliary.base_url or self.llm.base_url


_SECRET_KEYS = {
    ("llm", "api_key"): "OPENAI_API_KEY",
    ("telegram", "token"): "TELEGRAM_BOT_TOKEN",
    ("discord", "token"): "DISCORD_BOT_TOKEN",
    ("telegram", "webhook_secret"): "TELEGRAM_WEBHOOK_SECRET",
}

# URL keys and where the credential a URL might carry belongs instead.
_URL_KEYS = {
    ("llm", "base_url"): "OPENAI_API_KEY (or give the whole URL in OPENAI_BASE_URL)",
    ("auxiliary", "base_url"): "OPENAI_API_KEY",
    ("telegram", "base_url"): "TELEGRAM_BOT_TOKEN",
    ("telegram", "base_file_url"): "TELEGRAM_BOT_TOKEN",
    ("discord", "api_base"): "DISCORD_BOT_TOKEN",
    ("discord", "gateway_url"): "DISCORD_BOT_TOKEN",
}


def _ids_as_strings(value: Any) -> Any:
    if value is None:
        return ()
    if isinstance(value, list | tuple):
        return tuple(str(v) for v in value)
    return value


# Telegram's and Discord's user ids are integers; an id with a stray space or a
# name in its place would match nobody, silently, so it is refused at load.
_PLAIN_ID = re.compile(r"[0-9]{1,20}")
ADMIN_PLATFORMS = ("telegram", "discord")


def _allowed_ids(value: Any) -> Any:
    """An allow-list as strings, each a user id (surrounding spaces dropped) or "*"."""
    value = _ids_as_strings(value)
    if not isinstance(value, tuple):
        return value  # not a list: the type check says so
    ids = tuple(item.strip() for item in value)
    for item, given in zip(ids, value, strict=True):
        if item != "*" and not _PLAIN_ID.fullmatch(item):
            raise ValueError(f'{given!r} is not a user id (a number), nor "*" for everyone')
    return ids


def _admin(item: str) -> str:
    """One admin as ``platform:user_id`` (spaces dropped), refusing a wildcard or a bad id."""
    platform, sep, user_id = (part.strip() for part in item.partition(":"))
    if not sep or not platform or not user_id:
        raise ValueError(f"{item!r} is not of the form platform:user_id")
    if "*" in user_id:
        raise ValueError(f"{item!r}: admins are named one by one; a wildcard is not allowed")
    if platform not in ADMIN_PLATFORMS:
        raise ValueError(f"{item!r}: the platform must be one of {', '.join(ADMIN_PLATFORMS)}")
    if not _PLAIN_ID.fullmatch(user_id):
        raise ValueError(f"{item!r}: {user_id!r} is not a user id (a number)")
    return f"{platform}:{user_id}"


def load_config(path: Path | None = None, environ: Mapping[str, str] | None = None) -> Config:
    """Read, merge and validate the configuration.

    `path` None means ``./mnemo.yaml`` if present, else defaults only. `environ`
    defaults to `os.environ`; tests pass their own mapping.
    """
    env = os.environ if environ is None else environ
    file = path if path is not None or not DEFAULT_CONFIG_FILE.exists() else DEFAULT_CONFIG_FILE
    raw = read_yaml(file, DEFAULT_CONFIG_FILE)
    _refuse_secrets(raw)
    skills = raw.get("skills")
    named = (isinstance(skills, dict) and "dir" in skills) or bool(env.get("MNEMO_SKILLS_DIR"))
    if file is not None:
        _anchor_paths(raw, Config, Path(os.path.abspath(file)).parent)
    _apply_env(raw, env)
    try:
        config = Config.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError(_describe(exc)) from None
    config.skills._named = named
    return config


def _anchor_paths(raw: dict[str, Any], model: type[BaseModel], base: Path) -> None:
    """Make every path key of `model` in `raw` relative to `base`, the config file's folder.

    A relative path in a file means the same wherever `mnemo` is started from, and so do
    the defaults (``data``, ``skills``) once there is a file: they sit beside it. ``~``
    is the operator's home. Environment overrides are applied afterwards and stay
    relative to the current directory, as a shell user expects.
    """
    for name, field in model.model_fields.items():
        kind = field.annotation
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            current = raw.get(name)
            section = {} if current is None else current
            if isinstance(section, dict):  # anything else: validation names the key
                _anchor_paths(section, kind, base)
                if section:
                    raw[name] = section
        elif kind is Path or Path in get_args(kind):
            value = raw.get(name)
            if isinstance(value, str):
                raw[name] = os.path.normpath(base / Path(value).expanduser())
            elif name not in raw and isinstance(field.default, Path):
                raw[name] = os.path.normpath(base / field.default)


def _refuse_secrets(raw: dict[str, Any]) -> None:
    """Secrets belong in the environment: refuse one written into the file."""
    for (section, key), var in _SECRET_KEYS.items():
        values = raw.get(section)
        if isinstance(values, dict) and key in values:
            raise ConfigError(
                f"config error: {section}.{key}: secrets are not read from the file; "
                f"set {var} instead"
            )
    storage = raw.get("storage")
    url = storage.get("url") if isinstance(storage, dict) else None
    if isinstance(url, str) and PASSWORD_IN_URL.search(url):
        raise ConfigError(
            "config error: storage.url: a password in the URL is not read from the file; "
            "set MNEMO_DATABASE_URL (or PGPASSWORD, or a ~/.pgpass file) instead"
        )
    for (section, key), var in _URL_KEYS.items():
        values = raw.get(section)
        value = values.get(key) if isinstance(values, dict) else None
        if isinstance(value, str) and USERINFO.search(value):
            raise ConfigError(
                f"config error: {section}.{key}: credentials in a URL (user:password@) "
                f"are not read from the file; set {var} instead"
            )


def _apply_env(raw: dict[str, Any], env: Mapping[str, str]) -> None:
    def section(name: str) -> dict[str, Any]:
        current = raw.get(name)
        if current is None:
            current = raw[name] = {}
        if not isinstance(current, dict):
            raise ConfigError(f"{name}: must be a mapping")
        return current

    if env.get("MNEMO_HOME"):
        raw["home"] = env["MNEMO_HOME"]
    if env.get("MNEMO_CLOCK_START"):
        raw["clock_start"] = env["MNEMO_CLOCK_START"]
    if env.get("OPENAI_BASE_URL"):
        section("llm")["base_url"] = env["OPENAI_BASE_URL"]
    if env.get("MNEMO_DATABASE_URL"):
        section("storage")["url"] = env["MNEMO_DATABASE_URL"]
    if env.get("MNEMO_SKILLS_DIR"):
        section("skills")["dir"] = env["MNEMO_SKILLS_DIR"]
    if env.get("MNEMO_HEALTH_ENABLED"):
        section("health")["enabled"] = env["MNEMO_HEALTH_ENABLED"]
    if env.get("MNEMO_HEALTH_LISTEN"):
        section("health")["listen"] = env["MNEMO_HEALTH_LISTEN"]
    if env.get("TELEGRAM_WEBHOOK_URL"):
        telegram = section("telegram")
        webhook = telegram.setdefault("webhook", {})
        if isinstance(webhook, dict):  # anything else: validation names the key
            webhook["url"] = env["TELEGRAM_WEBHOOK_URL"]
    if env.get("MNEMO_REPLICA_INDEX"):
        section("replicas")["index"] = env["MNEMO_REPLICA_INDEX"]
    if env.get("MNEMO_REPLICA_COUNT"):
        section("replicas")["count"] = env["MNEMO_REPLICA_COUNT"]
    for (name, key), var in _SECRET_KEYS.items():
        if env.get(var):
            section(name)[key] = env[var]


def _describe(exc: ValidationError) -> str:
    """One line per bad key: the key, its problem and, when short, the value given.

    A long or structured value is not repeated (it may be huge, or a secret in
    the wrong place), and URL credentials are masked.
    """
    return "\n".join(_problem(err) for err in exc.errors())


def _problem(err: Any) -> str:
    key = capped(".".join(str(p) for p in err["loc"])) or "(top level)"
    msg = capped(err["msg"], 160)
    if err["type"] == "extra_forbidden":
        msg = "unknown key"
    elif "input" in err and err["type"] != "missing":
        shown = _shown_value(err["input"])
        if shown is not None:
            msg = f"{msg} (got {shown})"
    return redact_url_credentials(f"config error: {key}: {msg}")


def _shown_value(value: object) -> str | None:
    """The repr of a short scalar, else None."""
    if isinstance(value, str) and len(value) <= SHOWN_CHARS:
        return repr(value)
    if isinstance(value, bool | float) or (isinstance(value, int) and value.bit_length() < 64):
        return repr(value)
    return None


def storage_settings(config: Config) -> StorageSettings:
    """Where `config` keeps the state: SQLite and files under home, or `storage.url`."""
    from memory_core import StorageSettings  # here: reading a config loads no store

    return StorageSettings(
        home=config.home,
        skills_dir=config.skills.dir,
        url=config.storage.url,
        memory_char_limit=config.memory.memory_char_limit,
        user_char_limit=config.memory.user_char_limit,
        pool_size=config.storage.pool_size,
    )
