"""What the word index holds for a message, in Python and in plain SQL, and schema v10.

Since v10 `messages_fts` has, beside a message's text (`content`: tool output
cut at `TOOL_INDEX_CHARS`, CJK runs as bigrams) and its `owner`, a third
column, `about`: the message's date as words (`date_words`: month and weekday
in English, Spanish and Chinese, year, day of the month, in UTC) and its
speaker's name when it has one, both through `cjk_words`. So a message is
found by "May", "lunes", "星期一", "2023" or "Caroline" as by a word it says.
A message with no text (deleted) has no `about` words.

Words and phrases are looked for in both columns, a prefix only in the text
(`match_columns`): the one-character CJK query 期 or the no-hit retry of
"mar" would otherwise match every message's weekday (星期一 holds 期一) or
month (march, marzo). The `about` words are for matching only: a snippet
shows the stored text (`snippets` reads `messages.content`), never them.

Each column's value is computed twice, with the same tokens: in Python (the
SQL functions `mnemo_cjk_words` and `mnemo_about_words` that the triggers and
bulk loads call; PostgreSQL's tsvector, through `pg.search_text`) and in plain
SQL (`cjk_words_sql`, `about_words_sql`) in the view the index reads as its
content, so that a connection without our functions can still run FTS5's
integrity check or a 'rebuild'. The triggers also follow an update of a
message's time or speaker.
"""

from __future__ import annotations

import hashlib

from memory_core.sessions.date_words import date_words, date_words_sql
from memory_core.sessions.query import CJK_RANGES, TermKind, cjk_words

__all__ = [
    "ABOUT_COLUMN",
    "INDEX_WORDS_AFTER",
    "INSERT_TRIGGER",
    "TEXT_COLUMN",
    "TOOL_INDEX_CHARS",
    "V10",
    "about_words",
    "about_words_sql",
    "cjk_words_sql",
    "match_columns",
    "text_words",
]

TOOL_INDEX_CHARS = 8192
TEXT_COLUMN = "content"
ABOUT_COLUMN = "about"


def text_words(role: str, content: str) -> str:
    """The `content` column of a message: its text (tool output cut), CJK as bigrams."""
    return cjk_words(content[:TOOL_INDEX_CHARS] if role == "tool" else content)


def about_words(content: str, timestamp: float, speaker_name: str | None) -> str:
    """The `about` column of a message: its UTC date's words and its speaker's name
    ("" when it has no text)."""
    if not content:
        return ""
    when = date_words(timestamp)
    return when if speaker_name is None else f"{when} {cjk_words(speaker_name)}"


def about_words_sql(value: str, timestamp: str, speaker: str) -> str:
    """Plain SQL giving the tokens of `about_words` of these SQL expressions."""
    return (
        f"CASE WHEN {value} = '' THEN '' ELSE {date_words_sql(timestamp)} || "
        f"CASE WHEN {speaker} IS NULL THEN '' ELSE ' ' || {cjk_words_sql(speaker)} END END"
    )


def match_columns(kind: TermKind) -> str:
    """The columns of the word index a term of `kind` is looked for in (FTS5 syntax)."""
    if kind is TermKind.PREFIX:
        return TEXT_COLUMN
    return f"{{{TEXT_COLUMN} {ABOUT_COLUMN}}}"


def cjk_words_sql(value: str) -> str:
    """Plain SQL with the tokens of `cjk_words(value)` (the view's twin of the function).

    A recursive walk over the characters, only for text holding a CJK
    character: each CJK character becomes " XY " (with the next one when
    that is CJK too) or " X " at the end of a run; the extra spaces are
    separators to the tokenizer, so the tokens are the function's.
    """
    char_class = "".join(f"{chr(low)}-{chr(high)}" for low, high in CJK_RANGES)

    def is_cjk(code: str) -> str:
        return "(" + " OR ".join(f"{code} BETWEEN {lo} AND {hi}" for lo, hi in CJK_RANGES) + ")"

    return f"""CASE WHEN {value} NOT GLOB '*[{char_class}]*' THEN {value} ELSE (
        WITH RECURSIVE walk(i, c, n) AS (
            SELECT 1, unicode(substr({value}, 1, 1)), unicode(substr({value}, 2, 1))
            UNION ALL
            SELECT i + 1, n, unicode(substr({value}, i + 2, 1)) FROM walk WHERE n IS NOT NULL
        )
        SELECT group_concat(CASE WHEN {is_cjk("c")} THEN ' ' || char(c)
            || CASE WHEN {is_cjk("n")} THEN char(n) ELSE '' END || ' ' ELSE char(c) END, '')
        FROM walk
    ) END"""


# v10: the `about` column (see the module docstring). The index is made anew
# with three columns; the view gets the plain-SQL values, the index is filled
# through the functions (fast), which the three triggers call too; the update
# trigger also fires on a change of `timestamp` or `speaker_name`. The trigram
# index is as v6 left it (symbols only: no date words there). Frozen, like
# every migration.
V10 = """
DROP TRIGGER messages_ai;
DROP TRIGGER messages_ad;
DROP TRIGGER messages_au;
DROP TABLE messages_fts;
DROP VIEW messages_fts_source;
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
    ) END AS content, owner, CASE WHEN value = '' THEN '' ELSE CASE WHEN ts >= -30610224000 AND ts < 253402300800 THEN CASE strftime('%m', CAST(ts AS INTEGER) - (ts < CAST(ts AS INTEGER)), 'unixepoch') WHEN '01' THEN 'january enero 1 月 ' WHEN '02' THEN 'february febrero 2 月 ' WHEN '03' THEN 'march marzo 3 月 ' WHEN '04' THEN 'april abril 4 月 ' WHEN '05' THEN 'may mayo 5 月 ' WHEN '06' THEN 'june junio 6 月 ' WHEN '07' THEN 'july julio 7 月 ' WHEN '08' THEN 'august agosto 8 月 ' WHEN '09' THEN 'september septiembre 9 月 ' WHEN '10' THEN 'october octubre 10 月 ' WHEN '11' THEN 'november noviembre 11 月 ' WHEN '12' THEN 'december diciembre 12 月 ' END || ' ' || CASE strftime('%w', CAST(ts AS INTEGER) - (ts < CAST(ts AS INTEGER)), 'unixepoch') WHEN '1' THEN 'monday lunes  星期 期一 一 ' WHEN '2' THEN 'tuesday martes  星期 期二 二 ' WHEN '3' THEN 'wednesday miércoles  星期 期三 三 ' WHEN '4' THEN 'thursday jueves  星期 期四 四 ' WHEN '5' THEN 'friday viernes  星期 期五 五 ' WHEN '6' THEN 'saturday sábado  星期 期六 六 ' WHEN '0' THEN 'sunday domingo  星期 期日 日 ' END || ' ' || strftime('%Y', CAST(ts AS INTEGER) - (ts < CAST(ts AS INTEGER)), 'unixepoch') || ' ' || CAST(strftime('%d', CAST(ts AS INTEGER) - (ts < CAST(ts AS INTEGER)), 'unixepoch') AS INTEGER) ELSE '' END || CASE WHEN speaker IS NULL THEN '' ELSE ' ' || CASE WHEN speaker NOT GLOB '*[\u3040-\u30ff\u3100-\u312f\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff]*' THEN speaker ELSE (
        WITH RECURSIVE walk(i, c, n) AS (
            SELECT 1, unicode(substr(speaker, 1, 1)), unicode(substr(speaker, 2, 1))
            UNION ALL
            SELECT i + 1, n, unicode(substr(speaker, i + 2, 1)) FROM walk WHERE n IS NOT NULL
        )
        SELECT group_concat(CASE WHEN (c BETWEEN 12352 AND 12543 OR c BETWEEN 12544 AND 12591 OR c BETWEEN 13312 AND 19903 OR c BETWEEN 19968 AND 40959 OR c BETWEEN 44032 AND 55215 OR c BETWEEN 63744 AND 64255) THEN ' ' || char(c)
            || CASE WHEN (n BETWEEN 12352 AND 12543 OR n BETWEEN 12544 AND 12591 OR n BETWEEN 13312 AND 19903 OR n BETWEEN 19968 AND 40959 OR n BETWEEN 44032 AND 55215 OR n BETWEEN 63744 AND 64255) THEN char(n) ELSE '' END || ' ' ELSE char(c) END, '')
        FROM walk
    ) END END END AS about FROM (
        SELECT m.id AS id, CASE WHEN m.role = 'tool' THEN substr(m.content, 1, 8192) ELSE m.content END AS value, m.timestamp AS ts, m.speaker_name AS speaker, s.owner_token AS owner
        FROM messages m JOIN sessions s ON s.id = m.session_id
    );
CREATE VIRTUAL TABLE messages_fts USING fts5(
    content, owner, about, content='messages_fts_source', content_rowid='id',
    tokenize='porter unicode61 remove_diacritics 2'
);
INSERT INTO messages_fts(rowid, content, owner, about) SELECT m.id, mnemo_cjk_words(CASE WHEN m.role = 'tool' THEN substr(m.content, 1, 8192) ELSE m.content END), s.owner_token, mnemo_about_words(m.content, m.timestamp, m.speaker_name) FROM messages m JOIN sessions s ON s.id = m.session_id;
CREATE TRIGGER messages_ad AFTER DELETE ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, owner, about)
        VALUES ('delete', old.id, mnemo_cjk_words(CASE WHEN old.role = 'tool' THEN substr(old.content, 1, 8192) ELSE old.content END), (SELECT owner_token FROM sessions WHERE id = old.session_id), mnemo_about_words(old.content, old.timestamp, old.speaker_name));
    INSERT INTO messages_trigram(messages_trigram, rowid, content, owner)
        SELECT 'delete', old.id, old.content, (SELECT owner_token FROM sessions WHERE id = old.session_id)
        WHERE old.role != 'tool' AND length(CAST(old.content AS BLOB)) != length(old.content) AND old.content GLOB '*[\U0001f000-\U0001faff\u2600-\u27bf]*';
    UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;
END;
CREATE TRIGGER messages_au AFTER UPDATE OF id, session_id, role, content, timestamp, speaker_name ON messages BEGIN
    INSERT INTO messages_fts(messages_fts, rowid, content, owner, about)
        VALUES ('delete', old.id, mnemo_cjk_words(CASE WHEN old.role = 'tool' THEN substr(old.content, 1, 8192) ELSE old.content END), (SELECT owner_token FROM sessions WHERE id = old.session_id), mnemo_about_words(old.content, old.timestamp, old.speaker_name));
    INSERT INTO messages_trigram(messages_trigram, rowid, content, owner)
        SELECT 'delete', old.id, old.content, (SELECT owner_token FROM sessions WHERE id = old.session_id)
        WHERE old.role != 'tool' AND length(CAST(old.content AS BLOB)) != length(old.content) AND old.content GLOB '*[\U0001f000-\U0001faff\u2600-\u27bf]*';
    UPDATE sessions SET message_count = message_count - 1 WHERE id = old.session_id;
    INSERT INTO messages_fts(rowid, content, owner, about)
        VALUES (new.id, mnemo_cjk_words(CASE WHEN new.role = 'tool' THEN substr(new.content, 1, 8192) ELSE new.content END), (SELECT owner_token FROM sessions WHERE id = new.session_id), mnemo_about_words(new.content, new.timestamp, new.speaker_name));
    INSERT INTO messages_trigram(rowid, content, owner)
        SELECT new.id, new.content, (SELECT owner_token FROM sessions WHERE id = new.session_id) WHERE new.role != 'tool' AND length(CAST(new.content AS BLOB)) != length(new.content) AND new.content GLOB '*[\U0001f000-\U0001faff\u2600-\u27bf]*';
    UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id;
END;
CREATE TRIGGER messages_ai AFTER INSERT ON messages BEGIN
    INSERT INTO messages_fts(rowid, content, owner, about)
        VALUES (new.id, mnemo_cjk_words(CASE WHEN new.role = 'tool' THEN substr(new.content, 1, 8192) ELSE new.content END), (SELECT owner_token FROM sessions WHERE id = new.session_id), mnemo_about_words(new.content, new.timestamp, new.speaker_name));
    INSERT INTO messages_trigram(rowid, content, owner)
        SELECT new.id, new.content, (SELECT owner_token FROM sessions WHERE id = new.session_id) WHERE new.role != 'tool' AND length(CAST(new.content AS BLOB)) != length(new.content) AND new.content GLOB '*[\U0001f000-\U0001faff\u2600-\u27bf]*';
    UPDATE sessions SET message_count = message_count + 1 WHERE id = new.session_id;
END;
"""  # noqa: E501 (frozen: every byte)

# The live insert trigger, as v10 made it (a bulk load drops it and puts it back).
INSERT_TRIGGER = V10[V10.index("CREATE TRIGGER messages_ai") :].strip()

# What a bulk load runs once over the rows it inserted (`schema.index_rows_after`).
INDEX_WORDS_AFTER = (
    "INSERT INTO messages_fts(rowid, content, owner, about) SELECT m.id, mnemo_cjk_words("
    "CASE WHEN m.role = 'tool' THEN substr(m.content, 1, 8192) ELSE m.content END), "
    "s.owner_token, mnemo_about_words(m.content, m.timestamp, m.speaker_name) "
    "FROM messages m JOIN sessions s ON s.id = m.session_id WHERE m.id > ?"
)


def fts_delete_all(table: str) -> str:
    """FTS5's command that empties `table`: the word index before a rebuild, or the
    tokenizer's scratch table (`memory_core.pg.search_text`), contentless like it."""
    return f"INSERT INTO {table}({table}) VALUES ('delete-all')"


def owner_token(user_key: str) -> str:
    """Three private-use characters derived from a user key: one word, one trigram.

    Private-use characters are word characters for `unicode61` and fold to
    themselves, and three of them are exactly one trigram, so the token is a
    single term in both indexes. Two people could share a token (48 bits of
    a hash); that costs speed, never privacy, because SQL checks the user key.
    """
    digest = hashlib.blake2b(user_key.encode("utf-8", "surrogatepass"), digest_size=6).digest()
    value = int.from_bytes(digest, "big")
    return "".join(chr(0xF0000 + ((value >> (16 * i)) & 0xFFFF) % 0xFFFE) for i in range(3))
