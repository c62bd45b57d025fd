"""Whose language and time zone a line is written in: one person's `PersonLocale`.

The language is the person's own setting if they chose one (`/settings`),
else the platform's hint (Telegram's ``from.language_code``, Discord's
interaction ``locale``; the latest one seen of the person is remembered for
their background notices), else ``locale.language`` from the config. The time
zone is the person's setting, else ``locale.timezone``. In a group the locale
is that of the person being answered. A message's settings are read off the
event loop with a deadline (`arrived`): a database that does not answer never
holds the loop, and the settings last read (else none) stand in meanwhile;
they are also what background notices use, and a change the person makes here
replaces them at once (`chosen`). Every date the bot shows goes through
`PersonLocale.day` / `moment`, and every time phrase it reads is read at
`PersonLocale.now()`, so both are in the person's zone.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, tzinfo
from typing import Any, TypeVar

from gateway.i18n import Catalogs, Translator, negotiate, parse_zone, zone_name
from gateway.messages import InboundMessage
from memory_core import NoticeMode, PersonSettings, PersonSettingsStore

log = logging.getLogger(__name__)

V = TypeVar("V")
Clock = Callable[[], float]
"""The wall clock, in epoch seconds (`time.time`; tests and `MNEMO_CLOCK_START` set it)."""
MAX_HINTS = 10_000  # platform hints remembered, the latest people first
READ_DEADLINE = 3.0  # seconds a message's settings read may take before the last known stand in
MAX_READS = 4  # settings reads in worker threads at once (more wait for nobody: last known)


@dataclass(frozen=True)
class PersonLocale:
    """One person's language, time zone and notice mode, with the clock that says now."""

    translator: Translator
    zone: tzinfo
    notices: NoticeMode | None = None
    """The person's own background-notice mode (None: the config's `memory.notifications`)."""
    clock: Clock = time.time
    settings: PersonSettings = field(default_factory=PersonSettings)
    """What the person chose themselves (for `/settings`)."""

    @property
    def language(self) -> str:
        return self.translator.language

    def _(self, message: str, **values: Any) -> str:
        """`message` in the person's language, filled from `values`."""
        return self.translator._(message, **values)

    def n_(self, singular: str, plural: str, n: int, **values: Any) -> str:
        """The person's form of `singular`/`plural` for `n` (``{n}`` is `n`)."""
        return self.translator.n_(singular, plural, n, **values)

    def now(self) -> datetime:
        """The time now, in the person's zone."""
        return datetime.fromtimestamp(self.clock(), UTC).astimezone(self.zone)

    def day(self, timestamp: float) -> str:
        """The person's calendar day of `timestamp`: "2026-03-14"."""
        return datetime.fromtimestamp(timestamp, UTC).astimezone(self.zone).date().isoformat()

    def moment(self, timestamp: float) -> str:
        """`timestamp` to the minute in the person's zone: "2026-03-14 09:30"."""
        return (
            datetime.fromtimestamp(timestamp, UTC).astimezone(self.zone).strftime("%Y-%m-%d %H:%M")
        )

    @property
    def zone_label(self) -> str:
        """The zone as the person would write it: "Asia/Shanghai", "UTC+8"."""
        return zone_name(self.zone)


def wall_clock(start: datetime | None = None) -> Clock:
    """The system clock, or (`start` given) a clock that reads `start` now and runs on."""
    if start is None:
        return time.time
    origin, began = start.timestamp(), time.monotonic()
    return lambda: origin + (time.monotonic() - began)


class PersonLocales:
    """Makes each person's `PersonLocale` from their settings, their platform's hint and
    the config's defaults."""

    def __init__(
        self,
        catalogs: Catalogs,
        settings: PersonSettingsStore | None,
        *,
        language: str = "en",
        timezone: str = "UTC",
        clock: Clock = time.time,
        read_deadline: float = READ_DEADLINE,
    ) -> None:
        """`settings`: the people's own choices (None: nobody chooses; the hint and the
        defaults decide); `language` and `timezone`: the config's ``locale``;
        `read_deadline`: seconds a message's settings read may take (`arrived`)."""
        self.catalogs = catalogs
        self.settings = settings
        self._language = negotiate(language) or "en"
        self._zone = parse_zone(timezone) or parse_zone("UTC")
        self._clock = clock
        self._deadline = read_deadline
        self._hints: OrderedDict[str, str] = OrderedDict()
        self._known: OrderedDict[str, PersonSettings] = OrderedDict()  # read at their messages
        self._reading: dict[str, asyncio.Future[PersonSettings]] = {}

    @property
    def clock(self) -> Clock:
        return self._clock

    def default(self) -> PersonLocale:
        """The config's language and zone, for lines to nobody in particular (the console's)."""
        assert self._zone is not None
        return PersonLocale(self.catalogs.translator(self._language), self._zone, clock=self._clock)

    async def arrived(self, message: InboundMessage) -> PersonLocale:
        """`of_message`, the sender's settings read first in a worker thread, at most
        `READ_DEADLINE` seconds (then, or when the store fails, the last read stand in)."""
        key = message.user_key
        if self.settings is not None:
            reading = self._reading.get(key)
            if reading is None and len(self._reading) < MAX_READS:
                reading = asyncio.ensure_future(asyncio.to_thread(self._read_store, key))
                self._reading[key] = reading
                reading.add_done_callback(lambda done: self._read_done(key, done))
            try:
                if reading is None:
                    raise TimeoutError("too many reads at once")
                self._keep(key, await asyncio.wait_for(asyncio.shield(reading), self._deadline))
            except Exception as exc:  # a store that is down or slow: the last known, or none
                log.warning("settings of %s not read (%s); the last known stand in", key, exc)
                if key not in self._known:  # never a blocking read on the loop instead
                    return self._message_locale(message, PersonSettings())
        return self.of_message(message)

    def _read_done(self, key: str, done: asyncio.Future[PersonSettings]) -> None:
        self._reading.pop(key, None)
        if not done.cancelled():
            done.exception()  # retrieved: a late failure was logged by the one who waited

    def chosen(self, user_key: str, settings: PersonSettings) -> None:
        """`user_key` just changed their settings to `settings` (read no older ones)."""
        self._keep(user_key, settings)

    def of_message(self, message: InboundMessage) -> PersonLocale:
        """The sender's locale; their platform's language hint is remembered."""
        return self._message_locale(message, None)

    def _message_locale(
        self, message: InboundMessage, chosen: PersonSettings | None
    ) -> PersonLocale:
        hint = negotiate(message.language)
        if hint is not None:
            self._remember(message.user_key, hint)
        return self.of_person(message.user_key, hint, chosen)

    def of_person(
        self, user_key: str, hint: str | None = None, chosen: PersonSettings | None = None
    ) -> PersonLocale:
        """`user_key`'s locale (`hint`: their platform's language now, else the latest
        remembered; `chosen`: their settings, else the last read, else read now)."""
        chosen = self._read(user_key) if chosen is None else chosen
        language = negotiate(chosen.language) or hint or self._hints.get(user_key)
        zone = parse_zone(chosen.timezone) if chosen.timezone else None
        base = self.default()
        return PersonLocale(
            self.catalogs.translator(language or base.language),
            zone or base.zone,
            chosen.notices,
            self._clock,
            chosen,
        )

    def forget(self, user_key: str) -> None:
        """Drop what is remembered of `user_key` (their hint, their settings), at their
        erasure."""
        self._hints.pop(user_key, None)
        self._known.pop(user_key, None)

    def _read(self, user_key: str) -> PersonSettings:
        known = self._known.get(user_key)
        return known if known is not None else self._read_store(user_key)

    def _read_store(self, user_key: str) -> PersonSettings:
        if self.settings is None:
            return PersonSettings()
        try:
            return self.settings.read(user_key)
        except ValueError:  # not a user key the store accepts: nothing chosen
            return PersonSettings()

    def _keep(self, user_key: str, settings: PersonSettings) -> None:
        _put_latest(self._known, user_key, settings)

    def _remember(self, user_key: str, language: str) -> None:
        _put_latest(self._hints, user_key, language)


def _put_latest(people: OrderedDict[str, V], user_key: str, value: V) -> None:
    """`user_key`'s `value`, kept as the latest; the oldest past `MAX_HINTS` forgotten."""
    people[user_key] = value
    people.move_to_end(user_key)
    while len(people) > MAX_HINTS:
        people.popitem(last=False)
