"""A turn's or command's errors as one short line to the person, never a crash.

`guarded(key, sink, locale, work)` awaits `work` and turns what a turn may
raise into one line in the person's language (the detail to the log): a model
fault, an erasure that began meanwhile, a busy session store, anything else.
One thing is not turned into a line: a store that is unavailable before the
person's message was stored (`unstored`, a `Once` not yet called). That
raises `NotStoredError`; the message is not confirmed to its platform, which
sends it again once the store may be back, and the person is answered then.
`Once` calls a callback the first time only (a platform told once that a
message is kept). Both serve `gateway.conversation` and `gateway.replicas`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from gateway.agent.turn import fault_notice
from gateway.commands.router import ERASED_LINE, FAILED_LINE
from gateway.errors import ModelError, NotStoredError
from gateway.i18n import N_
from gateway.messages import ReplySink
from gateway.person_locale import PersonLocale
from memory_core import PersonErasedError, PostgresUnavailableError, SessionStoreBusyError

log = logging.getLogger("gateway.conversation")

BUSY_LINE = N_("(I'm busy right now; please try again in a moment)")
T = TypeVar("T")


async def guarded(
    key: str,
    sink: ReplySink,
    locale: PersonLocale,
    work: Awaitable[T],
    unstored: Once | None = None,
    outage: Outage | None = None,
) -> T | None:
    """`work`'s result; an error becomes one short line to the person (None), but
    `NotStoredError` when the store is unavailable and `unstored` was not called yet, and
    during an `outage` the line about it once per session (a result not None ends it)."""
    try:
        result = await work
        if outage is not None and result is not None:  # a turn completed: its writes landed
            outage.over()
        return result
    except PostgresUnavailableError as exc:
        if unstored is not None and not unstored.called:
            raise NotStoredError(f"session {key}: the message was not stored: {exc}") from exc
        log.warning("store unavailable in session %s: %s", key, exc)
        if outage is None or outage.first(key):  # one apology per session and outage
            await sink.write(locale._(FAILED_LINE))
    except ModelError as exc:  # upstream detail to the log, a short line to the person
        log.warning("model error in session %s: %s: %s", key, type(exc).__name__, exc)
        await sink.write(locale._(fault_notice(exc)))
    except PersonErasedError:  # erased while this was in flight: the store kept nothing
        log.info("session %s: the person was erased meanwhile; nothing was kept", key)
        await sink.write(locale._(ERASED_LINE))
    except SessionStoreBusyError as exc:  # the message is queued and stored later
        log.warning("session store busy in session %s: %s", key, exc)
        await sink.write(locale._(BUSY_LINE))
    except Exception:  # the top of a turn: log it, tell the person, keep serving
        log.exception("turn failed in session %s", key)
        await sink.write(locale._(FAILED_LINE))
    return None


class Outage:
    """The store refusing the writes of stored messages' turns: since when, and which
    sessions were told so (once each, until a turn completes again). With no failure for
    `QUIET` seconds it is over too (nothing may have been tried since the store came back)."""

    QUIET = 30.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._told: set[str] = set()
        self.since: float | None = None  # None: no outage now
        self._last = 0.0  # the latest failure

    def first(self, key: str) -> bool:
        """A turn of `key` failed on the store: whether its person is to be told (the
        first time in this outage)."""
        if self.seconds() is None:
            self.over()
            self.since = self._clock()
        self._last = self._clock()
        if key in self._told:
            return False
        self._told.add(key)
        return True

    def over(self) -> None:
        """A turn completed: the store takes writes again."""
        self.since = None
        self._told.clear()

    def seconds(self) -> float | None:
        """How long the outage has lasted (None: none now)."""
        if self.since is None or self._clock() - self._last > self.QUIET:
            return None
        return self._clock() - self.since


class Once:
    """Calls `callback` the first time it is called, then never again."""

    def __init__(self, callback: Callable[[], None] | None) -> None:
        self._callback = callback
        self.called = False

    @classmethod
    def done(cls) -> Once:
        """One that was called already (its message is kept: nothing to tell)."""
        once = cls(None)
        once.called = True
        return once

    def __call__(self) -> None:
        callback, self._callback = self._callback, None
        self.called = True
        if callback is not None:
            callback()
