"""The built-in history recall provider: earlier conversations, every turn.

On `prefetch` it searches the person's own past sessions for the message just
received (as `recall_scope` rules: from a direct chat, all their sessions
outside threads; inside a group, only that group's outside threads; inside a
thread, only that thread's; the current lineage left out) and returns
the few best snippets with their dates, but only when the match is strong
enough to help. Small talk recalls nothing: a message needs words that carry
meaning (not stopwords, greetings or words like "remember" and "last week"),
and a session counts only when it matched at least two of them (or the only
one there is) and scored at least `min_score`. Messages without any such word
never reach the database.

Only the first `MAX_QUERY_CHARS` characters of a message are looked at, and
at most `MAX_TERMS` words are kept (the search would ignore the rest), so the
word extraction, which runs on the event loop, costs the same for a pasted
book as for a paragraph; the search itself runs on the store's reader
threads, where it is interrupted when `prefetch` is cancelled. It runs
before every reply, so it asks for less than `/recall` does: at most
`PREFETCH_MAX_HITS` of the newest messages per word (a word said thousands of
times weighs little anyway), and `PREFETCH_SNIPPETS` snippets per conversation.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import replace
from typing import Protocol

from memory_core.providers.base import MemoryProvider, SessionContext
from memory_core.scopes import SearchScope, recall_scope
from memory_core.sessions.models import MATCH_END, MATCH_START, SearchOptions, SessionHit, Snippet
from memory_core.sessions.query import CJK_CLASS, MAX_QUERY_CHARS, MAX_TERMS, STOPWORDS

# Words that say nothing about a topic: chat small talk, and the words people
# use to ask for recall at all ("remember what we discussed last week").
_SMALL_TALK_WORDS = """
    hello hiya howdy yo sup morning afternoon evening night good great nice cool awesome
    fine well thanks thank thx ty cheers please pls sure alright right bye goodbye later
    lol lmao haha hahaha hehe wow hmm hm ah uh um welcome sorry np day today tonight
    tomorrow yesterday week weeks month months year years ago last recent recently earlier
    before time remember recall discussed discuss talked talk chat chatted conversation
    mentioned mention going doing done fun love lovely help helpful really pretty quite
    just think know want need see look going gonna wanna maybe perhaps definitely sounds
    agreed agree ok okay yep yup nope nah hey hi yes yeah remind reminded idea ideas
    stuff anyway again question questions wondering wonder
    你好 谢谢 多谢 早上好 晚上好 晚安 再见 好的 哈哈 哈哈哈 こんにちは おはよう ありがとう
    こんばんは おやすみ さようなら ございます 没问题 不客气
"""
SMALL_TALK = frozenset(_SMALL_TALK_WORDS.split())
_IGNORED = STOPWORDS | SMALL_TALK
_IS_CJK = re.compile(rf"[{CJK_CLASS}]")
_CJK_SMALL_TALK = re.compile(
    "|".join(sorted((w for w in SMALL_TALK if _IS_CJK.match(w)), key=len, reverse=True))
)
_TOKEN = re.compile(rf"[{CJK_CLASS}]+|[^\W_]+")
_MARKED = re.compile(f"{re.escape(MATCH_START)}(.*?){re.escape(MATCH_END)}", re.DOTALL)
_SPACE = re.compile(r"\s+")
PREFETCH_MAX_HITS = 500
PREFETCH_SNIPPETS = 2
_SUFFIXES = ("ations", "ation", "ments", "ment", "ings", "ing", "edly", "ed", "es", "s", "e")


class SessionSearcher(Protocol):
    """The part of the session store this provider needs."""

    async def search(
        self, query: str, scope: SearchScope, options: SearchOptions = ...
    ) -> list[SessionHit]: ...


def meaningful_terms(text: str) -> list[str]:
    """The words of `text` that could name a topic, lower-cased, in order, once each."""
    # CJK has no spaces: cut greetings out of a run ("你好吗" leaves "吗", too short)
    text = _CJK_SMALL_TALK.sub(" ", text[:MAX_QUERY_CHARS].casefold())
    terms: dict[str, None] = {}  # ordered, and a membership test costs O(1)
    for found in _TOKEN.finditer(text):
        token = found.group()
        cjk = bool(_IS_CJK.match(token))
        if token in _IGNORED or len(token) < (2 if cjk else 3) or token.isdigit():
            continue
        terms[token] = None
        if len(terms) == MAX_TERMS:
            break
    return list(terms)


def _stem(word: str) -> str:
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def _covers(term: str, matched: str) -> bool:
    """Whether a word the index matched stands for the query term (stemming aside)."""
    if _IS_CJK.match(term):
        return len(matched) >= 2 and matched in term
    a, b = _stem(term), _stem(matched)
    return a == b or (min(len(a), len(b)) >= 4 and (a.startswith(b) or b.startswith(a)))


def matched_terms(terms: Sequence[str], snippets: Sequence[Snippet]) -> set[str]:
    """The query terms that the index marked as matches in `snippets`."""
    marked = {m.casefold() for s in snippets for m in _MARKED.findall(s.text)}
    return {t for t in terms if any(_covers(t, m) for m in marked)}


class HistoryRecallProvider(MemoryProvider):
    """Recalls snippets of the person's earlier conversations for the coming turn."""

    name = "history"

    def __init__(
        self,
        store: SessionSearcher,
        *,
        max_sessions: int = 3,
        snippets_per_session: int = 2,
        snippet_chars: int = 240,
        min_score: float = 0.0,
        search_limit: int = 4,
        max_hits_per_term: int = PREFETCH_MAX_HITS,
        search_snippets: int = PREFETCH_SNIPPETS,
    ) -> None:
        self._store = store
        self._max_sessions = max_sessions
        self._snippets_per_session = snippets_per_session
        self._snippet_chars = snippet_chars
        self._min_score = min_score
        self._options = SearchOptions(
            limit=search_limit,
            max_hits_per_term=max_hits_per_term,
            snippets_per_hit=search_snippets,
        )
        self._session: SessionContext | None = None

    async def initialize(self, session: SessionContext) -> None:
        self._session = session

    async def prefetch(self, query: str) -> str:
        session = self._session
        terms = meaningful_terms(query)
        if session is None or not terms:
            return ""
        scope = recall_scope(
            session.user_key, session.chat_id, session.chat_type, session.thread_id
        )
        options = replace(self._options, exclude_lineage_of=session.session_id)
        hits = await self._store.search(" ".join(terms), scope, options)
        needed = min(2, len(terms))
        strong = [
            (hit, found)
            for hit in hits
            if hit.score >= self._min_score
            and len(found := matched_terms(terms, hit.snippets)) >= needed
        ]
        if not strong:
            return ""
        lines = ["Earlier conversations with this user that may be relevant:"]
        for hit, _ in strong[: self._max_sessions]:
            lines.append(self._render(hit, terms))
        return "\n".join(lines)

    async def erase_user(self, user_key: str) -> None:
        """Nothing of its own to erase: it reads the session store, erased with it."""

    def _render(self, hit: SessionHit, terms: Sequence[str]) -> str:
        best = sorted(hit.snippets, key=lambda s: (-len(matched_terms(terms, [s])), s.timestamp))[
            : self._snippets_per_session
        ]
        best = sorted(best, key=lambda s: s.timestamp)
        parts = [f"{s.role}: {self._clean(s.text)}" for s in best]
        return f"- {_date(best[0].timestamp if best else hit.started_at)}: " + " / ".join(parts)

    def _clean(self, text: str) -> str:
        plain = _SPACE.sub(" ", text.replace(MATCH_START, "").replace(MATCH_END, "")).strip()
        if len(plain) <= self._snippet_chars:
            return plain
        return plain[: self._snippet_chars - 1].rstrip() + "…"


def _date(timestamp: float) -> str:
    return time.strftime("%Y-%m-%d", time.gmtime(timestamp))
