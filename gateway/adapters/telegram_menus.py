"""Telegram's cosmetic calls at start: the commands menus (``setMyCommands``).

They change how the bot looks, not whether it works, so none of them is fatal: a
flood-control answer (429 with ``retry_after``) is waited out a bounded number of times,
and anything else Telegram answers, or no answer, is one log line and the bot starts
without it. `cosmetic` also serves a needed call that only a flood wait should delay.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from telegram import BotCommand
from telegram.error import RetryAfter, TelegramError
from telegram.ext import ExtBot

from gateway.messages import CommandSpec

log = logging.getLogger("gateway.adapters.telegram_adapter")  # the adapter's log lines


async def set_menus(bot: ExtBot[Any], commands: Sequence[CommandSpec]) -> None:
    """The commands menu: the default one (the bot's default language), and one per
    language the menu is translated into, which Telegram shows to a person whose app is
    in that language.

    A menu is cosmetic: never fatal. A flood-control answer is waited out (at most
    `MENU_RETRIES` times, each wait at most `MENU_MAX_WAIT` seconds); any other refusal
    (a 404 right after getMe accepted the token is not a refused token), a wait too long
    or no answer is one log line, and the bot starts without the rest of the menus."""
    menus: list[tuple[str | None, list[BotCommand]]] = [
        (None, [BotCommand(c.name, c.description) for c in commands])
    ]
    languages = sorted({language for c in commands for language in c.translations})
    menus += [
        (language, [BotCommand(c.name, c.text(language).description) for c in commands])
        for language in languages
    ]
    for language, menu in menus:
        try:
            await cosmetic(functools.partial(bot.set_my_commands, menu, language_code=language))
        except (TelegramError, OSError) as error:
            which = "the commands menu" if language is None else f"the {language} commands menu"
            log.warning("telegram: %s was not set (%s); going on without it", which, error)
            return


MENU_RETRIES = 3
MENU_MAX_WAIT = 10.0  # seconds; a longer flood wait is not worth holding the start for


async def cosmetic(call: Callable[[], Awaitable[Any]]) -> None:
    """`call`, again after each flood-control wait Telegram asks for (bounded)."""
    for attempt in range(MENU_RETRIES + 1):
        try:
            await call()
            return
        except RetryAfter as error:
            wait = error.retry_after
            seconds = wait.total_seconds() if isinstance(wait, dt.timedelta) else float(wait)
            if attempt == MENU_RETRIES or seconds > MENU_MAX_WAIT:
                raise
        await asyncio.sleep(seconds)
