"""The state.db schema: tables, full-text indexes, triggers and migrations.

The schema is numbered. `migrate()` brings a database of any older version up
to `SCHEMA_VERSION` by running the forward steps in order, each in the same
transaction as the version bump, so a crash mid-migration leaves the previous
version intact. A database newer than this code is refused.

Two FTS5 indexes read the `messages` table through views (external content),
each with the message text and an `owner` column (see `owner_token`):

- `messages_fts`: words, `porter unicode61` (stemmed, diacritics folded).
  Tool output is indexed only up to `TOOL_INDEX_CHARS` characters. Since v6
  each Chinese/Japanese/Korean run is indexed as its overlapping bigrams and
  its last character (`query.cjk_words`), so CJK text is searched by words.
  Since v10 a third column, `about`, holds the message's date and speaker as
  words (`word_index`).
- `messages_trigram`: `trigram`, for emoji and symbols (`query.SYMBOL_CLASS`),
  matched as substrings. Since v6 only rows holding one are in it (before,
  every row with non-ASCII text, for CJK), and no tool rows.

The word index's values are computed twice, with the same tokens: by the SQL
functions `mnemo_cjk_words` and `mnemo_about_words` (Python, fast;
`register_functions` adds them to a connection) in the triggers, the
bulk-load helper and the v10 rebuild, and by plain SQL (`word_index`) in the
view the index reads as its content, so that any connection, one without our
functions too, can run FTS5's integrity check or a 'rebuild'.

One insert, one delete and one update trigger keep both in sync (and the
per-session message counts). What each later version added to the rows (the
stored prompt and review counters, extraction progress, fault notices, own
words, the mark of a person's message not answered yet) is said beside its
migration below. Bulk loads drop the insert trigger, insert, index the new
rows in one statement and put the trigger back (`drop_insert_trigger` /
`index_rows_after` / `create_insert_trigger`), all inside the caller's
transaction.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from dataclasses import dataclass

from memory_core.errors import IndexIntegrityError, SchemaVersionError
from memory_core.sessions.query import cjk_words
from memory_core.sessions.sql.edits import WRONG_MESSAGE_COUNTS
from memory_core.sessions.word_index import (
    INDEX_WORDS_AFTER,
    INSERT_TRIGGER,
    V10,
    about_words,
    owner_token,
)

SCHEMA_VERSION = 13
WORD_INDEX = "messages_fts"
TRIGRAM_INDEX = "messages_trigram"


# Every migration is frozen as the literal text databases were migrated with,
# byte for byte, and a test pins each one by sha256: change the schema by
# adding a migration, never by editing an old one.

_V1 = """
CREATE TABLE sessions (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    user_key TEXT NOT NULL,
    chat_id TEXT NOT NULL,
    chat_type TEXT NOT NULL CHECK (chat_type IN ('private', 'group')),
    thread_id TEXT,
    session_key TEXT,
    title TEXT,
    model TEXT,
    started_at REAL NOT NULL,
    ended_at REAL,
    end_reason TEXT,
    parent_session_id INTEGER REFERENCES sessions(id)
);
CREATE INDEX sessions_user_chat ON sessions(user_key, chat_id);
CREATE INDEX sessions_parent ON sessions(parent_session_id);
CREATE TABLE messages (
    id INTEGER PRIMARY KEY,
    session_id INTEGER NOT NULL REFERENCES sessions(id),
    role TEXT NOT NULL,
    content TEXT NOT NULL DEFAULT '',
    tool_name TEXT,
    tool_calls TEXT,
    tool_call_id TEXT,
    timestamp REAL NOT NULL,
    platform_message_id TEXT,
    speaker_name TEXT
);
CREATE INDEX messages_session ON messages(session_id, timestamp);
CREATE VIEW messages_fts_source AS
    SELECT id, CASE WHEN role = 'tool' THEN substr(content, 1, 8192) ELSE content END
        AS content
    FROM messages;
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, content='messages_fts_source', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE TRIGGER messages_fts_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id,
        CASE WHEN new.role = 'tool' THEN substr(new.content, 1, 8192) ELSE new.content END);
END;
CREATE TRIGGER messages_fts_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id,
        CASE WHEN old.role = 'tool' THEN substr(old.content, 1, 8192) ELSE old.content END);
END;
CREATE TRIGGER messages_fts_au AFTER UPDATE OF id, role, content ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id,
        CASE WHEN old.role = 'tool' THEN substr(old.content, 1, 8192) ELSE old.content END);
    INSERT INTO messages_fts(rowid, content) VALUES (new.id,
        CASE WHEN new.role = 'tool' THEN substr(new.content, 1, 8192) ELSE new.content END);
END;
"""

# v2: the trigram index, for CJK text and substrings.
_V2 = """
CREATE VIEW messages_trigram_source AS
    SELECT id, content FROM messages WHERE role != 'tool';
CREATE VIRTUAL TABLE messages_trigram USING fts5(
    content, content='messages_trigram_source', content_rowid='id', tokenize='trigram'
);
INSERT INTO messages_trigram(messages_trigram) VALUES ('rebuild');
DROP TRIGGER messages_fts_ai;
DROP TRIGGER messages_fts_ad;
DROP TRIGGER messages_fts_au;
CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content) VALUES (new.id,
        CASE WHEN new.role = 'tool' THEN substr(new.content, 1, 8192) ELSE new.content END);
    INSERT INTO messages_trigram(rowid, content)
        SELECT new.id, new.content WHERE new.role != 'tool';
END;
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content) VALUES ('delete', old.id,
        CASE WHEN old.role = 'tool' THEN substr(old.content, 1, 8192) ELSE old.content END);
    INSERT INTO messages_trigram(messages_trigram, rowid, content)
        SELECT 'delete', old.id, old.content WHERE old.role != 'tool';
END;
"""

# v3: lineage roots, import ids, idempotency keys, one open session per routing
# key, per-session message counts, and an owner column in both indexes. The
# owner column holds a token derived from the user key (`owner_token`), so
# that FTS5 itself narrows a match to one person's rows before SQL applies
# the scope; the scope in SQL stays the rule, the token is only a shortcut.
# This is the text v3 shipped with; two later refactors of the shared pieces
# re-spaced its trigger bodies, which v6 drops again.
_V3 = """
ALTER TABLE sessions ADD COLUMN root_id INTEGER;
ALTER TABLE sessions ADD COLUMN external_id TEXT;
ALTER TABLE sessions ADD COLUMN owner_token TEXT;
ALTER TABLE sessions ADD COLUMN message_count INTEGER NOT NULL DEFAULT 0;
ALTER TABLE messages ADD COLUMN dedupe_key TEXT;
WITH RECURSIVE lineage(id, root) AS (
    SELECT id, id FROM sessions WHERE parent_session_id IS NULL
    UNION ALL
    SELECT s.id, lineage.root FROM sessions s JOIN lineage ON s.parent_session_id = lineage.id
)
UPDATE sessions SET root_id = (SELECT root FROM lineage WHERE lineage.id = sessions.id);
UPDATE sessions SET root_id = id WHERE root_id IS NULL;
UPDATE sessions SET owner_token = mnemo_owner_token(user_key),
    message_count = (SELECT count(*) FROM messages WHERE session_id = sessions.id);
CREATE INDEX sessions_root ON sessions(root_id);
CREATE UNIQUE INDEX sessions_external
    ON sessions(source, user_key, external_id) WHERE external_id IS NOT NULL;
CREATE UNIQUE INDEX sessions_open_key
    ON sessions(session_key) WHERE session_key IS NOT NULL AND ended_at IS NULL;
CREATE UNIQUE INDEX messages_platform_id
    ON messages(session_id, platform_message_id) WHERE platform_message_id IS NOT NULL;
CREATE UNIQUE INDEX messages_dedupe
    ON messages(session_id, dedupe_key) WHERE dedupe_key IS NOT NULL;
CREATE TRIGGER sessions_owner_fixed BEFORE UPDATE OF user_key, owner_token ON sessions
    WHEN old.owner_token IS NOT NULL BEGIN
    SELECT RAISE(ABORT, 'the owner of a session cannot change');
END;
DROP TRIGGER messages_ai;
DROP TRIGGER messages_ad;
DROP TABLE messages_fts;
DROP TABLE messages_trigram;
DROP VIEW messages_fts_source;
DROP VIEW messages_trigram_source;
CREATE VIEW messages_fts_source AS
    SELECT m.id AS id, CASE WHEN m.role = 'tool' THEN substr(m.content, 1, 8192) ELSE m.content END AS content, s.owner_token AS owner
    FROM messages m JOIN sessions s ON s.id = m.session_id;
CREATE VIEW messages_trigram_source AS
    SELECT m.id AS id, m.content AS content, s.owner_token AS owner
    FROM messages m JOIN sessions s ON s.id = m.session_id WHERE m.role != 'tool' AND length(CAST(m.content AS BLOB)) != length(m.content);
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, owner, content='messages_fts_source', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
CREATE VIRTUAL TABLE messages_trigram USING fts5(
    content, owner, content='messages_trigram_source', content_rowid='id', tokenize='trigram'
);
INSERT INTO messages_fts(messages_fts) VALUES ('rebuild');
INSERT INTO messages_trigram(messages_trigram) VALUES ('rebuild');
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN 
    INSERT INTO messages_fts(messages_fts, rowid, content, owner)
        VALUES ('delete', old.id, CASE WHEN old.role = 'tool' THEN substr(old.content, 1, 8192) ELSE old.content END, (SELECT owner_token FROM sessions WHERE id = old.session_id));
    INSERT INTO messages_trigram(messages_trigram, rowid, content, owner)
        SELECT 'delete', old.id, old.content, (SELECT owner_token FROM sessions WHERE id = old.session_id)
        WHERE old.role != 'tool' AND length(CAST(old.content AS BLOB)) != length(old.content);
    UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;

END;
CREATE TRIGGER messages_au AFTER UPDATE OF id, session_id, role, content ON messages BEGIN
    
    INSERT INTO messages_fts(messages_fts, rowid, content, owner)
        VALUES ('delete', old.id, CASE WHEN old.role = 'tool' THEN substr(old.content, 1, 8192) ELSE old.content END, (SELECT owner_token FROM sessions WHERE id = old.session_id));
    INSERT INTO messages_trigram(messages_trigram, rowid, content, owner)
        SELECT 'delete', old.id, old.content, (SELECT owner_token FROM sessions WHERE id = old.session_id)
        WHERE old.role != 'tool' AND length(CAST(old.content AS BLOB)) != length(old.content);
    UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;

    INSERT INTO messages_fts(rowid, content, owner)
        VALUES (new.id, CASE WHEN new.role = 'tool' THEN substr(new.content, 1, 8192) ELSE new.content END, (SELECT owner_token FROM sessions WHERE id = new.session_id));
    INSERT INTO messages_trigram(rowid, content, owner)
        SELECT new.id, new.content, (SELECT owner_token FROM sessions WHERE id = new.session_id) WHERE new.role != 'tool' AND length(CAST(new.content AS BLOB)) != length(new.content);
    UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id;
END;

CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, owner)
        VALUES (new.id, CASE WHEN new.role = 'tool' THEN substr(new.content, 1, 8192) ELSE new.content END, (SELECT owner_token FROM sessions WHERE id = new.session_id));
    INSERT INTO messages_trigram(rowid, content, owner)
        SELECT new.id, new.content, (SELECT owner_token FROM sessions WHERE id = new.session_id) WHERE new.role != 'tool' AND length(CAST(new.content AS BLOB)) != length(new.content);
    UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id;
END
;
"""  # noqa: E501, W291, W293 (frozen: every byte, trailing spaces too)


# v4: what a session needs to resume after a restart or an eviction from the
# bot's cache: the system prompt it was started with (stored once, so the
# request prefix stays byte-identical even when USER.md changes meanwhile),
# and the background review's counters (turns since the last memory write,
# tool steps since the last skill write).
_V4 = """
ALTER TABLE sessions ADD COLUMN system_prompt TEXT;
ALTER TABLE sessions ADD COLUMN turns_since_memory INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN steps_since_skill INTEGER NOT NULL DEFAULT 0;
"""

# v5: the extraction backlog. `extracted_through` is the id of the last message
# the extraction agent has covered (0: none); `extraction_due` is 1 from the end
# of a session until its session-end extraction has finished. An upgrade must
# not set off a burst of extraction over old history: ended and imported
# sessions count as extracted up to their last message, and nothing becomes
# due. Open sessions keep 0, so the quiet-time extraction covers them once
# they go quiet. The partial indexes keep the background jobs' queries to the
# due and the open sessions, however much history the store holds.
_V5 = """
ALTER TABLE sessions ADD COLUMN extracted_through INTEGER NOT NULL DEFAULT 0;
ALTER TABLE sessions ADD COLUMN extraction_due INTEGER NOT NULL DEFAULT 0;
UPDATE sessions SET extracted_through =
        coalesce((SELECT max(id) FROM messages WHERE session_id = sessions.id), 0)
    WHERE ended_at IS NOT NULL OR external_id IS NOT NULL;
CREATE INDEX sessions_extraction_due ON sessions(ended_at) WHERE extraction_due = 1;
CREATE INDEX sessions_open ON sessions(id) WHERE ended_at IS NULL;
"""


# v6: CJK text in the word index as bigrams (see the module docstring). The
# view gets the plain-SQL value; the index is filled again through the
# function (fast), and the triggers use the function. The trigram index
# keeps only the rows with emoji or symbols: CJK no longer needs it.
_V6 = """
DROP TRIGGER messages_ai;
DROP TRIGGER messages_ad;
DROP TRIGGER messages_au;
DROP VIEW messages_fts_source;
DROP VIEW messages_trigram_source;
CREATE VIEW messages_trigram_source AS
    SELECT m.id AS id, m.content AS content, s.owner_token AS owner
    FROM messages m JOIN sessions s ON s.id = m.session_id WHERE m.role != 'tool' AND length(CAST(m.content AS BLOB)) != length(m.content) AND m.content GLOB '*[\U0001f000-\U0001faff\u2600-\u27bf]*';
INSERT INTO messages_trigram(messages_trigram) VALUES ('delete-all');
INSERT INTO messages_trigram(messages_trigram) VALUES ('rebuild');
CREATE VIEW messages_fts_source AS
    SELECT id, CASE WHEN value NOT GLOB '*[\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]*' THEN value ELSE (
        WITH RECURSIVE walk(i, c, n) AS (
            SELECT 1, unicode(substr(value, 1, 1)), unicode(substr(value, 2, 1))
            UNION ALL
            SELECT i + 1, n, unicode(substr(value, i + 2, 1)) FROM walk WHERE n IS NOT NULL
        )
        SELECT group_concat(CASE WHEN (c BETWEEN 12352 AND 12543 OR c BETWEEN 12544 AND 12591 OR c BETWEEN 13312 AND 19903 OR c BETWEEN 19968 AND 40959 OR c BETWEEN 44032 AND 55215 OR c BETWEEN 63744 AND 64255) THEN ' ' || char(c)
            || CASE WHEN (n BETWEEN 12352 AND 12543 OR n BETWEEN 12544 AND 12591 OR n BETWEEN 13312 AND 19903 OR n BETWEEN 19968 AND 40959 OR n BETWEEN 44032 AND 55215 OR n BETWEEN 63744 AND 64255) THEN char(n) ELSE '' END || ' ' ELSE char(c) END, '')
        FROM walk
    ) END AS content, owner FROM (
        SELECT m.id AS id, CASE WHEN m.role = 'tool' THEN substr(m.content, 1, 8192) ELSE m.content END AS value, s.owner_token AS owner
        FROM messages m JOIN sessions s ON s.id = m.session_id
    );
INSERT INTO messages_fts(messages_fts) VALUES ('delete-all');
INSERT INTO messages_fts(rowid, content, owner) SELECT m.id, mnemo_cjk_words(CASE WHEN m.role = 'tool' THEN substr(m.content, 1, 8192) ELSE m.content END), s.owner_token FROM messages m JOIN sessions s ON s.id = m.session_id WHERE m.id > -1;
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN 
    INSERT INTO messages_fts(messages_fts, rowid, content, owner)
        VALUES ('delete', old.id, mnemo_cjk_words(CASE WHEN old.role = 'tool' THEN substr(old.content, 1, 8192) ELSE old.content END), (SELECT owner_token FROM sessions WHERE id = old.session_id));
    INSERT INTO messages_trigram(messages_trigram, rowid, content, owner)
        SELECT 'delete', old.id, old.content, (SELECT owner_token FROM sessions WHERE id = old.session_id)
        WHERE old.role != 'tool' AND length(CAST(old.content AS BLOB)) != length(old.content) AND old.content GLOB '*[\U0001f000-\U0001faff\u2600-\u27bf]*';
    UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;

END;

CREATE TRIGGER messages_au AFTER UPDATE OF id, session_id, role, content ON messages BEGIN
    
    INSERT INTO messages_fts(messages_fts, rowid, content, owner)
        VALUES ('delete', old.id, mnemo_cjk_words(CASE WHEN old.role = 'tool' THEN substr(old.content, 1, 8192) ELSE old.content END), (SELECT owner_token FROM sessions WHERE id = old.session_id));
    INSERT INTO messages_trigram(messages_trigram, rowid, content, owner)
        SELECT 'delete', old.id, old.content, (SELECT owner_token FROM sessions WHERE id = old.session_id)
        WHERE old.role != 'tool' AND length(CAST(old.content AS BLOB)) != length(old.content) AND old.content GLOB '*[\U0001f000-\U0001faff\u2600-\u27bf]*';
    UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;

    INSERT INTO messages_fts(rowid, content, owner)
        VALUES (new.id, mnemo_cjk_words(CASE WHEN new.role = 'tool' THEN substr(new.content, 1, 8192) ELSE new.content END), (SELECT owner_token FROM sessions WHERE id = new.session_id));
    INSERT INTO messages_trigram(rowid, content, owner)
        SELECT new.id, new.content, (SELECT owner_token FROM sessions WHERE id = new.session_id) WHERE new.role != 'tool' AND length(CAST(new.content AS BLOB)) != length(new.content) AND new.content GLOB '*[\U0001f000-\U0001faff\u2600-\u27bf]*';
    UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id;

END
;

CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN 
    INSERT INTO messages_fts(rowid, content, owner)
        VALUES (new.id, mnemo_cjk_words(CASE WHEN new.role = 'tool' THEN substr(new.content, 1, 8192) ELSE new.content END), (SELECT owner_token FROM sessions WHERE id = new.session_id));
    INSERT INTO messages_trigram(rowid, content, owner)
        SELECT new.id, new.content, (SELECT owner_token FROM sessions WHERE id = new.session_id) WHERE new.role != 'tool' AND length(CAST(new.content AS BLOB)) != length(new.content) AND new.content GLOB '*[\U0001f000-\U0001faff\u2600-\u27bf]*';
    UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id;

END
;
"""  # noqa: E501, W291, W293 (frozen: every byte, trailing spaces too)


_V7 = """
CREATE TABLE inbox (
    id INTEGER PRIMARY KEY,
    session_key TEXT NOT NULL,
    user_key TEXT NOT NULL,
    source TEXT NOT NULL,
    payload TEXT NOT NULL,
    received_at REAL NOT NULL
);
CREATE INDEX inbox_source ON inbox(source, id);
CREATE INDEX inbox_user ON inbox(user_key);
"""


# v8: the line a person got in place of an answer (a model fault), on their
# message. Such a message counts as answered (a restart does not answer it
# again); requests never carry the line, so the session's history is unchanged.
_V8 = """
ALTER TABLE messages ADD COLUMN notice TEXT;
"""


# v9: 0 for text a person forwarded or quoted: not their own words, not learned from.
_V9 = """
ALTER TABLE messages ADD COLUMN own_words INTEGER NOT NULL DEFAULT 1;
"""


# v11: 1 on a person's message a turn stored and has not answered yet; NULL once its
# reply, its stop or its fault line is stored, or its session ends (`writes`). A
# partial index holds only the marked rows, so `chats.unanswered` finds every such
# message of the open sessions, not only a session's newest, as cheaply with millions
# of messages as with a few. Existing rows: the ones the rule before it found (an open
# session's newest message, a person's, without a fault line).
_V11 = """
ALTER TABLE messages ADD COLUMN unanswered INTEGER;
UPDATE messages SET unanswered = 1 WHERE role = 'user' AND notice IS NULL AND id IN (
    SELECT (SELECT max(x.id) FROM messages x WHERE x.session_id = s.id)
    FROM sessions s WHERE s.ended_at IS NULL);
CREATE INDEX messages_unanswered ON messages(session_id, id) WHERE unanswered IS NOT NULL;
"""


# v12: the deliveries of commands and button presses seen (`deliveries`), so that one
# delivered twice runs once: the sha256 of each delivery's platform and key, never the
# ids, and the time it was seen, indexed for the prune of the ones two days old.
_V12 = """
CREATE TABLE deliveries (
    digest BLOB PRIMARY KEY,
    seen_at REAL NOT NULL
) WITHOUT ROWID;
CREATE INDEX deliveries_seen ON deliveries(seen_at);
"""

# v13: a session's queued messages read by its key, in order (`inbox.for_session`),
# instead of its platform's whole queue.
_V13 = """
CREATE INDEX inbox_session ON inbox(session_key, id);
"""


@dataclass(frozen=True)
class Migration:
    """One forward step: the version it produces and the SQL that gets there."""

    version: int
    script: str


MIGRATIONS: tuple[Migration, ...] = (
    Migration(1, _V1),
    Migration(2, _V2),
    Migration(3, _V3),
    Migration(4, _V4),
    Migration(5, _V5),
    Migration(6, _V6),
    Migration(7, _V7),  # the queue of messages waiting for a busy session (inbox.py)
    Migration(8, _V8),
    Migration(9, _V9),  # own words: forwarded and quoted text is marked
    Migration(10, V10),  # the date and speaker words (word_index.py)
    Migration(11, _V11),
    Migration(12, _V12),  # deliveries of commands and presses seen (deliveries.py)
    Migration(13, _V13),  # a session's queued messages by its key (inbox.py)
)


def schema_version(conn: sqlite3.Connection) -> int:
    """The database's schema version; 0 for a database without our tables."""
    row = conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
    ).fetchone()
    if row is None:
        return 0
    found = conn.execute("SELECT max(version) FROM schema_version").fetchone()[0]
    return int(found or 0)


def register_functions(conn: sqlite3.Connection) -> None:
    """Add the SQL functions that the triggers and migrations call to `conn`.

    Every connection that writes messages needs them (`connection.connect`
    registers them); without them a write fails with "no such function".
    """
    conn.create_function("mnemo_owner_token", 1, owner_token, deterministic=True)
    conn.create_function("mnemo_cjk_words", 1, _cjk_words_or_none, deterministic=True)
    conn.create_function("mnemo_about_words", 3, _about_words_or_none, deterministic=True)


def _cjk_words_or_none(text: str | None) -> str | None:
    return None if text is None else cjk_words(str(text))


def _about_words_or_none(content: object, timestamp: object, speaker: object) -> str | None:
    if content is None:
        return None
    # not a number (as the view's comparisons see it): no date words
    when = float(timestamp) if isinstance(timestamp, int | float) else math.nan
    return about_words(str(content), when, None if speaker is None else str(speaker))


def migrate(conn: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Apply every step above the current version up to `target`; return the new version.

    Each step runs in its own IMMEDIATE transaction with its version bump.
    `conn` must be in autocommit mode (``isolation_level=None``).
    """
    register_functions(conn)
    current = schema_version(conn)
    if current > SCHEMA_VERSION:
        raise SchemaVersionError(
            f"state.db has schema version {current}, newer than this Mnemo "
            f"understands ({SCHEMA_VERSION}); upgrade Mnemo"
        )
    for step in MIGRATIONS:
        if current < step.version <= target:
            _apply(conn, step)
            current = step.version
    return current


def _apply(conn: sqlite3.Connection, step: Migration) -> None:
    conn.execute("BEGIN IMMEDIATE")
    try:
        # Another process may have migrated while we waited for the lock.
        if schema_version(conn) >= step.version:
            conn.execute("COMMIT")
            return
        conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
        for statement in _statements(step.script):
            conn.execute(statement)
        conn.execute("DELETE FROM schema_version")
        conn.execute("INSERT INTO schema_version(version) VALUES (?)", (step.version,))
        conn.execute("COMMIT")
    except BaseException:
        conn.execute("ROLLBACK")
        raise


def _statements(script: str) -> list[str]:
    """Split a script into complete statements (trigger bodies hold semicolons)."""
    statements: list[str] = []
    buffer = ""
    for line in script.splitlines(keepends=True):
        buffer += line
        if sqlite3.complete_statement(buffer):
            statements.append(buffer.strip())
            buffer = ""
    if buffer.strip():
        statements.append(buffer.strip())
    return statements


def drop_insert_trigger(conn: sqlite3.Connection) -> None:
    """Stop indexing inserts (bulk load); call inside the load's transaction."""
    conn.execute("DROP TRIGGER IF EXISTS messages_ai")


def create_insert_trigger(conn: sqlite3.Connection) -> None:
    """Put the insert trigger back after a bulk load."""
    conn.execute(INSERT_TRIGGER)


def index_rows_after(conn: sqlite3.Connection, last_id: int) -> None:
    """Index every message whose id is above `last_id` (rows a bulk load inserted)."""
    conn.execute(INDEX_WORDS_AFTER, (last_id,))
    conn.execute(
        "INSERT INTO messages_trigram(rowid, content, owner) SELECT id, content, owner "
        "FROM messages_trigram_source WHERE id > ?",
        (last_id,),
    )


def recount_messages(conn: sqlite3.Connection, session_ids: list[int]) -> None:
    """Set `message_count` of these sessions from their rows (after a bulk load)."""
    conn.executemany(
        "UPDATE sessions SET message_count = "
        "(SELECT count(*) FROM messages WHERE session_id = sessions.id) WHERE id = ?",
        [(i,) for i in session_ids],
    )


def optimize_indexes(conn: sqlite3.Connection) -> None:
    """Merge each index into one segment (drops deleted rows' tokens for good)."""
    conn.execute(f"INSERT INTO {WORD_INDEX}({WORD_INDEX}) VALUES ('optimize')")
    conn.execute(f"INSERT INTO {TRIGRAM_INDEX}({TRIGRAM_INDEX}) VALUES ('optimize')")


def check_integrity(conn: sqlite3.Connection, echo: Callable[[str], None] | None = None) -> None:
    """Run SQLite's integrity check and FTS5's on both indexes; raise on any problem."""
    say = echo or (lambda _line: None)
    rows = [r[0] for r in conn.execute("PRAGMA integrity_check").fetchall()]
    if rows != ["ok"]:
        raise IndexIntegrityError("database integrity check failed: " + "; ".join(rows[:5]))
    say("ok   database integrity")
    for index in (WORD_INDEX, TRIGRAM_INDEX):
        try:
            conn.execute(f"INSERT INTO {index}({index}, rank) VALUES ('integrity-check', 1)")
        except sqlite3.DatabaseError as exc:
            raise IndexIntegrityError(f"full-text index {index} is out of sync: {exc}") from None
        say(f"ok   index {index}")
    wrong = conn.execute(WRONG_MESSAGE_COUNTS.sqlite).fetchone()[0]
    if wrong:
        raise IndexIntegrityError(f"{wrong} sessions have a wrong message count")
    say("ok   message counts")
    version = schema_version(conn)
    if version != SCHEMA_VERSION:
        raise IndexIntegrityError(f"schema version {version}, expected {SCHEMA_VERSION}")
    say(f"ok   schema version {version}")
