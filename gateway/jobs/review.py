"""The background review: after a reply, learn from the conversation so far.

A review reads the session as the model last saw it: the same stored system
prompt, byte for byte, and the same history (so a provider's prompt cache is
reused), then one instruction to save what is worth keeping, with only the
memory and skills tools (`LearningTools`: this person's USER.md, their own
skills, never an operator's). It runs on the auxiliary model at background
priority and writes nothing to the session's transcript (a run that called
tools is kept apart, as an internal session with source ``review``). When it ends (whatever the
outcome; not when cancelled by a new message) the session's review counters
go back to 0, and the chat gets one short line naming what changed, or
nothing when nothing did; a review cancelled by a new message still gets the
line for what it wrote before (`approvals.tell`). What it staged for the
person's approval is announced in their private chat only, with buttons.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

from gateway.agent.compression import Budget, clip_history
from gateway.agent.transcript import as_sent
from gateway.agent.turn import Agent
from gateway.jobs.approvals import background_tools, learning_tools, tell
from gateway.jobs.context import JobContext
from gateway.jobs.grounding import own_words
from gateway.jobs.records import record_run
from gateway.messages import InboundMessage
from memory_core import Origin

log = logging.getLogger(__name__)

REVIEW_MAX_STEPS = 8

REVIEW_PROMPT = """\
[Background review. This message is not from the person, and nothing you write \
here reaches them. Do not answer the conversation.]

Look back over the conversation above and keep what will matter in later \
conversations with this person:
1. What they revealed about themselves: who they are, their situation, their \
preferences. Save it with the memory tool, target "user", as short facts, in \
their own words and language: only what they stated about themselves, never what \
you said or guessed, what they asked, denied or said of someone else, nor text they \
quoted or forwarded. When a fact changed, replace the old entry.
2. Corrections of your style, tone, length or way of working that they asked for, \
or were clearly frustrated by. Save them the same way.
3. A reusable method that worked for a kind of task. Prefer patching a skill \
already used in this conversation (read it with skill_view first) over creating a \
new one; name a new skill for the class of task, never for one error or one request; \
procedure first, each pitfall as a rule with its reason.

Never save transient errors, failures of the environment, one-off stories, task \
progress, or anything already in memory. If nothing is worth keeping, reply \
"Nothing to save." and call no tool."""


@dataclass(frozen=True)
class ReviewRequest:
    """A review of one session, and the message whose chat hears of the outcome."""

    session_id: int
    message: InboundMessage


async def review_session(ctx: JobContext, request: ReviewRequest) -> None:
    """Run one review of `request.session_id` (a scheduler job; see the module doc)."""
    info = await ctx.sessions.get_session(request.session_id)
    if info is None or info.ended_at is not None:
        return  # erased, or ended meanwhile: its extraction covers it
    scope = info.scope
    prompt = await ctx.sessions.get_system_prompt(request.session_id, scope)
    if prompt is None:  # cleared (a forgotten entry): the next turn builds a new one
        return
    stored = await ctx.sessions.get_messages(request.session_id, scope, lineage=False)
    history = clip_history([as_sent(m) for m in stored], Budget(ctx.context_chars).message_cap)
    learning = learning_tools(ctx, info.user_key, Origin("review", info.id))
    tools = background_tools(ctx, learning, own_words(stored), "review", info.user_key)
    agent = Agent(ctx.model, tools, max_steps=REVIEW_MAX_STEPS)
    try:
        result = await agent.run_turn(prompt, history, REVIEW_PROMPT, "", _discard)
    except asyncio.CancelledError:  # a new message: what was written or staged is still said
        await tell(ctx, learning, request.message, info.user_key)
        raise
    await record_run(ctx, "review", info, result)
    if result.error is not None:  # logged only: the chat hears nothing of a failed review
        log.warning(
            "background review of session %d failed: %s: %s",
            request.session_id,
            type(result.error).__name__,
            result.error,
        )
    await ctx.sessions.reset_counters(request.session_id)
    await tell(ctx, learning, request.message, info.user_key)


async def _discard(piece: str) -> None:
    """The review's text goes nowhere: it is not a reply."""
