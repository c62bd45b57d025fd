"""What a background run did, kept as an internal session an operator can audit.

A review or extraction run that called a tool is stored as a session of its
own, source ``review`` or ``extraction``, owned by the person whose
conversation it read, titled after that session, and ended at once. Recall
never shows it (`session_search` and `/recall` leave internal sources out), it
is never extracted itself, and erasing the person erases it. The reviewed
session's transcript is never touched.
"""

from __future__ import annotations

import uuid
from typing import Literal

from gateway.agent.transcript import as_stored
from gateway.agent.turn import TurnResult
from gateway.jobs.context import JobContext
from memory_core import SessionInfo, SessionOrigin

RunSource = Literal["review", "extraction"]


async def record_run(
    ctx: JobContext, source: RunSource, read: SessionInfo, result: TurnResult
) -> int | None:
    """Store `result` as an ended internal session; its id, or None when no tool was called."""
    if not any(message.tool_calls for message in result.messages):
        return None
    run = uuid.uuid4().hex
    origin = SessionOrigin(
        session_key=f"{source}:{read.id}:{run}",
        source=source,
        user_key=read.user_key,
        chat_id=read.chat_id,
        chat_type=read.chat_type,
        thread_id=read.thread_id,
        model=ctx.model.model,
        title=f"{source} of session {read.id}",
    )
    messages = [as_stored(m, f"{run}:{i}") for i, m in enumerate(result.messages)]
    appended = await ctx.sessions.append_messages(origin=origin, messages=messages)
    await ctx.sessions.end_session(appended.session_id, "done")
    return appended.session_id
