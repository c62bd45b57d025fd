"""`/start`, `/help`, `/skills` and `/status`: what the bot is and what it holds now."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.commands.registry import Command, CommandContext, CommandReply
from memory_core import recall_scope

INTRO = (
    "I'm Mnemo, a chat assistant that remembers you: what you tell me about yourself "
    "(a short profile I keep and update) and our past conversations, which I can look "
    "back through. What I keep about you is yours: only you can see it."
)
YOUR_DATA = (
    "See it: /memory shows what I remember about you, /recall <what> searches our past "
    "conversations.\n"
    "Erase it: /forget <text or number> removes one thing I remember; /forget all erases "
    "everything I hold about you.\n"
    "Take it: /export gives you all of it as one file."
)


async def _help(ctx: CommandContext) -> CommandReply:
    lines = [INTRO, "", YOUR_DATA, "", "Commands:", *ctx.registry.help_lines(ctx.is_admin)]
    return CommandReply("\n".join(lines))


async def _skills(ctx: CommandContext) -> CommandReply:
    skills = ctx.skills.skills(ctx.message.user_key)
    if not skills:
        return CommandReply("I have no skills yet.")
    lines = ["The skills I can use for you:"]
    for skill in skills:
        mine = " (yours)" if skill.owner == "user" else ""
        lines.append(f"- {skill.relpath}{mine}: {skill.description}")
    return CommandReply("\n".join(lines))


async def _status(ctx: CommandContext) -> CommandReply:
    msg = ctx.message
    memory = ctx.memory.read("user", msg.user_key)
    lines = [
        f"Model: {ctx.model_name or 'unknown'}",
        f"What I remember about you: {memory.chars:,} of {memory.limit:,} characters "
        f"({len(memory.entries)} {'entry' if len(memory.entries) == 1 else 'entries'})",
    ]
    current = await ctx.sessions.current_session(ctx.session_key) if ctx.sessions else None
    if ctx.sessions is None or current is None or current.ended_at is not None:
        lines.insert(0, "Session: none open; your next message starts one.")
        return CommandReply("\n".join(lines))
    scope = recall_scope(msg.user_key, msg.chat_id, msg.chat_type)
    stored = await ctx.sessions.get_messages(current.id, scope, lineage=False)
    said = sum(1 for m in stored if m.role in ("user", "assistant") and m.content.strip())
    started = datetime.fromtimestamp(current.started_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines.insert(0, f"Session: started {started}, {said} messages so far")
    return CommandReply("\n".join(lines))


START = Command("start", "what I am and how to use me", _help)
HELP = Command("help", "what I am, what I keep about you, and these commands", _help)
SKILLS = Command("skills", "the skills I can use for you", _skills)
STATUS = Command("status", "this session, the model, and how full my memory of you is", _status)
