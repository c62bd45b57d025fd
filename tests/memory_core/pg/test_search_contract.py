"""Search contract: the same conversations in SessionStore and PgSessionStore, the same hits.

Both stores are loaded once for the module with the same conversations (Alice
in her private chat, in a group with and without a thread, an internal review
session, a continued lineage; Bob in his own chat), then a fixed list of
queries, written before anyone looked at what they return, runs on both. The
hits must be identical: the same conversations in the same order with the
same scores and snippets (session and message ids may differ between stores,
so they are compared by what the sessions are).
"""

from __future__ import annotations

import contextlib
import itertools
import sqlite3
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from memory_core.pg.database import PgDatabase
from memory_core.pg.session_search_terms import collect_hits as pg_collect_hits
from memory_core.pg.sessions import PgSessionStore
from memory_core.scopes import ChatType, SearchScope
from memory_core.sessions.backend import SessionBackend
from memory_core.sessions.matching import collect_hits
from memory_core.sessions.models import (
    DEFAULT_SEARCH_OPTIONS,
    NewMessage,
    SearchOptions,
    SessionHit,
    SessionOrigin,
)
from memory_core.sessions.query import parse_query
from memory_core.sessions.sql import POSTGRES, SQLITE, ScopeFilter
from memory_core.sessions.store import SessionStore
from tests.postgres import schema_url

pytestmark = pytest.mark.asyncio(loop_scope="module")

ALICE, BOB = "telegram-1001", "telegram-2002"
GROUP = "-500"
LOGS = "\n".join(f"2024-05-0{n % 9 + 1} pod/web-{n} error: connection refused" for n in range(400))

Turn = tuple[str, float, list[tuple[str, str]]]  # name, time, (role, text) messages


def _origin(
    user: str, chat: str, *, thread: str | None = None, source: str = "telegram"
) -> SessionOrigin:
    chat_type: ChatType = "private" if chat == user else "group"
    key = f"{source}:{chat_type}:{chat}:{thread or ''}:{user}"
    return SessionOrigin(key, source, user, chat, chat_type, thread_id=thread)


ALICE_PRIVATE = _origin(ALICE, ALICE)
CONVERSATIONS: list[tuple[SessionOrigin, Turn]] = [
    (
        ALICE_PRIVATE,
        (
            "release",
            1000.0,
            [
                ("user", "We are deploying the new release to the kubernetes cluster tonight."),
                (
                    "assistant",
                    "Good luck with the deploy! Remember to check the kubectl context first.",
                ),
            ],
        ),
    ),
    (
        ALICE_PRIVATE,
        (
            "failure",
            2000.0,
            [
                ("user", "The deployment failed again, the pods are in CrashLoopBackOff."),
                ("assistant", "Let's look at the logs of the failing pod."),
                ("tool", LOGS),
                ("assistant", "The logs say the connection to postgres was refused."),
            ],
        ),
    ),
    (
        ALICE_PRIVATE,
        (
            "by-hand",
            3000.0,
            [
                ("user", "I deployed it by hand in the end and it worked."),
            ],
        ),
    ),
    (
        ALICE_PRIVATE,
        (
            "chinese",
            4000.0,
            [
                ("user", "我们昨天部署失败了，需要迁移数据库"),
                ("assistant", "部署之前先备份数据库。迁移失败的话可以回滚。"),
            ],
        ),
    ),
    (
        ALICE_PRIVATE,
        (
            "cafe",
            5000.0,
            [
                (
                    "user",
                    "Meet me at the café on Rue de Rivoli, the naïve art exhibition is nearby.",
                ),
                ("assistant", "I love that cafe, their crème brûlée is great."),
            ],
        ),
    ),
    (
        ALICE_PRIVATE,
        (
            "party",
            6000.0,
            [
                ("user", "Party time 🎉🎉🎉 we shipped it! 🚀"),
                ("assistant", "Congrats 🎉 well done"),
            ],
        ),
    ),
    (
        ALICE_PRIVATE,
        (
            "email",
            7000.0,
            [
                ("user", "My e-mail is alice@example.com and I use node.js for the backend."),
            ],
        ),
    ),
    (
        ALICE_PRIVATE,
        (
            "sister",
            8000.0,
            [
                ("user", "Remember my sister's birthday is on March 3rd, she likes sunflowers 🌻"),
                ("assistant", "Noted: your sister's birthday, March 3rd, sunflowers."),
            ],
        ),
    ),
    (
        ALICE_PRIVATE,
        (
            "mnemo",
            9000.0,
            [
                ("user", "The project Mnemo uses SQLite, and maybe PostgreSQL later."),
            ],
        ),
    ),
    (
        ALICE_PRIVATE,
        (
            "japanese",
            10000.0,
            [
                ("user", "日本語のテキスト: デプロイに失敗しました"),
            ],
        ),
    ),
    (
        _origin(ALICE, GROUP),
        (
            "group",
            11000.0,
            [
                ("user", "In the group: the kubernetes upgrade is scheduled for Friday."),
                ("assistant", "Friday it is, the deploy window opens at noon."),
            ],
        ),
    ),
    (
        _origin(ALICE, GROUP, thread="42"),
        (
            "thread",
            12000.0,
            [
                ("user", "Thread talk: deploy the staging environment on Monday."),
            ],
        ),
    ),
    (
        _origin(ALICE, ALICE, source="review"),
        (
            "review",
            13000.0,
            [
                ("assistant", "Review: Alice keeps deploying on Fridays."),
            ],
        ),
    ),
    (
        _origin(BOB, BOB),
        (
            "bob",
            1500.0,
            [
                ("user", "Bob here: deploying kubernetes is my secret hobby 🎉🎉🎉, café café"),
                ("user", "bob's deployment failed, 部署失败, sunflowers everywhere"),
            ],
        ),
    ),
]
CONTINUED = ("continued", 14000.0, [("user", "Continuing: the rollback of the deployment worked.")])

SCOPES = {
    "alice": SearchScope(ALICE),
    "private": SearchScope(ALICE, ALICE),
    "group": SearchScope(ALICE, GROUP, outside_threads=True),
    "thread": SearchScope(ALICE, GROUP, thread_id="42"),
    "bob": SearchScope(BOB),
}
OPTIONS = {
    "default": SearchOptions(),
    "early": SearchOptions(until=4500.0),
    "late": SearchOptions(since=4500.0),
    "one": SearchOptions(limit=1, snippets_per_hit=1),
    "internal": SearchOptions(include_internal=True),
    "few-hits": SearchOptions(max_hits_per_term=2),
    "no-snippets": SearchOptions(snippets_per_hit=0),
}

# (query, scope, options): fixed before any result was seen.
QUERIES = [
    ("deploy", "alice", "default"),
    ("deployed", "alice", "default"),
    ("deploying", "private", "default"),
    ("deployment failed", "alice", "default"),
    ('"deployment failed"', "alice", "default"),
    ('"failed deployment"', "alice", "default"),
    ('"by hand"', "private", "default"),
    ("kubernetes", "alice", "default"),
    ("kube", "alice", "default"),
    ("kubectl context", "private", "default"),
    ("logs connection refused", "alice", "default"),
    ("postgres", "alice", "default"),
    ("postg", "alice", "default"),
    ("sunflowers", "alice", "default"),
    ("sunflow", "alice", "default"),
    ("birthday of my sister", "private", "default"),
    ("sqlite postgresql", "alice", "default"),
    ("the", "alice", "default"),
    ("what did I say about the release", "alice", "default"),
    ("CrashLoopBackOff", "alice", "default"),
    ("node.js", "alice", "default"),
    ("e-mail", "alice", "default"),
    ("alice@example.com", "alice", "default"),
    ("部署失败", "alice", "default"),
    ('"部署失败"', "alice", "default"),
    ("迁移", "alice", "default"),
    ("部", "alice", "default"),
    ("数据库", "private", "default"),
    ("デプロイ", "alice", "default"),
    ("🎉", "alice", "default"),
    ("🎉🎉🎉", "alice", "default"),
    ("🚀", "alice", "default"),
    ("🌻 birthday", "alice", "default"),
    ("café", "alice", "default"),
    ("cafe", "alice", "default"),
    ("naive creme brulee", "alice", "default"),
    ("deploy 🎉 café", "alice", "default"),
    ("nothingmatcheshere", "alice", "default"),
    ("!!!", "alice", "default"),
    ("AND OR NOT NEAR(deploy deploy*", "alice", "default"),
    ("rollback", "alice", "default"),
    ("deploy", "alice", "early"),
    ("deploy", "alice", "late"),
    ("deploy", "alice", "one"),
    ("deploy", "alice", "internal"),
    ("deploy failed logs", "alice", "few-hits"),
    ("deploy", "alice", "no-snippets"),
    ("deploy kubernetes", "group", "default"),
    ("deploy staging", "thread", "default"),
    ("deploy", "private", "default"),
    ("deploy 🎉 café 部署失败 sunflowers", "bob", "default"),
]


@dataclass
class Loaded:
    store: SessionBackend
    ids: dict[str, int]  # session id by conversation name

    async def search(
        self, query: str, scope: SearchScope, options: SearchOptions = DEFAULT_SEARCH_OPTIONS
    ) -> list[SessionHit]:
        return await self.store.search(query, scope, options)


async def load(store: SessionBackend, conversations: list[tuple[SessionOrigin, Turn]]) -> Loaded:
    """Each conversation its own ended session; "by-hand" continued by a child session."""
    ids: dict[str, int] = {}
    keys = itertools.count()
    for where, (name, start, messages) in conversations:
        batch = [
            NewMessage(role=role, content=text, timestamp=start + n, key=f"m{next(keys)}")
            for n, (role, text) in enumerate(messages)
        ]
        ids[name] = (await store.append_messages(origin=where, messages=batch)).session_id
        if name == "by-hand":
            child, start, messages = CONTINUED
            more = [NewMessage(role=r, content=t, timestamp=start, key="c") for r, t in messages]
            ids[child] = await store.start_child_session(ids[name], messages=more)
            await store.end_session(ids[child], "test")
        else:
            await store.end_session(ids[name], "test")
    assert len(set(ids.values())) == len(ids)
    return Loaded(store, ids)


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def stores(
    tmp_path_factory: pytest.TempPathFactory, pg_shared: str
) -> AsyncIterator[tuple[Loaded, Loaded]]:
    import psycopg

    schema = "t_search_contract"
    with psycopg.connect(pg_shared, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        conn.execute(f'CREATE SCHEMA "{schema}"')
    path: Path = tmp_path_factory.mktemp("search") / "state.db"
    try:
        async with (
            PgDatabase(schema_url(pg_shared, schema), max_size=2) as db,
            SessionStore(path, clock=lambda: 20000.0) as lite,
            PgSessionStore(db, clock=lambda: 20000.0) as pg,
        ):
            yield await load(lite, CONVERSATIONS), await load(pg, CONVERSATIONS)
    finally:
        with psycopg.connect(pg_shared, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def comparable(hits: list[SessionHit], ids: dict[str, int]) -> list[tuple[Any, ...]]:
    """The hits without store-specific ids: the conversation's name, and everything else."""
    names = {session_id: name for name, session_id in ids.items()}
    return [
        (
            names[hit.session_id],
            hit.source,
            hit.chat_id,
            hit.chat_type,
            hit.started_at,
            hit.ended_at,
            hit.external_id,
            hit.score,
            tuple((s.role, s.timestamp, s.text) for s in hit.snippets),
        )
        for hit in hits
    ]


@pytest.mark.parametrize(("query", "scope", "options"), QUERIES)
async def test_both_stores_return_the_same_hits(
    stores: tuple[Loaded, Loaded], query: str, scope: str, options: str
) -> None:
    found = [
        comparable(await loaded.search(query, SCOPES[scope], OPTIONS[options]), loaded.ids)
        for loaded in stores
    ]
    assert found[0] == found[1]


async def test_the_lineage_left_out_is_left_out_on_both(stores: tuple[Loaded, Loaded]) -> None:
    found = []
    for loaded in stores:
        options = SearchOptions(exclude_lineage_of=loaded.ids["continued"], max_hits_per_term=1)
        hits = await loaded.search("deployment", SCOPES["alice"], options)
        found.append(comparable(hits, loaded.ids))
    assert found[0] == found[1]
    assert found[0] and all(name not in ("by-hand", "continued") for name, *_ in found[0])


async def test_a_lineage_is_one_hit_on_both(stores: tuple[Loaded, Loaded]) -> None:
    found = [
        comparable(await loaded.search('"by hand" rollback', SCOPES["alice"]), loaded.ids)
        for loaded in stores
    ]
    assert found[0] == found[1]
    assert [name for name, *_ in found[0]] == ["by-hand"]
    assert len(found[0][0][-1]) == 2  # both messages of the lineage are its snippets


async def test_bobs_hits_are_neither_found_nor_scored_with_alices_words(
    stores: tuple[Loaded, Loaded], tmp_path: Path
) -> None:
    bob_only = [c for c in CONVERSATIONS if c[0].user_key == BOB]
    async with SessionStore(tmp_path / "bob.db", clock=lambda: 20000.0) as alone:
        ids = {}
        for where, (name, start, messages) in bob_only:
            batch = [
                NewMessage(role=r, content=t, timestamp=start + n, key=f"b{n}")
                for n, (r, t) in enumerate(messages)
            ]
            ids[name] = (await alone.append_messages(origin=where, messages=batch)).session_id
            await alone.end_session(ids[name], "test")
        query = "deploy kubernetes 🎉 café 部署失败 sunflowers"
        expected = comparable(await alone.search(query, SCOPES["bob"]), ids)
    pg = stores[1]
    assert expected and [name for name, *_ in expected] == ["bob"]
    assert comparable(await pg.search(query, SCOPES["bob"]), pg.ids) == expected


async def test_one_snippet_is_marked_like_sqlites(stores: tuple[Loaded, Loaded]) -> None:
    hits = await stores[1].search("deploying", SCOPES["private"], replace(OPTIONS["one"]))
    assert hits and ">>>" in hits[0].snippets[0].text


@pytest.mark.parametrize(
    "query", ["deploy failed", "kube", "🎉🎉🎉", "🎉", "部署失败", '"connection refused"']
)
@pytest.mark.parametrize("left_out", [None, "by-hand"])
async def test_the_hits_come_in_sqlites_order(
    stores: tuple[Loaded, Loaded], query: str, left_out: str | None
) -> None:
    """Each term's hits, in order (they break ties between snippets), by message time."""
    lite, pg = stores
    assert isinstance(lite.store, SessionStore)
    found = []
    for loaded in stores:
        session = None if left_out is None else loaded.ids[left_out]
        options = SearchOptions(exclude_lineage_of=session, max_hits_per_term=3)
        names = {session_id: name for name, session_id in loaded.ids.items()}
        if loaded is lite:
            with contextlib.closing(sqlite3.connect(lite.store.path)) as conn:
                where = ScopeFilter.build(SQLITE, SCOPES["alice"], options)
                terms, hits = collect_hits(conn, parse_query(query), where)
        else:
            async with pg.store.db.connection() as conn:  # type: ignore[attr-defined]
                where_pg = ScopeFilter.build(POSTGRES, SCOPES["alice"], options)
                terms, hits = await pg_collect_hits(conn, parse_query(query), where_pg, ALICE)
        found.append((terms, [[(names[r], ts) for _, r, ts in term] for term in hits]))
    assert found[0] == found[1]
    assert any(found[0][1])
