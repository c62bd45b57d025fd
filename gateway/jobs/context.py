"""What a background job receives: the stores, the auxiliary model and the settings.

Jobs get this context object, never the application. `end_session` is the
one way back into the conversations (ending a quiet session under its lock,
when `sessions.idle_reset` is on); the application binds it at start-up.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Literal

from gateway.agent.model_client import ModelClient
from gateway.config import Config
from gateway.jobs.learning import Notifications
from gateway.messages import Notifier
from gateway.person_locale import PersonLocale, PersonLocales
from memory_core import MemoryBackend, SessionBackend, SkillsStore, StagedChange

WriteApproval = Literal["off", "background", "all"]
Announcer = Callable[[str, str, Sequence[StagedChange]], Awaitable[bool]]
"""Tell a person of changes staged for them: (platform, user key, changes) -> whether their
private chat was reached (never a group)."""

SessionEnder = Callable[[str, int, float], Awaitable[None]]
"""End a quiet session: (session key, session id, quiet since); a no-op when the key has
moved on to another session, or a message came after that time, meanwhile."""

MIN_SWEEP_SECONDS = 15.0
MAX_SWEEP_SECONDS = 300.0
SHUTDOWN_GRACE_SECONDS = 10.0
JOB_LEASE_SECONDS = 60.0  # a dead replica's job is taken over this long after its last renewal


@dataclass(frozen=True)
class BackgroundSettings:
    """When reviews and extractions run, and what a chat is told afterwards."""

    memory_nudge: int  # turns without a memory write before a review (0: never)
    skill_nudge: int  # tool steps without a skill write before a review (0: never)
    notifications: Notifications
    idle_seconds: float  # quiet this long: extract (and end, with idle_reset)
    idle_reset: bool
    sweep_seconds: float  # how often quiet and pending sessions are looked for
    shutdown_grace: float = SHUTDOWN_GRACE_SECONDS  # extractions running at shutdown get this
    write_approval: WriteApproval = "off"  # which writes wait for the person's approval
    judge: bool = False  # the auxiliary model judges each background entry (fact or not)
    job_lease: float = JOB_LEASE_SECONDS  # a claimed job's lease, renewed at a third of it

    @classmethod
    def from_config(cls, config: Config) -> BackgroundSettings:
        idle_seconds = config.sessions.idle_minutes * 60.0
        return cls(
            memory_nudge=config.memory.nudge_interval,
            skill_nudge=config.skills.creation_nudge_interval,
            notifications=config.memory.notifications,
            idle_seconds=idle_seconds,
            idle_reset=config.sessions.idle_reset,
            sweep_seconds=min(MAX_SWEEP_SECONDS, max(MIN_SWEEP_SECONDS, idle_seconds / 4)),
            write_approval=config.memory.write_approval,
            # Only a model of its own may judge: the chat model judging what it was led
            # to write would share whatever misled it.
            judge=config.memory.judge
            and (config.auxiliary.model is not None or config.auxiliary.base_url is not None),
        )

    def review_due(self, turns: int, steps: int) -> bool:
        """Whether counters this high call for a review."""
        return (self.memory_nudge > 0 and turns >= self.memory_nudge) or (
            self.skill_nudge > 0 and steps >= self.skill_nudge
        )


async def _no_ender(session_key: str, session_id: int, quiet_since: float) -> None:
    raise RuntimeError("background work was not started with a session ender")


@dataclass
class JobContext:
    """Everything a review or extraction job may touch."""

    sessions: SessionBackend
    memory: MemoryBackend
    skills: SkillsStore
    model: ModelClient  # the auxiliary model, background priority
    context_chars: int  # the request budget (`llm.context_chars`)
    settings: BackgroundSettings
    notify: Notifier
    locales: PersonLocales
    """Each person's language and notice mode, for the lines a job sends them."""
    end_session: SessionEnder = _no_ender
    announce: Announcer | None = None  # tells a person of changes staged for their approval
    clock: Callable[[], float] = time.time
    on_refused: Callable[[str, str], None] | None = None
    """Counts an entry dropped as not grounded: (the job, the verdict); see `grounding`."""
    _extracting: dict[int, tuple[asyncio.Lock, int]] = field(default_factory=dict)

    def locale_of(self, user_key: str) -> PersonLocale:
        """The locale of the person a session belongs to (their setting, else their latest
        platform hint, else the configuration's)."""
        return self.locales.of_person(user_key)

    def notice_mode(self, locale: PersonLocale) -> Notifications:
        """What the person is told after a review: their own mode, else the configuration's."""
        return locale.notices or self.settings.notifications

    @contextlib.asynccontextmanager
    async def extraction_lock(self, session_id: int) -> AsyncIterator[None]:
        """One extraction of a session at a time (a sweep and a session end may meet)."""
        lock, users = self._extracting.get(session_id, (asyncio.Lock(), 0))
        self._extracting[session_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._extracting[session_id]
            if users == 1:
                del self._extracting[session_id]
            else:
                self._extracting[session_id] = (lock, users - 1)
