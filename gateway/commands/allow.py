"""/allow CODE: an admin lets in the person a pairing code was given to.

A person the bot refuses is sent their id and a one-time code
(`gateway.access`). An admin who receives the code types ``/allow CODE``: the
person it was given to, and only them, goes on the data directory's list
(`gateway.pairing.AccessList`) and their next message is answered, without a
restart. A code that is malformed, unknown, used or expired is refused in one
line and changes nothing. Admins only: the router refuses it for everyone else.
"""

from __future__ import annotations

import asyncio

from gateway.commands.registry import Command, CommandContext, CommandReply
from gateway.errors import AccessListError
from gateway.i18n import N_
from gateway.messages import CommandArgument
from gateway.pairing import AccessList

USAGE = N_("Usage: /allow CODE — let in the person the bot gave this pairing code to.")


def allow_command(access: AccessList) -> Command:
    """/allow (admins): redeem a pairing code on `access`."""

    async def allow(ctx: CommandContext) -> CommandReply:
        if not ctx.args.strip():
            return CommandReply(ctx.locale._(USAGE))
        try:
            grant = await asyncio.to_thread(access.redeem, ctx.args)
        except AccessListError as exc:
            return CommandReply(
                ctx.locale._("Nobody was let in: {reason}.", reason=exc.line(ctx.locale))
            )
        return CommandReply(
            ctx.locale._("Let in {person}: their next message is answered.", person=grant)
        )

    return Command(
        "allow",
        N_("let in a person with their pairing code (admins)"),
        allow,
        arguments=(CommandArgument("code", N_("the code the bot sent them"), required=True),),
        admin_only=True,
    )
