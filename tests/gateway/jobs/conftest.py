"""A bot with its background work started, against the fake model, for the jobs tests."""

from __future__ import annotations

import contextlib
import dataclasses
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from gateway.app import Services, job_context, open_services
from gateway.config import Config, load_config
from gateway.conversation import Conversations
from gateway.jobs import BackgroundWork
from gateway.messages import InboundMessage
from memory_core import recall_scope
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import SKILLS, serving
from tests.gateway.sinks import ListSink
from tests.timing import wait_until


@dataclass
class Bot:
    """One running bot: its services, conversations, background work and the lines it
    sent outside replies (review summaries)."""

    services: Services
    conversations: Conversations
    background: BackgroundWork
    notes: list[tuple[InboundMessage, str]] = field(default_factory=list)

    async def say(self, text: str, user: str = "alice", group: str | None = None) -> str:
        """One message from `user` in their direct chat (or in `group`); the reply."""
        sink = ListSink()
        await self.conversations.handle(message(text, user, group), sink)
        return sink.replies[-1]

    async def user_entries(self, user: str = "alice") -> tuple[str, ...]:
        return self.services.memory.read("user", f"telegram-{user}").entries

    async def session(self, user: str = "alice") -> Any:
        return await self.services.sessions.current_session(message("", user).session_key())

    async def transcript(self, session_id: int, user: str = "alice") -> list[Any]:
        scope = recall_scope(f"telegram-{user}", user, "private")
        return await self.services.sessions.get_messages(session_id, scope, lineage=False)


async def wait_for(check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    """Wait until the async predicate `check()` holds; TimeoutError after `scaled(timeout)` s."""
    await wait_until(check, timeout)


def message(text: str, user: str = "alice", group: str | None = None) -> InboundMessage:
    """A message from `user` in their direct chat, or in the group chat `group`."""
    return InboundMessage(
        platform="telegram",
        chat_id=group or user,
        chat_type="private" if group is None else "group",
        user_id=user,
        text=text,
    )


def bot_config(fake: FakeOpenAI, home: Path, **sections: dict[str, Any]) -> Config:
    """The configuration for `home`, with `sections` (e.g. memory={...}) changed."""
    env = {
        "OPENAI_BASE_URL": fake.url + "/v1",
        "MNEMO_HOME": str(home),
        "MNEMO_SKILLS_DIR": str(SKILLS),
    }
    config = load_config(None, environ=env)
    updates = {
        name: getattr(config, name).model_copy(update=values) for name, values in sections.items()
    }
    return config.model_copy(update=updates)


@contextlib.asynccontextmanager
async def running_bot(
    config: Config,
    *,
    clock: Callable[[], float] = time.time,
    sweep_seconds: float = 3600.0,
    shutdown_grace: float = 5.0,
) -> AsyncIterator[Bot]:
    """A bot as `mnemo run` starts one: background work started, closed on the way out."""
    async with open_services(config) as services:
        notes: list[tuple[InboundMessage, str]] = []

        async def notify(to: InboundMessage, text: str) -> None:
            notes.append((to, text))

        context = job_context(services, notify)
        settings = dataclasses.replace(
            context.settings, sweep_seconds=sweep_seconds, shutdown_grace=shutdown_grace
        )
        context = dataclasses.replace(context, settings=settings, clock=clock)
        background = BackgroundWork(context)
        conversations = serving(services, background=background)
        background.start(conversations.sessions.end_quiet)
        try:
            yield Bot(services, conversations, background, notes)
        finally:
            await background.close()
            await conversations.close()
