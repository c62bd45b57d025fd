"""Who may talk to the bot: one decision, made before anything else.

Deny by default. Each platform has an allow-list of user ids
(`telegram.allowed_users`, `discord.allowed_users`); ``"*"`` serves everyone,
an empty list nobody. Admins (`admins`, as ``platform:user_id``) are always
served; so is the console, where the operator sits. Beside the configuration's
lists, the storage's `gateway.pairing.AccessList` (``<home>/access.json``, or a
row every replica shares on PostgreSQL) lets people in without a restart: it is
read again whenever it changed. A
refused person gets one line naming their user id and, with that list, a new
one-time pairing code (so the operator can let them in with ``mnemo users
allow CODE`` or an admin with ``/allow CODE``), at most once per
`REFUSAL_INTERVAL` seconds; nothing of theirs is stored (but their id beside their
code's hash, until it expired) or sent to the model.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from gateway.config import Config
from gateway.errors import AccessListError, Translates
from gateway.i18n import N_
from gateway.messages import ReplySink
from gateway.pairing import CODE_TTL, AccessList

log = logging.getLogger(__name__)

EVERYONE = "*"
REFUSALS_AT_ONCE = 4  # refusals being sent at once: a crowd of strangers does not fill
# the platform client's connections and rate limit ahead of the people let in
REFUSAL_INTERVAL = CODE_TTL  # a refused person is told (with a new code) at most this often
MAX_REMEMBERED = 10_000  # refusals remembered; the oldest are forgotten first
REFUSED_LINE = N_(
    "Sorry, this bot is private and doesn't serve you yet. Your {platform} user id is "
    "{user_id}; the bot's operator can add it to {platform}.allowed_users."
)
REFUSED_CODE_LINE = N_(
    "Sorry, this bot is private and doesn't serve you yet. Your {platform} user id is "
    "{user_id} and your pairing code is {code} (valid for an hour, once): send it to the "
    "bot's operator, who can let you in with: mnemo users allow {code}"
)


@dataclass(frozen=True)
class Decision:
    """Whether to serve a person, and the line to send them when refused (None: stay
    quiet): a catalog message and its values, written in the person's language (`line`)."""

    allowed: bool
    reply: str | None = None
    values: Mapping[str, str] = field(default_factory=dict)

    def line(self, locale: Translates) -> str:
        """The refusal in `locale`'s language ("" when there is none)."""
        return "" if self.reply is None else locale._(self.reply, **self.values)


ALLOWED = Decision(True)


class AccessPolicy:
    """The allow-lists of every platform, and when each refused person was last told."""

    def __init__(
        self,
        allowed: Mapping[str, Sequence[str]],
        admins: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
        others: Sequence[str] = (),
        granted: AccessList | None = None,
    ) -> None:
        """`allowed`: platform → user ids (or "*"); `others`: the ids served on a platform
        not named (by default nobody); ``console`` is always served; `granted`: the data
        directory's list, served too (None: no pairing codes)."""
        self.granted = granted
        self._allowed = {platform: frozenset(ids) for platform, ids in allowed.items()}
        self._others = frozenset(others)
        self._admins = frozenset(admins)
        self._clock = clock
        self._told: dict[tuple[str, str], float] = {}
        self._refusing = asyncio.Semaphore(REFUSALS_AT_ONCE)

    @classmethod
    def from_config(cls, config: Config, granted: AccessList | None = None) -> AccessPolicy:
        """The configuration's lists and admins, and `granted` (the storage's list)."""
        return cls(
            {
                "telegram": config.telegram.allowed_users,
                "discord": config.discord.allowed_users,
            },
            admins=config.admins,
            granted=granted,
        )

    @classmethod
    def everyone(cls, admins: Sequence[str] = ()) -> AccessPolicy:
        """Serve every person on every platform (tests, and a bot open to all)."""
        return cls({}, admins=admins, others=[EVERYONE])

    def is_admin(self, platform: str, user_id: str) -> bool:
        """Whether the person may use admin commands and write shared memory and skills:
        one of `admins` (``platform:user_id``), or the operator at the console."""
        return platform == "console" or f"{platform}:{user_id}" in self._admins

    def allows(self, platform: str, user_id: str) -> bool:
        if self.is_admin(platform, user_id) or self.configured(platform, user_id):
            return True
        return self.granted is not None and user_id in self.granted.granted(platform)

    def configured(self, platform: str, user_id: str) -> bool:
        """Whether the configuration's list serves the person (by id or by "*")."""
        ids = self._allowed.get(platform, self._others)
        return EVERYONE in ids or user_id in ids

    def decide(self, platform: str, user_id: str) -> Decision:
        """Serve, or refuse with a line (the first time in an hour) or in silence (the list
        read and the code written on the caller's thread: `admit` is the bot's way)."""
        if self.allows(platform, user_id):
            return ALLOWED
        if not self._tell(platform, user_id):
            return Decision(False)
        return refusal(platform, user_id, self._code(platform, user_id))

    async def admit(self, platform: str, user_id: str, chat_type: str = "private") -> Decision:
        """`decide`, nothing blocking the event loop: the data directory's list is read
        and a new code written in a worker thread, once for all who wait together, and a
        person gets a new code at most once an hour, across restarts (told again without
        one within that hour, their code still works). In a group a refusal is silent: a
        person's id and code are said privately, never before the group."""
        if self.is_admin(platform, user_id) or self.configured(platform, user_id):
            return ALLOWED
        if self.granted is not None and user_id in await self.granted.current(platform):
            return ALLOWED
        if chat_type != "private" or not self._tell(platform, user_id):
            return Decision(False)
        if self.granted is None:
            return refusal(platform, user_id)
        try:
            code = await self.granted.issue_once(platform, user_id)
        except AccessListError as exc:
            log.warning("no pairing code for %s user %s: %s", platform, user_id, exc)
            return refusal(platform, user_id)
        return refusal(platform, user_id, code)

    async def refuse(self, decision: Decision, sink: ReplySink, locale: Translates) -> None:
        """Send `decision`'s refusal line on `sink` (nothing for a silent one), at most
        `REFUSALS_AT_ONCE` at a time: the others wait their turn, not the people let in,
        and without showing typing meanwhile (an empty reply ends it, sending nothing)."""
        if decision.reply is None or self._refusing.locked():
            await sink.finish()  # an empty reply sends nothing
        if decision.reply is None:
            return
        async with self._refusing:
            await sink.write(decision.line(locale))
            await sink.finish()

    def _tell(self, platform: str, user_id: str) -> bool:
        """Whether to tell this refused person (not told in the last hour), noted if so."""
        now = self._clock()
        key = (platform, user_id)
        told = self._told.get(key)
        if told is not None and now - told < REFUSAL_INTERVAL:
            return False
        self._told.pop(key, None)
        self._told[key] = now
        while len(self._told) > MAX_REMEMBERED:
            del self._told[next(iter(self._told))]
        return True

    def _code(self, platform: str, user_id: str) -> str | None:
        """A new pairing code for the person, or None (no list, or it cannot be written)."""
        if self.granted is None:
            return None
        try:
            return self.granted.issue_code(platform, user_id)
        except AccessListError as exc:
            log.warning("no pairing code for %s user %s: %s", platform, user_id, exc)
            return None


def refusal(platform: str, user_id: str, code: str | None = None) -> Decision:
    """The refusal that names the person's id (and their pairing code, when they got one)."""
    values = {"platform": platform, "user_id": user_id}
    if code is None:
        return Decision(False, REFUSED_LINE, values)
    return Decision(False, REFUSED_CODE_LINE, {**values, "code": code})
