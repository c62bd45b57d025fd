"""Starting the bot: `mnemo run` and `mnemo chat`.

The application builds every long-lived object from the validated configuration
(stores, model client, provider registry) and hands them down through
constructors; nothing below reads the configuration or the environment.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator
from pathlib import Path
from typing import TextIO

from gateway.agent.limits import ModelCallLimiter
from gateway.agent.model_client import ModelClient
from gateway.config import Config
from gateway.conversation import ManagerFactory, Services
from gateway.errors import ConfigError
from gateway.jobs import BackgroundSettings, JobContext
from gateway.messages import Notifier
from memory_core import (
    MEMORY_TOOL_SCHEMA,
    SKILL_TOOL_SCHEMAS,
    FileMemoryStore,
    MemoryManager,
    ProviderError,
    ProviderResources,
    SessionStore,
    SkillsStore,
    default_registry,
)

log = logging.getLogger(__name__)

MAX_PERSONA_BYTES = 16 * 1024


def run_bot(config: Config) -> None:
    """`mnemo run`: every enabled adapter (the console when no platform is on), as a service
    (`gateway.service`)."""
    from gateway.service import run_bot as run_service  # the service builds on this module

    run_service(config)


def run_console(
    config: Config,
    stdin: TextIO | None = None,
    stdout: TextIO | None = None,
    user_id: str | None = None,
) -> None:
    """`mnemo chat`: talk to the bot in the terminal (or through the given streams).

    `user_id` names the person at the console; by default the login name.
    """
    from gateway.service import run_console as run_chat  # the service builds on this module

    run_chat(config, stdin, stdout, user_id)


def job_context(services: Services, notify: Notifier) -> JobContext:
    """What background jobs work with: the stores, the auxiliary model, the settings."""
    return JobContext(
        sessions=services.sessions,
        memory=services.memory,
        skills=services.skills,
        model=services.auxiliary,
        context_chars=services.config.llm.context_chars,
        settings=BackgroundSettings.from_config(services.config),
        notify=notify,
    )


@contextlib.asynccontextmanager
async def open_services(config: Config) -> AsyncIterator[Services]:
    """Open the stores and the model clients for `config`; close them on the way out."""
    persona = read_persona(config.persona_file)
    config.home.mkdir(parents=True, exist_ok=True)
    sessions = SessionStore(config.home / "state.db")
    await sessions.open()
    limiter = ModelCallLimiter(config.llm.max_concurrency)  # one for every model call
    model = ModelClient(
        base_url=config.llm.base_url,
        api_key=config.llm.api_key,
        model=config.llm.model,
        timeout=config.llm.timeout,
        stall_timeout=config.llm.stall_timeout,
        limiter=limiter,
    )
    auxiliary = ModelClient(  # recaps, compression, review, extraction; unset keys follow llm
        base_url=config.aux_base_url,
        api_key=config.llm.api_key,
        model=config.aux_model,
        timeout=config.auxiliary.timeout or config.llm.timeout,
        stall_timeout=config.llm.stall_timeout,
        limiter=limiter,
        background=True,  # replies go first
    )
    try:
        yield Services(
            config=config,
            model=model,
            auxiliary=auxiliary,
            memory=FileMemoryStore(
                config.home,
                memory_char_limit=config.memory.memory_char_limit,
                user_char_limit=config.memory.user_char_limit,
            ),
            skills=SkillsStore(
                config.skills.dir,
                config.home / "skills-manifest.json",
                private_dir=config.home / "skills-private",
                archive_dir=config.home / "skills-archive",
            ),
            sessions=sessions,
            new_manager=_manager_factory(config, sessions),
            persona=persona,
        )
    finally:
        await auxiliary.close()
        await model.close()
        await sessions.close()


def read_persona(path: Path | None) -> str | None:
    """The persona file's text (None when unset); a bad file is one `ConfigError` line."""
    if path is None:
        return None
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_PERSONA_BYTES + 1)
    except OSError as exc:
        raise ConfigError(
            f"config error: persona_file: cannot read {path}: {exc.strerror or exc}"
        ) from None
    if len(data) > MAX_PERSONA_BYTES:
        raise ConfigError(
            f"config error: persona_file: {path} is larger than {MAX_PERSONA_BYTES // 1024} KiB"
        )
    try:
        text = data.decode("utf-8").strip()
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"config error: persona_file: {path} is not UTF-8 (invalid byte at offset {exc.start})"
        ) from None
    if not text:
        raise ConfigError(f"config error: persona_file: {path} is empty")
    return text


def _manager_factory(config: Config, sessions: SessionStore) -> ManagerFactory:
    """Build each session's provider manager; a bad provider name fails at start-up."""
    registry = default_registry()
    registry.load_entry_points()
    resources = ProviderResources(home=config.home, sessions=sessions)
    builtins = ["history"] if config.providers.history_recall else []
    core_tools = {MEMORY_TOOL_SCHEMA["function"]["name"]} | {
        s["function"]["name"] for s in SKILL_TOOL_SCHEMAS
    }
    external_name = config.providers.external
    if external_name is not None and external_name not in registry.names():
        known = ", ".join(registry.names())
        raise ProviderError(
            f"providers.external: unknown memory provider {external_name!r} (known: {known})"
        )

    def new_manager() -> MemoryManager:
        made, external = registry.create_selected(
            resources, builtins=builtins, external=external_name
        )
        return MemoryManager(
            made,
            external=external,
            core_tool_names=core_tools,
            prefetch_timeout=config.providers.prefetch_timeout,
        )

    return new_manager
