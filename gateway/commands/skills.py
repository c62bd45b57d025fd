"""/promote: an admin shares a person's skill with everyone.

A skill the model writes belongs to the person whose conversation produced
it. ``/promote NAME`` moves it into the shared skills folder, where everyone's
sessions see it and no model may change it. When several people have a skill
of that name, ``/promote NAME USER_KEY`` says whose (`mnemo skills list` shows
the owners). Admins only: the registry hides it from everyone else's /help and
the conversation refuses it for them.
"""

from __future__ import annotations

import asyncio

from gateway.commands.registry import Command, CommandContext, CommandReply
from gateway.i18n import N_
from gateway.messages import CommandArgument
from memory_core import MemoryCoreError, Skill, SkillsStore

USAGE = N_("Usage: /promote NAME [USER_KEY] — share a person's skill with everyone.")


def promote_command(skills: SkillsStore) -> Command:
    """/promote (admins): move a person's skill in `skills` to the shared folder."""

    async def promote(ctx: CommandContext) -> CommandReply:
        parts = ctx.args.split()
        if not 1 <= len(parts) <= 2:
            return CommandReply(ctx.locale._(USAGE))
        name = parts[0]
        given = parts[1] if len(parts) == 2 else None
        try:
            owner, skill = await asyncio.to_thread(_run, skills, name, given)
        except MemoryCoreError as exc:
            return CommandReply(
                ctx.locale._("Skill '{name}' was not promoted: {reason}", name=name, reason=exc)
            )
        if owner is None:
            done = ctx.locale._(
                "Skill '{name}' (unowned) is now shared with everyone and read-only to the "
                "model; new sessions list it.",
                name=skill.name,
            )
        else:
            done = ctx.locale._(
                "Skill '{name}' (from {owner}) is now shared with everyone and read-only to "
                "the model; new sessions list it.",
                name=skill.name,
                owner=owner,
            )
        return CommandReply(done)

    return Command(
        "promote",
        N_("share a person's skill with everyone (admins)"),
        promote,
        arguments=(
            CommandArgument("name", N_("the skill's name"), required=True),
            CommandArgument(
                "user_key", N_("whose skill, when several people have one of that name")
            ),
        ),
        admin_only=True,
    )


def _run(store: SkillsStore, name: str, user_key: str | None) -> tuple[str | None, Skill]:
    owner = user_key if user_key is not None else store.promotion_owner(name)
    return owner, store.promote(name, owner)
