"""`/recall <what>`: recaps of the person's own earlier conversations.

The same search as the model's `session_search` tool (`search_history`),
under the person's `recall_scope` (in a thread or forum topic only that
thread, in a group only that group outside threads), leaving out
the conversation going on now. A time phrase in the text ("last week",
"yesterday", "in March", "3 days ago", 上周, 昨天, 三月, "la semana pasada")
narrows the window; it is read at the person's now, in their zone and in
their language (then English and Chinese). The conversations found are shown
newest first, each with its date (the person's calendar day); when none is
found the reply says so, with the place and window that were searched. In a
private chat the entries moved out of the person's full USER.md (its archive)
that hold every searched word are listed after them.

With only a time phrase (`/recall 上周`) it lists that window's conversations
(`list_window`: the same scope and exclusions), newest first, each with its
date and a one-line recap, at most `MAX_LISTED`, saying how many more there were.
Every line is in the person's language.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence

from gateway.agent.recall import (
    MAX_LIMIT,
    MAX_QUERY_CHARS,
    RecalledSession,
    RecallQuery,
    RecallResult,
    Recapper,
    search_history,
)
from gateway.agent.recall_window import ListedSession, WindowListing, list_window
from gateway.commands.registry import Command, CommandContext, CommandReply
from gateway.i18n import N_
from gateway.messages import CommandArgument
from gateway.person_locale import PersonLocale
from memory_core import (
    STOPWORDS,
    ArchivedEntry,
    MemoryBackend,
    SearchOptions,
    SearchScope,
    SessionBackend,
    SessionStoreError,
    TimeWindow,
    parse_time_phrase,
)

log = logging.getLogger(__name__)

ONLY_HERE = N_(
    'Only this conversation mentions "{query}" so far; /recall looks in our earlier ones.'
)

USAGE = N_(
    "/recall <what> searches our earlier conversations and recaps what was said, newest "
    "first. Add a time to narrow it: '/recall kubernetes last week', '/recall the trip "
    "in March', '/recall 健身 上周'. A time alone ('/recall last week') lists that time's "
    "conversations. In a group only this group's conversations are searched, in a thread "
    "only this thread's."
)
UNREADABLE = N_("I can't read our past conversations right now; try again later.")
_WORD = re.compile(r"\w+")
_SYNTAX = re.compile(r'[*^():"]|\b(?:AND|OR|NOT|NEAR)\b')
_MODEL_LANGUAGE = {"en": "English", "zh": "Simplified Chinese", "es": "Spanish"}
_ROLE = {"user": N_("you"), "assistant": N_("me")}


def recall_command(
    sessions: SessionBackend,
    recapper: Recapper,
    timeout: float,
    memory: MemoryBackend | None = None,
) -> Command:
    """/recall over `sessions`, its recaps written by `recapper` within `timeout` seconds;
    in a private chat also over the person's archive in `memory` (`archived_matches`)."""

    async def recall(ctx: CommandContext) -> CommandReply:
        locale = ctx.locale
        text = ctx.args.strip()
        if not text:
            return CommandReply(locale._(USAGE))
        now = locale.now()
        window = parse_time_phrase(text[:MAX_QUERY_CHARS], now, languages=_languages(locale))
        words = _WORD.findall(window.query.casefold())
        try:
            current = await sessions.current_session(ctx.identity.session_key)
            if not words and (window.since is not None or window.until is not None):
                listing = await list_window(
                    sessions,
                    recapper,
                    ctx.identity.scope,
                    window.since,
                    window.until,
                    exclude_lineage_of=current.id if current is not None else None,
                    timeout=timeout,
                    language=_MODEL_LANGUAGE.get(locale.language),
                )
                return CommandReply(_listing(listing, ctx.identity.scope, locale))
            refused = _refusal(words, locale)
            if refused is not None:
                return CommandReply(refused)
            query = RecallQuery(window.query, window.since, window.until, limit=MAX_LIMIT)
            result = await search_history(
                sessions,
                recapper,
                query,
                ctx.identity.scope,
                exclude_lineage_of=current.id if current is not None else None,
                timeout=timeout,
                now=now,
            )
            if (
                not result.sessions
                and current is not None
                and await _only_here(sessions, query, ctx.identity.scope)
            ):
                return CommandReply(locale._(ONLY_HERE, query=result.query))
        except SessionStoreError as exc:
            log.warning("/recall failed: %s: %s", type(exc).__name__, exc)
            return CommandReply(locale._(UNREADABLE))
        syntax = _SYNTAX.search(text) is not None
        reply = _render(result, ctx.identity.scope, locale, syntax=syntax)
        if memory is not None and ctx.message.chat_type == "private":  # USER.md stays private
            reply += _archived(memory.archived(ctx.identity.user_key), window, locale)
        return CommandReply(reply)

    return Command(
        "recall",
        N_("search our past conversations, e.g. /recall kubernetes last week"),
        recall,
        arguments=(CommandArgument("what", N_("what to look for, optionally with a time"), True),),
    )


async def _only_here(sessions: SessionBackend, query: RecallQuery, scope: SearchScope) -> bool:
    """Whether the conversation left out (the current one) is what matches `query`: the
    same search, the current conversation included, finds something."""
    options = SearchOptions(limit=1, snippets_per_hit=0, since=query.since, until=query.until)
    return bool(await sessions.search(query.text, scope, options))


def _languages(locale: PersonLocale) -> tuple[str, ...]:
    """Whose time phrases are read: the person's language, then English and Chinese."""
    return tuple(dict.fromkeys((locale.language, "en", "zh")))


def archived_matches(archived: Sequence[ArchivedEntry], query: str) -> list[ArchivedEntry]:
    """The archived entries holding every word of `query` but the common ones, newest first.

    A plain case-insensitive match of each word inside the entry's text (so a CJK
    word is found inside a longer run); the archive has no dates to narrow by.
    """
    words = [w for w in _WORD.findall(query.casefold()) if w not in STOPWORDS]
    if not words:
        return []
    return [a for a in reversed(archived) if all(w in a.text.casefold() for w in words)]


def _archived(archived: Sequence[ArchivedEntry], window: TimeWindow, locale: PersonLocale) -> str:
    found = archived_matches(archived, window.query)
    if not found:
        return ""
    lines = "\n".join(f"- {a.text}" for a in found)
    heading = locale._("In what I moved out of a full memory (/memory archive):")
    return f"\n\n{heading}\n{lines}"


def _refusal(words: list[str], locale: PersonLocale) -> str | None:
    """Why the words left once the time phrase is read search for nothing (None: they do)."""
    if not words:
        return locale._("There is nothing to search for in that.") + " " + locale._(USAGE)
    if all(word in STOPWORDS for word in words):
        return locale._(
            "Those are only common words, which match almost everything; "
            "add a word that names the subject, e.g. /recall the dentist appointment"
        )
    return None


def _render(result: RecallResult, scope: SearchScope, locale: PersonLocale, *, syntax: bool) -> str:
    where = _searched(scope, result.since, result.until, locale)
    note = (
        "\n" + locale._("(Search operators such as OR, NOT, * and quotes are read as plain words.)")
        if syntax
        else ""
    )
    if not result.sessions:
        return locale._('Nothing found for "{query}" {where}.', query=result.query, where=where)
    newest = sorted(result.sessions, key=lambda s: (s.started_at, s.session_id), reverse=True)
    head = locale._(
        'What I found for "{query}" {where}, newest first:', query=result.query, where=where
    )
    parts = [head, *(_item(session, locale) for session in newest)]
    return "\n\n".join(parts) + note


def _item(session: RecalledSession, locale: PersonLocale) -> str:
    head = _head(locale.day(session.started_at), session.source, session.chat_type, locale)
    if session.recap is not None:
        return _after(head, session.recap)
    roles = {role: locale._(name) for role, name in _ROLE.items()}
    lines = [f"- {roles.get(s.role, s.role)}: {s.text}" for s in session.snippets]
    return "\n".join([_after(head, locale._("(no recap: matching messages)")), *lines])


def _head(date: str, source: str, chat_type: str, locale: PersonLocale) -> str:
    if chat_type == "group":
        return locale._("{date} ({source}, a group):", date=date, source=source)
    return locale._("{date} ({source}, a private chat):", date=date, source=source)


def _after(head: str, text: str) -> str:
    """`text` after its heading: a space, but none after a full-width colon (Chinese)."""
    return head + text if head.endswith("：") else f"{head} {text}"


def _listing(listing: WindowListing, scope: SearchScope, locale: PersonLocale) -> str:
    """A window's conversations, newest first, or that there were none."""
    where = _searched(scope, listing.since, listing.until, locale)
    if not listing.sessions:
        return locale._("No conversations {where}.", where=where)
    parts = [locale._("Our conversations {where}, newest first:", where=where)]
    parts.extend(_listed(session, locale) for session in listing.sessions)
    if listing.more:
        parts.append(
            locale.n_(
                "…and {n} more conversation from that time; add a subject or a shorter "
                "time to see it.",
                "…and {n} more conversations from that time; add a subject or a shorter "
                "time to see them.",
                listing.more,
            )
        )
    return "\n\n".join(parts)


def _listed(session: ListedSession, locale: PersonLocale) -> str:
    head = _head(locale.day(session.last_at), session.source, session.chat_type, locale)
    if session.kind == "recap":
        return _after(head, session.line)
    if not session.line:
        return _after(head, locale._("(no recap)"))
    return _after(head, locale._("(no recap; it began with) “{words}”", words=session.line))


def _searched(
    scope: SearchScope, since: float | None, until: float | None, locale: PersonLocale
) -> str:
    """Where and when the search looked: a thread or group names itself, then the dates."""
    timed = since is not None or until is not None
    if scope.thread_id is not None:
        if not timed:
            return locale._("in this thread's past conversations")
        return locale._("in this thread, {window}", window=_window(since, until, locale))
    if scope.chat_id is not None:
        if not timed:
            return locale._("in this group's past conversations")
        return locale._("in this group, {window}", window=_window(since, until, locale))
    return _window(since, until, locale)


def _window(since: float | None, until: float | None, locale: PersonLocale) -> str:
    """'in all our past conversations', or the person's days searched ('until' is exclusive)."""
    if since is None and until is None:
        return locale._("in all our past conversations")
    start = locale.day(since) if since is not None else None
    end = locale.day(until - 1) if until is not None else None  # the last day included
    if start is not None and end is not None:
        if start == end:
            return locale._("on {day}", day=start)
        return locale._("from {start} to {end}", start=start, end=end)
    if start is not None:
        return locale._("since {start}", start=start)
    return locale._("up to {end}", end=end)
