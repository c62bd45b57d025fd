"""The PostgreSQL schema of MEMORY.md and USER.md, as the "memory" migrations.

One row of `memory_versions` per file (`target` 'memory' or 'user'; `user_key`
'' for the shared MEMORY.md): a writer locks it `FOR UPDATE`, so writes to one
file are serialised by the database, and bumps its `version`. The file's live
entries are `memory_entries` rows in `position` order, each with who wrote it
(`origin_*`) and when (`created_at`, unix seconds like the file ledger's `at`);
`memory_history` is the ledger (one row per entry change, `id` increasing per
file) and `memory_archive` the entries moved out of a full USER.md. Everything
about a file hangs off its `memory_versions` row with ON DELETE CASCADE, so an
erasure deletes one row.

Version 2 adds `person_records`: the small named texts kept with a person's
USER.md (staged changes, settings), one row per (user_key, name), erased with
the person in the same transaction as their USER.md.

Version 3 keeps each entry's evidence (the person's messages that grounded it, a
JSON list of ``{"message_id", "span"}``) with the entry: on its `memory_entries`
row, its `memory_archive` row, and on the history rows (`evidence` of `after`,
`before_evidence` of `before`); and lets the history record a forgotten entry
(actions 'forget' and 'forgotten', rows that keep no text).
"""

from __future__ import annotations

from memory_core.pg.migrations import PgMigration

COMPONENT = "memory"

_V1 = """
CREATE TABLE memory_versions (
    target TEXT NOT NULL CHECK (target IN ('memory', 'user')),
    user_key TEXT NOT NULL,
    version BIGINT NOT NULL DEFAULT 0,
    PRIMARY KEY (target, user_key),
    CHECK ((target = 'memory') = (user_key = ''))
);
CREATE TABLE memory_entries (
    target TEXT NOT NULL,
    user_key TEXT NOT NULL,
    position INTEGER NOT NULL,
    text TEXT NOT NULL,
    origin_kind TEXT NOT NULL,
    origin_session BIGINT,
    origin_by TEXT,
    created_at DOUBLE PRECISION,
    PRIMARY KEY (target, user_key, position),
    FOREIGN KEY (target, user_key) REFERENCES memory_versions ON DELETE CASCADE
);
CREATE TABLE memory_history (
    target TEXT NOT NULL,
    user_key TEXT NOT NULL,
    id BIGINT NOT NULL,
    at DOUBLE PRECISION NOT NULL,
    action TEXT NOT NULL
        CHECK (action IN ('add', 'replace', 'remove', 'consolidate', 'undo', 'archive')),
    before TEXT,
    after TEXT,
    origin_kind TEXT NOT NULL,
    origin_session BIGINT,
    origin_by TEXT,
    undoes BIGINT,
    PRIMARY KEY (target, user_key, id),
    FOREIGN KEY (target, user_key) REFERENCES memory_versions ON DELETE CASCADE
);
CREATE TABLE memory_archive (
    target TEXT NOT NULL,
    user_key TEXT NOT NULL,
    change_id BIGINT NOT NULL,
    text TEXT NOT NULL,
    origin_kind TEXT NOT NULL,
    origin_session BIGINT,
    origin_by TEXT,
    at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (target, user_key, change_id),
    FOREIGN KEY (target, user_key) REFERENCES memory_versions ON DELETE CASCADE
);
CREATE INDEX memory_entries_by ON memory_entries (origin_by) WHERE origin_by IS NOT NULL;
CREATE INDEX memory_history_by ON memory_history (origin_by) WHERE origin_by IS NOT NULL;
CREATE INDEX memory_archive_by ON memory_archive (origin_by) WHERE origin_by IS NOT NULL;
"""

_V2 = """
CREATE TABLE person_records (
    user_key TEXT NOT NULL,
    name TEXT NOT NULL,
    body TEXT NOT NULL,
    PRIMARY KEY (user_key, name)
);
"""

_V3 = """
ALTER TABLE memory_entries ADD COLUMN evidence JSONB NOT NULL DEFAULT '[]';
ALTER TABLE memory_archive ADD COLUMN evidence JSONB NOT NULL DEFAULT '[]';
ALTER TABLE memory_history
    ADD COLUMN evidence JSONB NOT NULL DEFAULT '[]',
    ADD COLUMN before_evidence JSONB NOT NULL DEFAULT '[]',
    DROP CONSTRAINT memory_history_action_check,
    ADD CONSTRAINT memory_history_action_check CHECK (action IN (
        'add', 'replace', 'remove', 'consolidate', 'undo', 'archive', 'forget', 'forgotten'
    ));
"""

MEMORY_MIGRATIONS: tuple[PgMigration, ...] = (
    PgMigration(COMPONENT, 1, _V1),
    PgMigration(COMPONENT, 2, _V2),
    PgMigration(COMPONENT, 3, _V3),
)
