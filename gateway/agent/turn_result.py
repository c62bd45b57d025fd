"""A turn's last steps: what it produced stored, and a model fault answered.

`Outcome.settle` stores the turn's steps with the review counters they moved
and puts the session's history back in the cache when it still matches the
store; then a model fault becomes one short line, kept on the person's message
so that it counts as answered (a restart does not answer it again; no request
carries the line); a request too long for the model ends its session.
`Outcome.stopped` keeps what the person was shown of a reply they stopped.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

from gateway.agent.review_counters import counter_update
from gateway.agent.transcript import as_stored
from gateway.agent.turn import MESSAGE_TOO_LONG_NOTE, TOO_LONG_NOTE, TurnResult, fault_notice
from gateway.agent.turn_input import Asked
from gateway.agent.turn_prepare import Prepared
from gateway.errors import ModelError, RequestTooLargeError
from gateway.i18n import N_
from gateway.messages import ReplySink
from gateway.open_sessions import OpenSessions
from memory_core import NewMessage, SessionBackend, SessionOrigin

log = logging.getLogger(__name__)

# After what was shown of a reply the person stopped: shown in their language, stored in
# English (the model reads it in the next turns; see `agent.turn`).
STOPPED_NOTE = N_("(stopped)")


@dataclass(frozen=True)
class Fault:
    """How a turn's model call failed: `told` when the cut reply carries its note already,
    `grown` when more than the person's message was sent."""

    error: ModelError
    told: bool
    grown: bool

    @classmethod
    def of(cls, result: TurnResult, prepared: Prepared) -> Fault | None:
        if result.error is None:
            return None
        grown = len(prepared.earlier) + len(result.messages) > 1
        return cls(result.error, told=result.truncated, grown=grown)


class Outcome:
    """Stores what each turn produced, and answers its faults."""

    def __init__(self, store: SessionBackend, sessions: OpenSessions) -> None:
        self._store = store
        self._sessions = sessions

    async def settle(
        self,
        key: str,
        asked: Asked,
        prepared: Prepared,
        result: TurnResult,
        sink: ReplySink,
        translate: Callable[[str], str] | None,
    ) -> bool:
        """Store what the turn produced (`_keep`), then answer its model fault, if any
        (`_fault`); whether its reply completed."""
        await self._keep(asked, prepared, result)
        fault = Fault.of(result, prepared)
        if fault is None:
            return True
        await self._fault(key, fault, asked.message_id, sink, translate)
        return False

    async def _keep(self, asked: Asked, prepared: Prepared, result: TurnResult) -> None:
        """Store the turn's steps after the person's message (tool steps already taken are
        kept even when a later model call failed); the history back in the session when
        it matches the store."""
        steps = [  # the user's message (index 0) is stored already
            as_stored(m, f"{asked.turn_id}:{i}") for i, m in enumerate(result.messages[1:], 1)
        ]
        kept = True
        if steps:
            written = await self._store.append_messages(
                origin=asked.origin, messages=steps, counters=counter_update(result.messages)
            )
            kept = prepared.history.add_written(steps, written)
        if kept and prepared.history.session_id == prepared.session.session_id:
            prepared.session.history = prepared.history  # the next turn starts from it

    async def _fault(
        self,
        key: str,
        fault: Fault,
        asked_id: int,
        sink: ReplySink,
        translate: Callable[[str], str] | None,
    ) -> None:
        """A model call of the turn failed: the detail to the log, one short line to the
        person (in their language), kept on their message (`asked_id`) as its answer (in
        English).

        A request too long for the model would fail again on every later turn, so
        its session ends (reason ``too_long``) and the next message starts afresh.
        A reply cut off after some text was shown is stored with its note: that is
        its answer already.
        """
        error = fault.error
        log.warning("model error in session %s: %s: %s", key, type(error).__name__, error)
        if isinstance(error, RequestTooLargeError):
            await self._sessions.end(key, "too_long")
            line = TOO_LONG_NOTE if fault.grown else MESSAGE_TOO_LONG_NOTE
        elif fault.told:
            return
        else:
            line = fault_notice(error)
        await sink.write(line if translate is None else translate(line))
        # Shown first, kept after: a stop in between answers it again (at least once).
        await self._store.record_notice(asked_id, line)

    async def stopped(self, origin: SessionOrigin, shown: str) -> None:
        """Keep what the person was shown of a reply they stopped, marked as stopped, as the
        session's answer: the next turn's history holds it, and a restart does not answer
        their message again. (Tool steps of the stopped turn are not kept.)"""
        text = f"{shown.rstrip()}\n\n{STOPPED_NOTE}" if shown.strip() else STOPPED_NOTE
        stop = NewMessage(
            role="assistant", content=text, timestamp=time.time(), key=f"{uuid.uuid4().hex}:0"
        )
        await self._store.append_messages(origin=origin, messages=[stop])
