"""Old migrations are frozen: each one's SQL text is pinned by its sha256.

Databases in the field were migrated with exactly these texts, so a migration
is never edited (not even its whitespace, which SQLite keeps in the schema);
the schema changes by adding a migration.
"""

from __future__ import annotations

import hashlib
import sqlite3

from memory_core.sessions.schema import (
    MIGRATIONS,
    SCHEMA_VERSION,
    create_insert_trigger,
    drop_insert_trigger,
    migrate,
)
from memory_core.sessions.word_index import about_words_sql, cjk_words_sql

# v3 is the text it shipped with, before issue 16 and a3cbeeb re-spaced its
# trigger bodies (v6 drops those triggers, so the final schema is the same).
FROZEN = {
    1: "06fb094e03913639360208bf8ec3841432f77da663fb412e7b13aa5196a74d09",
    2: "fb9b57f06817e69990c7824775bd065d7f997293da14beff0001dee392cc2f93",
    3: "aef435f18105be0a8ab68d923a6a59d65178d0951ebf4e0c65562b108616dada",
    4: "242f9384c8d8acd7dce7626374901e795af40bf7632f4d9f8582901bf3edcff1",
    5: "1b0c4666652b018d8088b0e35b60c9b6582daacc8354df420810e237e9239ff8",
    6: "58633acc83613dd49b3a88c5be17f737764755a9dd3527316491985fb8117d77",
    7: "bd0d86b7955571f3264a63618d5fdab03312bcb049a9a3cbd99900f1148ab31c",
    8: "52573878b319d5f9f11a5e111bca6d0c9a27c912becd150f68db82c6ce70d8bb",
    9: "6e94e3b68ec2c8e8d5137d7991eae7842f5c625ad9f80ba04784e7cb54582839",
    10: "e4ff623002ae2cf2042c45bbadd31d44480dc12e9586d4761fab0b7840afc0fb",
    11: "ae6b142641f55e9e9195dc64125f04a0706b96c8a2df138e405640a2694d8267",
    12: "3d6efdef04ee7e762b09f068cb293b1329cf92cdde88dd9958ab0b7a5d3dbda3",
    13: "2f8eab5c73f8d485901b29a719f03c2ec15c4e588941b2e5b4293438177c9254",
}


def test_the_versions_run_one_to_the_schema_version() -> None:
    assert [m.version for m in MIGRATIONS] == list(range(1, SCHEMA_VERSION + 1))


def test_no_migration_changes() -> None:
    for step in MIGRATIONS:
        digest = hashlib.sha256(step.script.encode("utf-8")).hexdigest()
        assert step.version in FROZEN, (
            f"migration v{step.version} is new: add its sha256 {digest} to FROZEN; "
            "from then on it is frozen too"
        )
        assert digest == FROZEN[step.version], (
            f"migration v{step.version} was edited (sha256 {digest}): migrations are frozen, "
            "databases were migrated with the old text; restore it and add a new migration"
        )


def test_the_view_holds_the_tested_sql_twin() -> None:
    """The plain-SQL tokens that test_schema checks against `cjk_words` are v6's view."""
    v6 = next(m for m in MIGRATIONS if m.version == 6)
    assert cjk_words_sql("value") in v6.script


def test_the_v10_view_holds_the_tested_sql_twin() -> None:
    """The plain-SQL text and `about` words that test_word_index checks are v10's view."""
    v10 = next(m for m in MIGRATIONS if m.version == 10)
    assert cjk_words_sql("value") in v10.script
    assert about_words_sql("value", "ts", "speaker") in v10.script


def test_a_bulk_load_puts_back_the_migrated_insert_trigger() -> None:
    conn = sqlite3.connect(":memory:", isolation_level=None)
    migrate(conn)
    query = "SELECT sql FROM sqlite_master WHERE type = 'trigger' AND name = 'messages_ai'"
    migrated = conn.execute(query).fetchone()[0]
    drop_insert_trigger(conn)
    create_insert_trigger(conn)
    assert conn.execute(query).fetchone()[0] == migrated
    conn.close()
