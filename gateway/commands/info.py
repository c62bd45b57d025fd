"""`/start`, `/help`, `/skills` and `/status`: what the bot is and what it holds now."""

from __future__ import annotations

from gateway.commands.registry import (
    Command,
    CommandContext,
    CommandHandler,
    CommandRegistry,
    CommandReply,
)
from gateway.i18n import N_
from memory_core import MemoryBackend, SessionBackend, SkillsStore

INTRO = N_(
    "I'm Mnemo, a chat assistant that remembers you: what you tell me about yourself "
    "(a short profile I keep and update) and our past conversations, which I can look "
    "back through. What I keep about you is yours: only you can see it."
)
YOUR_DATA = N_(
    "See it: /memory shows what I remember about you, /recall <what> searches our past "
    "conversations.\n"
    "Erase it: /forget <text or number> removes one thing I remember; /forget all erases "
    "everything I hold about you.\n"
    "Take it: /export gives you all of it as one file."
)
GROUP_SKILLS_NOTE = N_(
    "(In a private chat with me I also show your own skills; a group would see them here.)"
)
GROUP_MEMORY_NOTE = N_(
    "(In a private chat with me I also show how much I remember about you; a group would "
    "see it here.)"
)


def start_command(registry: CommandRegistry) -> Command:
    """/start: what the bot is, and the commands of `registry` this person may use."""
    return Command("start", N_("what I am and how to use me"), _help(registry))


def help_command(registry: CommandRegistry) -> Command:
    """/help: the same as /start."""
    return Command(
        "help", N_("what I am, what I keep about you, and these commands"), _help(registry)
    )


def _help(registry: CommandRegistry) -> CommandHandler:
    async def help_(ctx: CommandContext) -> CommandReply:
        _ = ctx.locale._
        commands = registry.help_lines(ctx.is_admin, ctx.locale)
        lines = [_(INTRO), "", _(YOUR_DATA), "", _("Commands:"), *commands]
        return CommandReply("\n".join(lines))

    return help_


def skills_command(skills: SkillsStore) -> Command:
    """/skills: the skills in `skills` that the person's sessions see; in a group only the
    shared ones (the person's own are theirs: a group would see them)."""

    async def list_skills(ctx: CommandContext) -> CommandReply:
        _ = ctx.locale._
        private = ctx.message.chat_type == "private"
        seen = [s for s in skills.skills(ctx.identity.user_key) if private or s.owner != "user"]
        if private:
            lines = [_("The skills I can use for you:") if seen else _("I have no skills yet.")]
        else:
            lines = [
                _("The shared skills I can use here:") if seen else _("I have no shared skills.")
            ]
        for skill in seen:
            if skill.owner == "user":
                line = _(
                    "- {name} (yours): {description}",
                    name=skill.relpath,
                    description=skill.description,
                )
            else:
                line = _(
                    "- {name}: {description}", name=skill.relpath, description=skill.description
                )
            lines.append(line)
        if not private:
            lines.append(_(GROUP_SKILLS_NOTE))
        return CommandReply("\n".join(lines))

    return Command("skills", N_("the skills I can use for you"), list_skills)


def status_command(memory: MemoryBackend, sessions: SessionBackend, model_name: str) -> Command:
    """/status: the chat's open session in `sessions` (its start in the person's zone), the
    model, and (in a private chat only: a group would see it) how full the person's USER.md is."""

    async def status(ctx: CommandContext) -> CommandReply:
        locale = ctx.locale
        lines = [locale._("Model: {model}", model=model_name or locale._("unknown"))]
        if ctx.message.chat_type == "private":
            held = memory.read("user", ctx.identity.user_key)
            entries = locale.n_("{n} entry", "{n} entries", len(held.entries))
            lines.append(
                locale._(
                    "What I remember about you: {chars} of {limit} characters ({entries})",
                    chars=format(held.chars, ","),
                    limit=format(held.limit, ","),
                    entries=entries,
                )
            )
        else:
            lines.append(locale._(GROUP_MEMORY_NOTE))
        current = await sessions.current_session(ctx.identity.session_key)
        if current is None or current.ended_at is not None:
            lines.insert(0, locale._("Session: none open; your next message starts one."))
            return CommandReply("\n".join(lines))
        stored = await sessions.get_messages(current.id, ctx.identity.scope, lineage=False)
        said = sum(1 for m in stored if m.role in ("user", "assistant") and m.content.strip())
        started = locale.n_(
            "Session: started {time} ({zone}), {n} message so far",
            "Session: started {time} ({zone}), {n} messages so far",
            said,
            time=locale.moment(current.started_at),
            zone=locale.zone_label,
        )
        lines.insert(0, started)
        return CommandReply("\n".join(lines))

    return Command(
        "status", N_("this session, the model, and how full my memory of you is"), status
    )
