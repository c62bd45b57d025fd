"""`/start`, `/help`, `/skills` and `/status`: what the bot is and what it holds now."""

from __future__ import annotations

from datetime import UTC, datetime

from gateway.commands.registry import (
    Command,
    CommandContext,
    CommandHandler,
    CommandRegistry,
    CommandReply,
)
from memory_core import FileMemoryStore, SessionStore, SkillsStore

INTRO = (
    "I'm Mnemo, a chat assistant that remembers you: what you tell me about yourself "
    "(a short profile I keep and update) and our past conversations, which I can look "
    "back through. What I keep about you is yours: only you can see it."
)
GROUP_NOTE = "(In a private chat with me I also show {what}; a group would see it here.)"
YOUR_DATA = (
    "See it: /memory shows what I remember about you, /recall <what> searches our past "
    "conversations.\n"
    "Erase it: /forget <text or number> removes one thing I remember; /forget all erases "
    "everything I hold about you.\n"
    "Take it: /export gives you all of it as one file."
)


def start_command(registry: CommandRegistry) -> Command:
    """/start: what the bot is, and the commands of `registry` this person may use."""
    return Command("start", "what I am and how to use me", _help(registry))


def help_command(registry: CommandRegistry) -> Command:
    """/help: the same as /start."""
    return Command("help", "what I am, what I keep about you, and these commands", _help(registry))


def _help(registry: CommandRegistry) -> CommandHandler:
    async def help_(ctx: CommandContext) -> CommandReply:
        lines = [INTRO, "", YOUR_DATA, "", "Commands:", *registry.help_lines(ctx.is_admin)]
        return CommandReply("\n".join(lines))

    return help_


def skills_command(skills: SkillsStore) -> Command:
    """/skills: the skills in `skills` that the person's sessions see; in a group only the
    shared ones (the person's own are theirs: a group would see them)."""

    async def list_skills(ctx: CommandContext) -> CommandReply:
        private = ctx.message.chat_type == "private"
        seen = [s for s in skills.skills(ctx.identity.user_key) if private or s.owner != "user"]
        lines = ["The skills I can use for you:"] if seen else ["I have no skills yet."]
        for skill in seen:
            mine = " (yours)" if skill.owner == "user" else ""
            lines.append(f"- {skill.relpath}{mine}: {skill.description}")
        if not private:
            if seen:
                lines[0] = "The shared skills I can use here:"
            else:
                lines = ["I have no shared skills."]
            lines.append(GROUP_NOTE.format(what="your own skills"))
        return CommandReply("\n".join(lines))

    return Command("skills", "the skills I can use for you", list_skills)


def status_command(memory: FileMemoryStore, sessions: SessionStore, model_name: str) -> Command:
    """/status: the chat's open session in `sessions`, the model, and (in a private chat
    only: a group would see it) how full the person's USER.md is."""

    async def status(ctx: CommandContext) -> CommandReply:
        lines = [f"Model: {model_name or 'unknown'}"]
        if ctx.message.chat_type == "private":
            held = memory.read("user", ctx.identity.user_key)
            lines.append(
                f"What I remember about you: {held.chars:,} of {held.limit:,} characters "
                f"({len(held.entries)} {'entry' if len(held.entries) == 1 else 'entries'})"
            )
        else:
            lines.append(GROUP_NOTE.format(what="how much I remember about you"))
        current = await sessions.current_session(ctx.identity.session_key)
        if current is None or current.ended_at is not None:
            lines.insert(0, "Session: none open; your next message starts one.")
            return CommandReply("\n".join(lines))
        stored = await sessions.get_messages(current.id, ctx.identity.scope, lineage=False)
        said = sum(1 for m in stored if m.role in ("user", "assistant") and m.content.strip())
        started = datetime.fromtimestamp(current.started_at, UTC).strftime("%Y-%m-%d %H:%M UTC")
        lines.insert(0, f"Session: started {started}, {said} messages so far")
        return CommandReply("\n".join(lines))

    return Command("status", "this session, the model, and how full my memory of you is", status)
