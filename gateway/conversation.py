"""The application service between adapters and the agent.

`Conversations.handle` takes an `InboundMessage` and routes it: a registered
command runs and answers (never reaching the model or the transcript);
anything else is a turn of the message's session. For a turn it finds or
starts the session, keeps that session's system prompt frozen (memory
snapshot and skills index rendered once, at session start, and stored with
the session), writes the user's message before the model is asked (so nothing
is lost on an error), runs one agent turn with the person's tools, and stores
what the turn produced, with the review counters it moved. One turn at a time
per session.

Sessions outlive the process: closing leaves them open in state.db, and a
session that is not cached (after a restart, or dropped from the bounded
`SessionCache`) resumes from the store with its stored prompt and history,
replayed exactly as they were sent, so the request prefix stays the same.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from gateway.access import AccessPolicy
from gateway.agent.compression import Compressor, clip_text, fixed_chars
from gateway.agent.model_client import ModelClient
from gateway.agent.prompt import build_system_prompt
from gateway.agent.review_counters import counter_update
from gateway.agent.sent_history import SentHistory, stored_form
from gateway.agent.session_search import SessionSearch
from gateway.agent.tools import Tool, build_tools, provider_tools
from gateway.agent.transcript import as_stored
from gateway.agent.turn import (
    MESSAGE_TOO_LONG_NOTE,
    TOO_LONG_NOTE,
    Agent,
    fault_notice,
)
from gateway.commands import CommandResources, builtin_commands, parse_command
from gateway.commands.choices import PendingChoices
from gateway.commands.erase import PendingErasures, person_data
from gateway.commands.router import CommandRouter
from gateway.config import Config
from gateway.errors import ModelError, RequestTooLargeError
from gateway.jobs.background import BackgroundWork
from gateway.messages import CommandSpec, InboundMessage, MessageIdentity, ReplySink
from gateway.session_cache import OpenSession, SessionCache
from memory_core import (
    AppendResult,
    FileMemoryStore,
    MemoryManager,
    NewMessage,
    SessionContext,
    SessionOrigin,
    SessionStore,
    SessionStoreBusyError,
    SkillsStore,
    TranscriptMessage,
    recall_scope,
    split_user_key,
)

log = logging.getLogger(__name__)

UNANSWERED_WITHIN = 24 * 3600.0
UNSUPPORTED_LINE = "I can only read text for now."
EMPTY_LINE = "Yes? Ask me something."  # older unanswered messages are left alone after a restart

ManagerFactory = Callable[[], MemoryManager]


@dataclass(frozen=True)
class Services:
    """The stores and clients one running bot shares across its sessions."""

    config: Config
    model: ModelClient
    auxiliary: ModelClient  # non-streamed background calls: recaps, compression, review
    memory: FileMemoryStore
    skills: SkillsStore
    sessions: SessionStore
    new_manager: ManagerFactory
    persona: str | None = None  # the operator's persona text (`persona_file`)


class Conversations:
    """Routes inbound messages to a command or to their session's next turn."""

    def __init__(
        self,
        services: Services,
        erasures: PendingErasures | None = None,
        background: BackgroundWork | None = None,
        access: AccessPolicy | None = None,
    ) -> None:
        """`erasures`: the /forget all requests awaiting confirmation (injected for tests);
        `background`: reviews and extractions (None: the conversation never learns on its own);
        `access`: who is served and who is an admin (None: everyone, with the configured
        admins, for tests; the application always gives one).
        """
        self._s = services
        self._background = background
        self._access = (
            access if access is not None else AccessPolicy.everyone(services.config.admins)
        )
        self._active = 0  # handle() and choose() calls in progress
        self._idle = asyncio.Event()
        self._idle.set()
        self._compressor = Compressor(
            services.sessions, services.auxiliary, services.config.llm.context_chars
        )
        self._cache = SessionCache(services.config.sessions.max_open)
        self._retiring: set[asyncio.Task[None]] = set()  # evicted sessions shutting down
        choices = PendingChoices()  # choices offered by commands, until picked
        resources = CommandResources(
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
            open_sessions=self,
        )
        self._registry = builtin_commands(resources, choices, erasures)
        self._commands = CommandRouter(self._registry, choices, self._access.is_admin)

    @property
    def command_specs(self) -> list[CommandSpec]:
        """The command menu the platforms show: every command but the admins' own."""
        return [c.spec for c in self._registry if not c.admin_only]

    @property
    def open_count(self) -> int:
        """How many sessions are held in memory now (at most `sessions.max_open` when idle)."""
        return self._cache.open_count

    @property
    def lock_count(self) -> int:
        """How many routing keys have a lock now (only those in use or waited for)."""
        return self._cache.lock_count

    async def handle(
        self, message: InboundMessage, sink: ReplySink, on_stored: Callable[[], None] | None = None
    ) -> None:
        """Answer one message; errors become a short apology, never a crash.

        `on_stored` is called once the message can no longer be lost: when it is
        in state.db (a turn), or when nothing of it needs keeping (a command, a
        refusal), or at the latest when handling ends. An adapter confirms the
        platform's update then. The same message delivered again (same
        `message_id`) is stored once and answered once; one stored but never
        answered (the process stopped) is answered.
        """
        stored = _Once(on_stored)
        with self._tracked():
            try:
                if not await self._admitted(message, sink):
                    return
                await self._handle(message, sink, stored)
            finally:
                stored()

    async def _admitted(self, message: InboundMessage, sink: ReplySink) -> bool:
        """The access decision, before anything else; a refusal stores and asks nothing."""
        decision = self._access.decide(message.platform, message.user_id)
        if not decision.allowed:
            log.info("refused %s user %s", message.platform, message.user_id)
            if decision.reply is not None:
                await sink.write(decision.reply)
            await sink.finish()  # an empty reply sends nothing
        return decision.allowed

    async def _handle(self, message: InboundMessage, sink: ReplySink, stored: _Once) -> None:
        key = message.session_key(self._s.config.sessions.group_sessions_per_user)
        if self._background is not None:
            self._background.message_arrived(key)
        replied: int | None = None  # the session of a completed reply
        async with self._cache.locked(key):
            try:
                call = parse_command(message.text)
                if message.unsupported or not message.text.strip():
                    stored()  # nothing to keep
                    await sink.write(UNSUPPORTED_LINE if message.unsupported else EMPTY_LINE)
                elif call is None:
                    replied = await self._turn(key, message, sink, stored)
                else:
                    stored()  # a command is never stored: nothing to lose
                    identity = MessageIdentity.of(message, self._per_user)
                    await self._commands.route(identity, message, call, sink)
            except ModelError as exc:  # upstream detail to the log, a short line to the person
                log.warning("model error in session %s: %s: %s", key, type(exc).__name__, exc)
                await sink.write(fault_notice(exc))
            except SessionStoreBusyError as exc:  # the message is queued and stored later
                log.warning("session store busy in session %s: %s", key, exc)
                await sink.write("(I'm busy right now; please try again in a moment)")
            except Exception:  # the top of a turn: log it, tell the person, keep serving
                log.exception("turn failed in session %s", key)
                await sink.write("(something went wrong on my side; please try again)")
            await sink.finish()
        self._retire(self._cache.trim())  # sessions kept past the bound while in use
        if replied is not None and self._background is not None:  # delivered: now learn
            await self._background.after_reply(key, replied, message)

    async def chat_migrated(self, platform: str, old_chat_id: str, new_chat_id: str) -> None:
        """A group got a new id (Telegram: group to supergroup): its sessions move with it.

        The cached sessions of the old chat are dropped first (their providers stop);
        they resume under the new id, from the store, at the next message.
        """
        prefix = f"{platform}:group:{old_chat_id}"
        for key in self._cache.cached_keys():
            if key == prefix or key.startswith(prefix + ":"):
                session = self._cache.pop(key)
                if session is not None:
                    await session.manager.shutdown()
        moved = await self._s.sessions.migrate_chat(platform, old_chat_id, new_chat_id)
        log.info("%s chat %s moved to %s (%d sessions)", platform, old_chat_id, new_chat_id, moved)

    async def answer_unanswered(
        self,
        platform: str,
        sink_for: Callable[[InboundMessage], ReplySink],
        within: float = UNANSWERED_WITHIN,
    ) -> int:
        """Answer the messages of `platform` stored in the last `within` seconds and never
        answered (the process stopped mid-turn); how many. Run at start-up."""
        pending = await self._s.sessions.unanswered(platform, time.time() - within)
        answered = 0
        for info, stored in pending:
            if stored.platform_message_id is None:
                continue  # no platform id: it cannot be told apart from a new message
            _, user_id = split_user_key(info.user_key)
            message = InboundMessage(
                platform=platform,
                chat_id=info.chat_id,
                chat_type=info.chat_type,
                user_id=user_id,
                text=stored.content,
                message_id=stored.platform_message_id,
                user_name=stored.speaker_name,
                thread_id=info.thread_id,
            )
            if message.session_key(self._s.config.sessions.group_sessions_per_user) != (
                info.session_key
            ):
                continue  # sessions are keyed differently now: leave it
            await self.handle(message, sink_for(message))
            answered += 1
        return answered

    async def drain(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the messages being handled; False if some are not
        done (their person's message is stored: it is answered after the restart)."""
        try:
            await asyncio.wait_for(self._idle.wait(), timeout)
        except TimeoutError:
            return False
        return True

    @contextlib.contextmanager
    def _tracked(self) -> Iterator[None]:
        self._active += 1
        self._idle.clear()
        try:
            yield
        finally:
            self._active -= 1
            if self._active == 0:
                self._idle.set()

    async def close(self) -> None:
        """Stop every cached session's providers; the sessions stay open in the store.

        The next run resumes each one where it stopped, with its stored prompt.
        """
        for session in self._cache.pop_all():
            await session.manager.shutdown()
        await asyncio.gather(*self._retiring, return_exceptions=True)  # logged when done

    def _retire(self, evicted: list[OpenSession]) -> None:
        """Shut evicted sessions' providers down in the background: no turn waits for it."""
        for session in evicted:
            task = asyncio.create_task(session.manager.shutdown())
            self._retiring.add(task)
            task.add_done_callback(self._retired)

    def _retired(self, task: asyncio.Task[None]) -> None:
        self._retiring.discard(task)
        if not task.cancelled() and (error := task.exception()) is not None:
            log.error("an evicted session's providers failed to shut down", exc_info=error)

    @property
    def _per_user(self) -> bool:
        return self._s.config.sessions.group_sessions_per_user

    def _is_admin(self, message: InboundMessage) -> bool:
        return self._access.is_admin(message.platform, message.user_id)

    async def refresh_prompts(self, user_key: str) -> None:
        """After a person removed a memory entry, no prompt of theirs may still hold it:
        their cached sessions are dropped and their stored prompts cleared, so each
        open session's next turn builds its prompt from USER.md as it is now."""
        await self.drop_person(user_key)
        await self._s.sessions.clear_system_prompts(user_key)

    async def drop_person(self, user_key: str) -> None:
        """Drop `user_key`'s cached sessions before their data is erased.

        Each one's providers drain their queued work and stop (so nothing of the
        person is written after the erasure); the sessions are not ended, since
        their rows are about to go. Background work on their data stops first.
        """
        if self._background is not None:
            await self._background.forget_person(user_key)
        for key in await self._s.sessions.user_session_keys(user_key):
            session = self._cache.pop(key)
            if session is not None:
                await session.manager.shutdown()

    async def choose(self, message: InboundMessage, payload: str, sink: ReplySink) -> None:
        """Apply a picked choice (a pressed button): `message` says who picked it, and where.

        Adapters call this with the payload of a `Choice` they rendered as a button.
        A payload that is forged, used up, expired or offered to someone else is
        refused in one line and changes nothing.
        """
        with self._tracked():
            if await self._admitted(message, sink):
                await self._choose(message, payload, sink)

    async def _choose(self, message: InboundMessage, payload: str, sink: ReplySink) -> None:
        key = message.session_key(self._s.config.sessions.group_sessions_per_user)
        async with self._cache.locked(key):
            await self._commands.choose(
                MessageIdentity.of(message, self._per_user), message, payload, sink
            )
            await sink.finish()

    async def _turn(
        self, key: str, message: InboundMessage, sink: ReplySink, stored: Callable[[], None]
    ) -> int | None:
        """One turn; returns the session's id when the reply completed (None on a fault,
        or when the message was answered before: a platform delivered it again)."""
        origin = self._origin(key, message)
        turn_id = uuid.uuid4().hex
        held = self._take_history(key)  # back in the cache once this turn's writes are in it
        asked = NewMessage(
            role="user",
            content=message.text,
            timestamp=time.time(),
            platform_message_id=message.message_id,
            key=f"{turn_id}:0",
            speaker_name=message.user_name,
        )
        first = await self._s.sessions.append_messages(origin=origin, messages=[asked])
        stored()
        history = await self._sent_history(held, asked, first, message)
        if history is None:
            log.info("message %s in session %s was answered already", message.message_id, key)
            return None
        session = await self._session(key, message, first.session_id)
        tools = self._tools(message, session)
        session, history, tools = await self._compress(key, message, session, history, tools)
        earlier, _ = history.earlier()
        recalled = await session.manager.prefetch_all(message.text)
        agent = Agent(self._s.model, tools, max_steps=self._s.config.llm.max_tool_steps)
        result = await agent.run_turn(
            session.system_prompt,
            earlier,
            clip_text(message.text, self._compressor.budget.message_cap),  # stored whole
            recalled,
            sink.write,
        )
        steps = [  # the user's message (index 0) is stored already
            as_stored(m, f"{turn_id}:{i}") for i, m in enumerate(result.messages[1:], start=1)
        ]
        kept = True
        if steps:  # tool steps already taken are kept even when a later model call failed
            written = await self._s.sessions.append_messages(
                origin=origin, messages=steps, counters=counter_update(result.messages)
            )
            kept = history.add_written(steps, written)
        if kept and history.session_id == session.session_id:
            session.history = history  # it matches the store: the next turn starts from it
        if result.error is not None:
            grown = len(earlier) + len(result.messages) > 1
            await self._model_fault(key, result.error, result.truncated, grown, sink)
            return None
        session.manager.sync_all(message.text, result.reply)
        session.manager.queue_prefetch_all(message.text)
        return session.session_id

    def _take_history(self, key: str) -> SentHistory | None:
        """The cached session's history, taken out of the cache until the turn puts it back."""
        cached = self._cache.get(key)
        if cached is None:
            return None
        held, cached.history = cached.history, None
        return held

    async def _sent_history(
        self,
        held: SentHistory | None,
        asked: NewMessage,
        first: AppendResult,
        message: InboundMessage,
    ) -> SentHistory | None:
        """The session's history with this turn's message last: `held` grown by it when it
        is new and follows on, else read from the store (None: it was answered already)."""
        user_id = first.message_ids[0]
        if (
            held is not None
            and held.session_id == first.session_id
            and first.inserted == 1
            and held.extend([stored_form(asked, user_id, first.session_id)])
        ):
            return held
        return await self._history(first.session_id, message, user_id)

    def _tools(self, message: InboundMessage, session: OpenSession) -> list[Tool]:
        return build_tools(
            self._s.memory,
            self._s.skills,
            user_key=message.user_key,
            is_admin=self._is_admin(message),
            session_search=SessionSearch(
                store=self._s.sessions,
                recapper=self._s.auxiliary,
                scope=recall_scope(message.user_key, message.chat_id, message.chat_type),
                current_session_id=session.session_id,
                timeout=self._s.config.auxiliary.recap_timeout,
            ),
        ) + provider_tools(session.manager)

    async def _compress(
        self,
        key: str,
        message: InboundMessage,
        session: OpenSession,
        history: SentHistory,
        tools: list[Tool],
    ) -> tuple[OpenSession, SentHistory, list[Tool]]:
        """Near the context budget, move into a compressed child session with a fresh
        system prompt (see `agent.compression`); long messages are cut in `history`."""
        user_text = clip_text(message.text, self._compressor.budget.message_cap)
        schemas = [tool.schema for tool in tools]
        fixed = fixed_chars(session.system_prompt, user_text, schemas)
        size = fixed + history.earlier()[1]
        if not self._compressor.due(size):
            return session, history, tools
        scope = recall_scope(message.user_key, message.chat_id, message.chat_type)
        child_id = await self._compressor.rotate(session.session_id, scope, fixed, size)
        if child_id is None:
            return session, history, tools
        parent = await self._s.sessions.get_messages(session.session_id, scope, lineage=False)
        ended = [TranscriptMessage(m.role, m.content, m.timestamp) for m in parent]
        session.manager.end_session(ended)  # the parent ended: its providers get its transcript
        if self._background is not None:
            self._background.session_ended(session.session_id, message.user_key)
        child = await self._session(key, message, child_id)  # drops the parent, stops its providers
        copied = await self._s.sessions.get_messages(child_id, scope, lineage=False)
        if copied:  # the summary and copies of the parent's tail, which its extraction covers
            await self._s.sessions.mark_extracted(child_id, copied[-1].id, finished=False)
        cap = self._compressor.budget.message_cap
        return child, SentHistory.of(child_id, copied, cap), self._tools(message, child)

    async def _model_fault(
        self, key: str, error: ModelError, told: bool, grown: bool, sink: ReplySink
    ) -> None:
        """A model call of the turn failed: the detail to the log, one short line to the person.

        A request too long for the model would fail again on every later turn, so
        its session ends (reason ``too_long``) and the next message starts afresh;
        `grown` says whether more than the person's message was sent.
        """
        log.warning("model error in session %s: %s: %s", key, type(error).__name__, error)
        if isinstance(error, RequestTooLargeError):
            await self.end(key, "too_long")
            await sink.write(TOO_LONG_NOTE if grown else MESSAGE_TOO_LONG_NOTE)
        elif not told:  # a reply cut off after some text was shown already carries its note
            await sink.write(fault_notice(error))

    async def _session(self, key: str, message: InboundMessage, session_id: int) -> OpenSession:
        """The cached session `session_id` of `key`, or that session opened from the store.

        A session not cached gets new providers and the prompt stored with it;
        a session without one (new, or a compression child) gets a freshly built
        prompt, stored now and kept for its life. When `key`'s cached session
        is another one (the store moved on: `/new` elsewhere, or compression
        after `start_child_session`), that one is dropped and its providers shut
        down; so compression calls this with the child's id to continue in it.
        """
        current = self._cache.get(key)
        if current is not None:
            if current.session_id == session_id:
                return current
            self._cache.pop(key)
            await current.manager.shutdown()  # the store moved on: don't leak its providers
        manager = self._s.new_manager()
        await manager.initialize(
            SessionContext(
                session_id=session_id,
                user_key=message.user_key,
                platform=message.platform,
                chat_id=message.chat_id,
                chat_type=message.chat_type,
            )
        )
        scope = recall_scope(message.user_key, message.chat_id, message.chat_type)
        prompt = await self._s.sessions.get_system_prompt(session_id, scope)
        if prompt is None:  # set once: a prompt stored meanwhile wins, byte for byte
            prompt = await self._s.sessions.set_system_prompt(
                session_id, await self._build_prompt(message, manager)
            )
        session = OpenSession(session_id=session_id, system_prompt=prompt, manager=manager)
        self._cache.put(key, session)
        self._retire(self._cache.trim())
        return session

    async def _build_prompt(self, message: InboundMessage, manager: MemoryManager) -> str:
        """A fresh system prompt: memory snapshot, skills index and provider block as of now."""
        include_profile = message.chat_type == "private" or self._s.config.memory.profile_in_groups
        snapshot = self._s.memory.snapshot(message.user_key, include_profile=include_profile)
        return build_system_prompt(
            snapshot=snapshot,
            skills_index=self._s.skills.index_block(message.user_key),
            provider_block=await manager.system_prompt_block(),
            platform=message.platform,
            persona=self._s.persona,
        )

    async def _history(
        self, session_id: int, message: InboundMessage, user_message_id: int
    ) -> SentHistory | None:
        """The session's messages read from the store, rebuilt exactly as
        `TurnMessage.as_request` sent them (this turn's last); None when this turn's
        message is not the last (it was answered already)."""
        scope = recall_scope(message.user_key, message.chat_id, message.chat_type)
        stored = await self._s.sessions.get_messages(session_id, scope, lineage=False)
        if not stored or stored[-1].id != user_message_id:
            return None
        return SentHistory.of(session_id, stored, self._compressor.budget.message_cap)

    def _origin(self, key: str, message: InboundMessage) -> SessionOrigin:
        return SessionOrigin(
            session_key=key,
            source=message.platform,
            user_key=message.user_key,
            chat_id=message.chat_id,
            chat_type=message.chat_type,
            thread_id=message.thread_id,
            model=self._s.model.model,
        )

    async def end_quiet(self, key: str, session_id: int, quiet_since: float) -> None:
        """End `key`'s session `session_id` for being idle (`sessions.idle_reset`), unless
        it moved on or a message came after `quiet_since` (checked under the key's lock)."""
        async with self._cache.locked(key):
            current = await self._s.sessions.current_session(key)
            if current is None or current.id != session_id:
                return
            scope = recall_scope(current.user_key, current.chat_id, current.chat_type)
            stored = await self._s.sessions.get_messages(session_id, scope, lineage=False)
            if stored and stored[-1].timestamp >= quiet_since:
                return
            await self.end(key, "idle")

    async def end(self, key: str, reason: str) -> None:
        """End the session of `key`: its providers get the transcript, then shut down, and
        its extraction is scheduled. The next message starts a new, linked session."""
        session = self._cache.pop(key)
        if session is not None:
            info = await self._s.sessions.get_session(session.session_id)
        else:
            info = await self._s.sessions.current_session(key)
        if info is None or info.ended_at is not None:
            if session is not None:
                await session.manager.shutdown()
            return
        await self._s.sessions.end_session(info.id, reason)
        if session is None:  # not cached: its providers start only to hear of the end
            manager = self._s.new_manager()
            await manager.initialize(
                SessionContext(
                    session_id=info.id,
                    user_key=info.user_key,
                    platform=info.source,
                    chat_id=info.chat_id,
                    chat_type=info.chat_type,
                )
            )
        else:
            manager = session.manager
        scope = recall_scope(info.user_key, info.chat_id, info.chat_type)
        stored = await self._s.sessions.get_messages(info.id, scope, lineage=False)
        manager.end_session([TranscriptMessage(m.role, m.content, m.timestamp) for m in stored])
        await manager.shutdown()
        if self._background is not None:
            self._background.session_ended(info.id, info.user_key)


class _Once:
    """Calls `callback` the first time it is called, then never again."""

    def __init__(self, callback: Callable[[], None] | None) -> None:
        self._callback = callback

    def __call__(self) -> None:
        callback, self._callback = self._callback, None
        if callback is not None:
            callback()
