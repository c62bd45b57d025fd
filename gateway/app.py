"""The composition root: everything long-lived of a bot, built from its configuration.

`open_services` opens the stores and the model clients; `build_conversations`
wires what serves messages on top of them (the open sessions, the turns with
their media reader, the commands with their pending choices and erasures, the
access policy);
`platform_adapters` builds the adapters of the enabled platforms; `open_bot`
puts the three together with the background work. Everything is handed down
through constructors; nothing below reads the configuration or the
environment. `gateway.service` runs what this builds.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import AsyncIterator, Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TextIO

from prometheus_client import CollectorRegistry

from gateway.access import AccessPolicy
from gateway.adapters.console_adapter import ConsoleAdapter
from gateway.adapters.discord_shards import DiscordShards
from gateway.agent.compression import Compressor
from gateway.agent.limits import ModelCallLimiter
from gateway.agent.model_client import ModelClient
from gateway.agent.toolbox import ToolBox
from gateway.agent.turn_input import MediaReading
from gateway.commands import CommandResources, SessionControl, builtin_commands
from gateway.commands.choices import PendingChoices
from gateway.commands.erase import CONSOLE_HISTORY_FOLDER, PendingErasures, person_data
from gateway.commands.memory_pending import PendingReview, StagedNotices
from gateway.commands.router import CommandRouter
from gateway.config import Config, DiscordConfig, storage_settings
from gateway.conversation import Conversations
from gateway.errors import ConfigError, MediaDownloadError
from gateway.i18n import DEFAULT_LANGUAGE, N_, Catalogs
from gateway.jobs import BackgroundSettings, BackgroundWork, JobContext
from gateway.jobs.context import Announcer
from gateway.media import MediaReader
from gateway.media.reader import Fetch
from gateway.messages import Adapter, InboundMessage, MediaRef, Notifier, ReplySink
from gateway.metrics import Metrics
from gateway.open_sessions import ManagerFactory, OpenSessions, PromptMaker, SessionCache
from gateway.pairing import ACCESS_FILE, AccessList
from gateway.person_locale import PersonLocales, wall_clock
from gateway.replica_locks import ReplicaLocks
from gateway.replicas import Replicas
from gateway.session_queue import SessionQueue
from gateway.shared_state import Documents
from gateway.turns import Turns
from gateway.withdrawal import Withdrawal
from memory_core import (
    MEMORY_TOOL_SCHEMA,
    SKILL_TOOL_SCHEMAS,
    MemoryBackend,
    MemoryManager,
    PendingChanges,
    PersonSettingsStore,
    ProviderError,
    ProviderResources,
    SessionBackend,
    SessionLocks,
    SkillsStore,
    Storage,
    default_registry,
    make_user_key,
    open_storage,
)
from memory_core.sessions import JobQueue

log = logging.getLogger(__name__)


MAX_PERSONA_BYTES = 16 * 1024
NO_FILE_LINE = N_("I could not get that file.")  # no adapter of the platform to fetch it


@dataclass(frozen=True)
class Services:
    """The stores and clients one running bot shares across its sessions."""

    config: Config
    model: ModelClient
    auxiliary: ModelClient  # non-streamed background calls: recaps, compression, review
    memory: MemoryBackend
    skills: SkillsStore
    sessions: SessionBackend
    new_manager: ManagerFactory
    locales: PersonLocales
    """Each person's language, time zone and notice mode, and the bot's clock."""
    locks: SessionLocks
    """One turn at a time per session (`Storage.locks`: every replica's on PostgreSQL)."""
    jobs: JobQueue
    """Where background jobs are claimed (`Storage.jobs`)."""
    access: AccessList
    """The people let in without a restart (`Storage.document(ACCESS_FILE)`: every
    replica's on PostgreSQL)."""
    persona: str | None = None  # the operator's persona text (`persona_file`)
    transcriber: ModelClient | None = None
    """Voice notes to text (``media.transcription``); None: the model is unset."""
    documents: Documents | None = None
    """The documents every replica shares (`Storage.document` of shared storage), where
    pending choices and erasures are kept; None: in this process (SQLite)."""


@dataclass(frozen=True)
class Bot:
    """One bot as `mnemo run` serves it: its services, adapters, background work and
    conversations (the open sessions are `conversations.sessions`)."""

    services: Services
    adapters: tuple[Adapter, ...]
    background: BackgroundWork
    conversations: Conversations
    metrics: Metrics


@contextlib.asynccontextmanager
async def open_bot(
    config: Config, adapters: Sequence[Adapter], registry: CollectorRegistry | None = None
) -> AsyncIterator[Bot]:
    """Open the services and build the bot serving `adapters`; close them on the way out.
    Its metrics go to `registry` (by default one of its own, never the global one)."""
    metrics = Metrics(registry if registry is not None else CollectorRegistry())
    async with open_services(config, metrics) as services:
        choices = PendingChoices.over(services.documents)  # by commands and approval notices
        announce = staged_notices(services, adapters, choices).announce
        context = job_context(
            services, adapter_notifier(adapters), announce, on_refused=metrics.record_dropped
        )
        background = BackgroundWork(context, services.jobs)
        conversations = build_conversations(
            services,
            AccessPolicy.from_config(config, services.access),
            background=background,
            choices=choices,
            metrics=metrics,
            media_fetch=adapter_fetch(adapters),
        )
        yield Bot(services, tuple(adapters), background, conversations, metrics)


def build_conversations(
    services: Services,
    access: AccessPolicy,
    background: BackgroundWork | None = None,
    erasures: PendingErasures | None = None,
    choices: PendingChoices | None = None,
    metrics: Metrics | None = None,
    media_fetch: Fetch | None = None,
    media: MediaReading | None = None,
) -> Conversations:
    """Everything that serves messages, on top of `services`, in one call.

    `background`: reviews and extractions (None: the bot never learns on its own);
    `erasures`: the /forget all requests awaiting confirmation (a clock for tests);
    `choices`: the choices offered and not yet picked (shared with the approval notices);
    `metrics`: where each turn is counted (None: nowhere); `media_fetch`: how a message's
    file is downloaded, by platform (None: it cannot be, and the person is told);
    `media`: what reads voice notes and pictures (None: a `MediaReader` over `services`
    and `media_fetch`).
    """
    config, store = services.config, services.sessions
    if media is None:
        media = media_reader(services, media_fetch if media_fetch is not None else no_fetch)
    prompts = PromptMaker(
        services.memory, services.skills, config.memory.profile_in_groups, services.persona
    )
    cache = SessionCache(config.sessions.max_open)
    shared = services.locks.shared  # replicas on one PostgreSQL: each queue in order
    replica_locks = ReplicaLocks(services.locks, store, cache) if shared else None
    sessions = OpenSessions(store, services.new_manager, prompts, cache, background, replica_locks)
    compressor = Compressor(services.sessions, services.auxiliary, config.llm.context_chars)
    tools = ToolBox(
        services.memory,
        services.skills,
        services.sessions,
        services.auxiliary,
        config.auxiliary.recap_timeout,
        access.is_admin,
        approve_all=config.memory.write_approval == "all",
        staging=background.turn_staging if background is not None else None,
        stage_ungrounded=config.memory.write_approval != "off",
        on_refused=metrics.record_dropped if metrics is not None else None,
    )
    queue = SessionQueue(services.sessions)  # messages waiting for a busy session
    turns = Turns(
        services.model,
        services.sessions,
        sessions,
        tools,
        compressor,
        config.llm.max_tool_steps,
        queue,
        on_turn=metrics.record_turn if metrics is not None else None,
        media=media,
    )
    if choices is None:
        choices = PendingChoices.over(services.documents)  # offered by commands, until picked
    if erasures is None:
        erasures = PendingErasures.over(services.documents)
    registry = builtin_commands(
        command_resources(services, sessions), choices, erasures, access.granted
    )
    commands = CommandRouter(registry, choices, access.is_admin, services.locales, store)
    replicas = Replicas(queue, store, services.locks) if shared else None
    return Conversations(
        access,
        sessions,
        turns,
        commands,
        queue,
        services.locales,
        background=background,
        replicas=replicas,
        withdrawal=Withdrawal(services.sessions, services.memory, sessions),
    )


def media_reader(services: Services, fetch: Fetch) -> MediaReader:
    """The reader of voice notes and pictures: files through `fetch`, sound through the
    transcription client (when ``media.transcription.model`` is set), descriptions of
    pictures by the auxiliary model."""
    config = services.config
    return MediaReader(
        config.media,
        vision=config.llm.vision,
        fetch=fetch,
        transcriber=services.transcriber,
        describer=services.auxiliary,
    )


def adapter_fetch(adapters: Sequence[Adapter]) -> Fetch:
    """A message's file, downloaded by the adapter of its platform."""

    async def fetch(platform: str, media: MediaRef, max_bytes: int) -> bytes:
        for adapter in adapters:
            if adapter.platform == platform:
                return await adapter.fetch_media(media, max_bytes)
        return await no_fetch(platform, media, max_bytes)

    return fetch


async def no_fetch(platform: str, media: MediaRef, max_bytes: int) -> bytes:
    """No adapter of `platform` is running: its files cannot be downloaded."""
    raise MediaDownloadError(NO_FILE_LINE, f"no {platform} adapter to fetch {media.kind}")


def command_resources(services: Services, sessions: SessionControl) -> CommandResources:
    """What the built-in commands work on, over `services`, ending and dropping `sessions`."""
    return CommandResources(
        memory=services.memory,
        skills=services.skills,
        sessions=services.sessions,
        recapper=services.auxiliary,
        recall_timeout=services.config.auxiliary.recap_timeout,
        model_name=services.model.model,
        person=person_data(
            services.memory,
            services.skills,
            services.sessions,
            services.new_manager,
            services.config.home,
        ),
        open_sessions=sessions,
        locales=services.locales,
        notifications=services.config.memory.notifications,
    )


def platform_adapters(config: Config) -> tuple[list[Adapter], dict[str, str]]:
    """The adapters of the enabled platforms (both at once when both are on; each platform
    library is imported only when its adapter is), and how each serves (the start line)."""
    adapters: list[Adapter] = []
    modes: dict[str, str] = {}
    timeout = config.media.download_timeout  # of one file a person sent
    if config.telegram.active:
        from gateway.adapters.telegram_adapter import TelegramAdapter  # loads telegram

        # the bot's calls a second (Telegram allows 30) are shared: each replica takes its share
        rate = config.telegram.calls_per_second / config.replicas.count
        adapters.append(
            TelegramAdapter(config.telegram, download_timeout=timeout, overall_max_rate=rate)
        )
        hook = config.telegram.webhook
        modes["telegram"] = (
            "polling" if hook.url is None else f"webhook on {hook.listen}:{hook.port}"
        )
    if config.discord.active:
        from gateway.adapters.discord_adapter import DiscordAdapter  # loads discord

        language = config.locale.language
        discord = DiscordAdapter(
            config.discord, language=language, download_timeout=timeout, replicas=config.replicas
        )
        adapters.append(discord)
        modes["discord"] = _discord_mode(config.discord, discord.shards)
    return adapters, modes


def console_adapter(
    stdin: TextIO,
    stdout: TextIO,
    user_id: str | None = None,
    home: Path | None = None,
    language: str = DEFAULT_LANGUAGE,
) -> Adapter:
    """The console: a person at this terminal (`user_id`, by default the login name); on a
    terminal, with a history of what they typed in ``<home>/console/`` (0600); its own
    lines in `language` (the config's ``locale.language``)."""
    history = None if home is None else partial(console_history_file, home)
    lines = Catalogs().translator(language)
    return ConsoleAdapter(stdin, stdout, user_id=user_id, history=history, lines=lines)


def console_history_file(home: Path, user_id: str) -> Path:
    """Where what console person `user_id` types is kept: ``<home>/console/<user key>.history``,
    named by their user key so that erasing them removes it (`person_data`)."""
    key = make_user_key("console", user_id or "operator")
    return home / CONSOLE_HISTORY_FOLDER / f"{key}.history"


def adapter_notifier(adapters: Sequence[Adapter]) -> Notifier:
    """A background job's line to a chat, through the adapter of its platform."""

    async def notify(message: InboundMessage, text: str) -> None:
        for adapter in adapters:
            if adapter.platform == message.platform:
                await adapter.notify(message, text)
                return
        log.warning("no %s adapter is running: a background notice was dropped", message.platform)

    return notify


def staged_notices(
    services: Services, adapters: Sequence[Adapter], choices: PendingChoices
) -> StagedNotices:
    """Announces changes staged for a person's approval in their private chat, through the
    adapter of its platform, with buttons offered through `choices`."""

    def sink_for(message: InboundMessage) -> ReplySink | None:
        for adapter in adapters:
            if adapter.platform == message.platform:
                return adapter.reply_sink(message)
        return None

    review = PendingReview(PendingChanges(services.memory), choices)
    return StagedNotices(review, services.sessions, sink_for, time.time, services.locales.of_person)


def job_context(
    services: Services,
    notify: Notifier,
    announce: Announcer | None = None,
    on_refused: Callable[[str, str], None] | None = None,
) -> JobContext:
    """What background jobs work with: the stores, the auxiliary model, the settings;
    `announce` tells a person of changes staged for their approval; `on_refused` counts
    the entries dropped as not grounded."""
    return JobContext(
        sessions=services.sessions,
        memory=services.memory,
        skills=services.skills,
        model=services.auxiliary,
        context_chars=services.config.llm.context_chars,
        settings=BackgroundSettings.from_config(services.config),
        notify=notify,
        locales=services.locales,
        announce=announce,
        on_refused=on_refused,
    )


@contextlib.asynccontextmanager
async def open_services(config: Config, metrics: Metrics | None = None) -> AsyncIterator[Services]:
    """Open the stores and the model clients for `config`; close them on the way out.
    `metrics`: where the model clients count their requests (None: nowhere)."""
    persona = read_persona(config.persona_file)
    config.home.mkdir(parents=True, exist_ok=True)  # the lock, logs and exports stay here
    async with (
        open_storage(storage_settings(config)) as storage,
        _services(config, storage, persona, metrics) as services,
    ):
        yield services


@contextlib.asynccontextmanager
async def _services(
    config: Config, storage: Storage, persona: str | None, metrics: Metrics | None
) -> AsyncIterator[Services]:
    """The model clients and the rest of `Services` around the open `storage`."""
    sessions, memory = storage.sessions, storage.memory
    limiter = ModelCallLimiter(config.llm.max_concurrency)  # one for every model call
    model = ModelClient(
        base_url=config.llm.base_url,
        api_key=config.llm.api_key,
        model=config.llm.model,
        timeout=config.llm.timeout,
        stall_timeout=config.llm.stall_timeout,
        limiter=limiter,
        on_call=metrics.model_call_recorder("main") if metrics is not None else None,
    )
    auxiliary = ModelClient(  # recaps, compression, review, extraction; unset keys follow llm
        base_url=config.aux_base_url,
        api_key=config.llm.api_key,
        model=config.aux_model,
        timeout=config.auxiliary.timeout or config.llm.timeout,
        stall_timeout=config.llm.stall_timeout,
        limiter=limiter,
        background=True,  # replies go first
        on_call=metrics.model_call_recorder("auxiliary") if metrics is not None else None,
    )
    transcriber = transcription_client(config, limiter, metrics)
    locales = PersonLocales(
        Catalogs(),
        PersonSettingsStore(memory),
        language=config.locale.language,
        timezone=config.locale.timezone,
        clock=wall_clock(config.clock_start),
    )
    try:
        yield Services(
            config=config,
            model=model,
            auxiliary=auxiliary,
            memory=memory,
            skills=storage.skills,
            sessions=sessions,
            new_manager=_manager_factory(config, sessions),
            locales=locales,
            persona=persona,
            transcriber=transcriber,
            locks=storage.locks,
            jobs=storage.jobs,
            access=AccessList(storage.document(ACCESS_FILE)),
            documents=storage.document if storage.locks.shared else None,
        )
    finally:
        if transcriber is not None:
            await transcriber.close()
        await auxiliary.close()
        await model.close()


def transcription_client(
    config: Config, limiter: ModelCallLimiter, metrics: Metrics | None
) -> ModelClient | None:
    """The client of ``media.transcription`` (its base URL or `llm`'s, with OPENAI_API_KEY,
    and its own timeout), or None when no transcription model is set."""
    settings = config.media.transcription
    if settings.model is None:
        return None
    return ModelClient(
        base_url=settings.base_url or config.llm.base_url,
        api_key=config.llm.api_key,
        model=settings.model,
        timeout=settings.timeout,
        stall_timeout=min(config.llm.stall_timeout, settings.timeout),
        limiter=limiter,  # a person waits for it: it goes with the replies
        on_call=metrics.model_call_recorder("transcription") if metrics is not None else None,
    )


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


def _manager_factory(config: Config, sessions: SessionBackend) -> ManagerFactory:
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
            fence=sessions.fence,
        )

    return new_manager


def _discord_mode(config: DiscordConfig, shards: DiscordShards) -> str:
    """How the start line describes Discord: where the slash commands go, and the shards."""
    servers = len(config.guild_ids)
    where = f"in {servers} server{'s' if servers > 1 else ''}" if servers else "global"
    mode = f"gateway, slash commands {where if shards.sync_commands else 'synced elsewhere'}"
    if shards.count is None:
        return mode
    ids = shards.ids if shards.ids is not None else tuple(range(shards.count))
    return f"{mode}, shards {', '.join(map(str, ids))} of {shards.count}"
