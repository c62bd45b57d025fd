"""`/recall <what>`: recaps of the person's own earlier conversations.

The same search as the model's `session_search` tool (`search_history`),
under the person's `recall_scope` (in a thread or forum topic only that
thread, in a group only that group outside threads), leaving out
the conversation going on now. A time phrase in the text ("last week",
"yesterday", "in March", "3 days ago", 上周, 昨天, 三月) narrows the window.
The conversations found are shown newest first, each with its date; when
none is found the reply says so, with the place and window that were searched.
In a private chat the entries moved out of the person's full USER.md (its
archive) that hold every searched word are listed after them.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from gateway.agent.recall import (
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    RecalledSession,
    RecallQuery,
    RecallResult,
    Recapper,
    search_history,
)
from gateway.commands.registry import Command, CommandContext, CommandReply
from gateway.messages import CommandArgument
from memory_core import (
    STOPWORDS,
    ArchivedEntry,
    FileMemoryStore,
    SearchScope,
    SessionStore,
    SessionStoreError,
    TimeWindow,
    parse_time_phrase,
)

log = logging.getLogger(__name__)

USAGE = (
    "/recall <what> searches our earlier conversations and recaps what was said, newest "
    "first. Add a time to narrow it: '/recall kubernetes last week', '/recall the trip "
    "in March', '/recall 健身 上周'. In a group only this group's conversations are searched, "
    "in a thread only this thread's."
)
_WORD = re.compile(r"\w+")
_SYNTAX = re.compile(r'[*^():"]|\b(?:AND|OR|NOT|NEAR)\b')


def recall_command(
    sessions: SessionStore,
    recapper: Recapper,
    timeout: float,
    memory: FileMemoryStore | None = None,
) -> Command:
    """/recall over `sessions`, its recaps written by `recapper` within `timeout` seconds;
    in a private chat also over the person's archive in `memory` (`archived_matches`)."""

    async def recall(ctx: CommandContext) -> CommandReply:
        text = ctx.args.strip()
        if not text:
            return CommandReply(USAGE)
        now = datetime.now(UTC)
        window = parse_time_phrase(text[:MAX_QUERY_CHARS], now)
        refused = _refusal(window)
        if refused is not None:
            return CommandReply(refused)
        query = RecallQuery(window.query, window.since, window.until, limit=MAX_LIMIT)
        try:
            current = await sessions.current_session(ctx.identity.session_key)
            result = await search_history(
                sessions,
                recapper,
                query,
                ctx.identity.scope,
                exclude_lineage_of=current.id if current is not None else None,
                timeout=timeout,
                now=now,
            )
        except SessionStoreError as exc:
            log.warning("/recall failed: %s: %s", type(exc).__name__, exc)
            return CommandReply("I can't read our past conversations right now; try again later.")
        syntax = _SYNTAX.search(text) is not None
        reply = _render(result, ctx.identity.scope, syntax=syntax)
        if memory is not None and ctx.message.chat_type == "private":  # USER.md stays private
            found = archived_matches(memory.archived(ctx.identity.user_key), window.query)
            if found:
                lines = "\n".join(f"- {a.text}" for a in found)
                reply += f"\n\nIn what I moved out of a full memory (/memory archive):\n{lines}"
        return CommandReply(reply)

    return Command(
        "recall",
        "search our past conversations, e.g. /recall kubernetes last week",
        recall,
        arguments=(CommandArgument("what", "what to look for, optionally with a time", True),),
    )


def archived_matches(archived: Sequence[ArchivedEntry], query: str) -> list[ArchivedEntry]:
    """The archived entries holding every word of `query` but the common ones, newest first.

    A plain case-insensitive match of each word inside the entry's text (so a CJK
    word is found inside a longer run); the archive has no dates to narrow by.
    """
    words = [w for w in _WORD.findall(query.casefold()) if w not in STOPWORDS]
    if not words:
        return []
    return [a for a in reversed(archived) if all(w in a.text.casefold() for w in words)]


def _refusal(window: TimeWindow) -> str | None:
    """Why the words left once the time phrase is read search for nothing (None: they do)."""
    words = _WORD.findall(window.query.casefold())
    if not words:
        if window.since is not None or window.until is not None:
            return (
                f"What should I look for {_window(window.since, window.until)}? "
                "For example: /recall kubernetes last week"
            )
        return "There is nothing to search for in that. " + USAGE
    if all(word in STOPWORDS for word in words):
        return (
            "Those are only common words, which match almost everything; "
            "add a word that names the subject, e.g. /recall the dentist appointment"
        )
    return None


def _render(result: RecallResult, scope: SearchScope, *, syntax: bool) -> str:
    where = _searched(scope, result.since, result.until)
    note = (
        "\n(Search operators such as OR, NOT, * and quotes are read as plain words.)"
        if syntax
        else ""
    )
    if not result.sessions:
        return f'Nothing found for "{result.query}" {where}.{note}'
    newest = sorted(result.sessions, key=lambda s: (s.date, s.session_id), reverse=True)
    parts = [f'What I found for "{result.query}" {where}, newest first:']
    parts.extend(_item(session) for session in newest)
    return "\n\n".join(parts) + note


def _item(session: RecalledSession) -> str:
    place = "a group" if session.chat_type == "group" else "a private chat"
    head = f"{session.date} ({session.source}, {place}):"
    if session.recap is not None:
        return f"{head} {session.recap}"
    lines = [f"- {s.role}: {s.text}" for s in session.snippets]
    return "\n".join([head + " (no recap: matching messages)", *lines])


def _searched(scope: SearchScope, since: float | None, until: float | None) -> str:
    """Where and when the search looked: a thread or group names itself, then the dates."""
    if scope.thread_id is not None:
        place = "this thread"
    elif scope.chat_id is not None:
        place = "this group"
    else:
        return _window(since, until)
    if since is None and until is None:
        return f"in {place}'s past conversations"
    return f"in {place}, {_window(since, until)}"


def _window(since: float | None, until: float | None) -> str:
    """'in all our past conversations', or the dates searched ('until' is exclusive)."""
    if since is None and until is None:
        return "in all our past conversations"
    start = _day(since) if since is not None else None
    end = _day(until - 1) if until is not None else None  # the last day included
    if start is not None and end is not None:
        return f"on {start}" if start == end else f"from {start} to {end}"
    return f"since {start}" if start is not None else f"up to {end}"


def _day(timestamp: float) -> str:
    return (datetime(1970, 1, 1, tzinfo=UTC) + timedelta(seconds=timestamp)).date().isoformat()
