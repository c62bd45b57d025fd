"""Extraction: save what a stretch of conversation taught, when it ends or goes quiet.

`extract_session` reads the part of a session the extraction has not covered
yet (state.db keeps, per session, the id of the last message covered), and
has the auxiliary model save durable facts about the person and reusable
methods with only the memory and skills tools (`LearningTools`). Long
stretches go in chunks, oldest first, and progress is stored after each, so
a crash, a shutdown or a failed model call resumes where it stopped; a chunk
that was written but not yet marked is offered again, and an identical entry
is not stored twice. A run that called tools is kept as an internal session
with source ``extraction`` (see `records`). Very short stretches (fewer than `MIN_MESSAGES` texts)
are marked covered without a model call. `ending=True` (the session has ended)
also clears the session's "extraction due" mark when all is covered.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from gateway.agent.compression import clip_text
from gateway.agent.turn import Agent
from gateway.jobs.approvals import background_tools, learning_tools, tell
from gateway.jobs.context import JobContext
from gateway.jobs.grounding import own_words
from gateway.jobs.records import record_run
from memory_core import Origin, SessionInfo, StoredMessage

log = logging.getLogger(__name__)

MIN_MESSAGES = 4  # user and assistant texts; fewer is too little to learn from
MESSAGE_CHARS = 2_000  # each message is cut to this in the transcript
CHUNK_CHARS = 24_000  # transcript characters per extraction call
EXTRACT_MAX_STEPS = 8

EXTRACTION_SYSTEM = """\
You read a finished stretch of conversation between an assistant and one person, \
and save what will matter in later conversations with them. You never talk to the \
person: nothing you write reaches them.

Save with the memory tool, target "user", as short facts: what the person revealed \
about themselves (who they are, their situation, preferences) and corrections of the \
assistant's style or way of working they asked for, in their own words and language: \
only what the person stated about themselves (lines marked [user]), never what the \
assistant said or guessed, what they asked, denied or said of someone else, nor text \
they quoted or forwarded. When a fact changed ("I moved to Porto"), replace the old \
entry instead of adding beside it. Save with skill_manage a reusable \
method that worked for a kind of task; prefer patching an existing skill (read it \
with skill_view first) over creating one.

Never save transient errors, failures of the environment, one-off stories, task \
progress, or what the profile below already says. If nothing is worth keeping, reply \
"Nothing to save." and call no tool."""


async def extract_session(ctx: JobContext, session_id: int, ending: bool) -> None:
    """Extract what `session_id` has not had extracted yet (a scheduler job)."""
    async with ctx.extraction_lock(session_id):
        info = await ctx.sessions.get_session(session_id)
        done = await ctx.sessions.extraction_progress(session_id)
        if info is None or done is None:
            return  # erased meanwhile
        scope = info.scope
        stored = await ctx.sessions.get_messages(session_id, scope, lineage=False)
        pending = [m for m in stored if m.id > done]
        texts = [m for m in pending if _is_text(m)]
        if len(texts) >= MIN_MESSAGES:
            for chunk in _chunks(texts):
                if not await _extract_chunk(ctx, info, chunk):
                    return  # progress so far is kept; the next sweep goes on from there
                await ctx.sessions.mark_extracted(session_id, chunk[-1].id, finished=False)
        through = pending[-1].id if pending else done
        await ctx.sessions.mark_extracted(session_id, through, finished=ending)


async def _extract_chunk(
    ctx: JobContext, info: SessionInfo, chunk: Sequence[StoredMessage]
) -> bool:
    """One extraction call over `chunk`; False when the model call failed (logged)."""
    learning = learning_tools(ctx, info.user_key, Origin("extraction", info.id))
    said = own_words(chunk)  # the stretch this call learns from
    tools = background_tools(ctx, learning, said, "extraction", info.user_key)
    agent = Agent(ctx.model, tools, max_steps=EXTRACT_MAX_STEPS)
    profile = ctx.memory.read("user", info.user_key).entries
    result = await agent.run_turn(EXTRACTION_SYSTEM, [], _request(profile, chunk), "", _discard)
    await record_run(ctx, "extraction", info, result)
    await tell(ctx, learning, None, info.user_key)  # what it staged, in their private chat
    if result.error is not None:
        log.warning(
            "extraction of session %d failed: %s: %s",
            chunk[0].session_id,
            type(result.error).__name__,
            result.error,
        )
        return False
    if learning.changed:
        log.info(
            "extraction of session %d: %d memory and %d skill changes",
            chunk[0].session_id,
            len(learning.memory_changes),
            len(learning.skill_changes),
        )
    return True


def _request(profile: Sequence[str], chunk: Sequence[StoredMessage]) -> str:
    known = "\n".join(f"- {entry}" for entry in profile) or "(empty)"
    lines = "\n\n".join(f"[{_speaker(m)}] {clip_text(m.content, MESSAGE_CHARS)}" for m in chunk)
    return f"The person's profile now:\n{known}\n\nThe conversation, oldest first:\n\n{lines}"


def _speaker(message: StoredMessage) -> str:
    return message.role if message.own_words else f"{message.role}, not their own words"


def _chunks(messages: Sequence[StoredMessage]) -> list[list[StoredMessage]]:
    """Consecutive runs of messages of at most `CHUNK_CHARS` transcript characters."""
    chunks: list[list[StoredMessage]] = [[]]
    used = 0
    for message in messages:
        size = min(len(message.content), MESSAGE_CHARS) + 16
        if chunks[-1] and used + size > CHUNK_CHARS:
            chunks.append([])
            used = 0
        chunks[-1].append(message)
        used += size
    return chunks


def _is_text(message: StoredMessage) -> bool:
    return message.role in ("user", "assistant") and bool(message.content.strip())


async def _discard(piece: str) -> None:
    """The extraction's text goes nowhere: it is not a reply."""
