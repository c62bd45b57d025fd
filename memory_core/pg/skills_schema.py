"""The PostgreSQL schema of people's own skills and the skills manifest ("skills").

`skill_people` has one row per person who has written a skill: its `version`,
drawn from the sequence `skill_versions` by every change of that person's
skills in the same transaction, is what a reader compares before using its
cached scan (a sequence never repeats a value, so a person erased and back
again never meets an old version). A skill is its `skill_files` rows: one per
file, `path` ``SKILL.md`` or a support-file path, `category` '' for none,
`name` its folder's name; they go with the person's row (ON DELETE CASCADE).
`skill_archive` holds deleted skills' files under an `entry` named like the
archive folder (``<name>-<UTC time>``). `skill_manifest` is one row: the
manifest's JSON text (NULL: none written yet) and its version.
"""

from __future__ import annotations

from memory_core.pg.migrations import PgMigration

COMPONENT = "skills"

_V1 = """
CREATE SEQUENCE skill_versions;
CREATE TABLE skill_people (
    user_key TEXT PRIMARY KEY,
    version BIGINT NOT NULL
);
CREATE TABLE skill_files (
    user_key TEXT NOT NULL REFERENCES skill_people ON DELETE CASCADE,
    category TEXT NOT NULL,
    name TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (user_key, category, name, path)
);
CREATE TABLE skill_archive (
    user_key TEXT NOT NULL,
    entry TEXT NOT NULL,
    category TEXT NOT NULL,
    name TEXT NOT NULL,
    path TEXT NOT NULL,
    content TEXT NOT NULL,
    archived_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (user_key, entry, path)
);
CREATE TABLE skill_manifest (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    content TEXT,
    version BIGINT NOT NULL
);
INSERT INTO skill_manifest (id, content, version) VALUES (1, NULL, 0);
"""

SKILLS_MIGRATIONS: tuple[PgMigration, ...] = (PgMigration(COMPONENT, 1, _V1),)
