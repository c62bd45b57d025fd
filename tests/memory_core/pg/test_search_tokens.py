"""index_document holds exactly the tokens of SQLite's word index, and PostgreSQL reads them back.

About 300 varied messages, at times from 1970 to 2100 and some with a speaker's
name, go through a real state.db (`SessionDB`): its `messages_fts` vocabulary
(fts5vocab, per message, column and position) is compared with the tsvector
literal `index_document` makes for the same message (the `about` column's
tokens weighted A, after the text's and one empty position), then the
literals are cast to tsvector on PostgreSQL and read back.
"""

from __future__ import annotations

import itertools
import re
import sqlite3
from pathlib import Path

import psycopg
import pytest

from memory_core.pg.search_text import index_document, word_tokens
from memory_core.sessions.db import SessionDB
from memory_core.sessions.models import NewMessage, SessionOrigin

BASE = [
    "I was deploying the kubernetes cluster; the deploy failed, then it deployed.",
    "Deploying deployments deployer redeploy",
    "Café, naïve résumé, coöperate, Ångström, façade, jalapeño, crème brûlée",
    "cafe naive resume cooperate angstrom facade jalapeno creme brulee",
    "部署失败了，我们需要迁移数据库",
    "日本語のテキストとカタカナ、ひらがな",
    "한국어 문장입니다 배포 실패",
    "部署 迁移 失败 部 署",
    "Mixed 中文English混合text123",
    "Numbers 42, 3.14159, 1,000,000, 0x1F, 2024-05-06, 12:30pm, v1.2.3",
    "don't can't won't it's O'Reilly rock'n'roll",
    "Emoji 🎉🎉🎉 party 🚀 launch ☀️ sun ❤️ love 👍🏽 ok",
    "Symbols © ® ™ § ¶ † ‡ • … ‰ ← → ↑ ↓ ♠ ♣ ♥ ♦ ✓ ✗",
    "Punctuation!!! ??? ... --- ___ *** ### @@@ $$$ %%% ^^^ &&& ((( )))",
    "e-mail node.js foo_bar foo-bar-baz a.b.c snake_case CamelCase",
    "ΣΑΣ σας Ελληνικά Straße İstanbul ǅemal ﬁne ﬂow",
    "Русский текст: развертывание не удалось, й ё",
    "العربية مرحبا עברית שלום हिन्दी नमस्ते ไทย สวัสดี",
    "generalizations oscillators hopefulness relational conditional rational",
    "caresses ponies ties caress cats feed agreed plastered bled motoring sing",
    "conflated troubled sized hopping tanned falling hissing fizzed failing filing",
    "happy sky relate probate conflate pirate prelate controll roll",
    "triplicate formative formalize electriciti electrical hopeful goodness",
    "revival allowance inference airliner gyroscopic adjustable defensible",
    "irritant replacement adjustment dependent adoption homologou communism",
    "activate angulariti homologous effective bowdlerize probate rate cease",
    "generously lying dying tying skies news innings outing canning herring",
    "a an i x y z aa ab yy yyy eee ooo ies sses ational tional",
    "ALL CAPS SHOUTING DEPLOYED FAILING",
    "tabs\tand\nnewlines\r\nand  spaces",
    "zero\u200bwidth soft\u00adhyphen non\u00a0breaking",
    "combining e\u0301 a\u0308 n\u0303 o\u0302",
    "full-width ＡＢＣ １２３ ｄｅｐｌｏｙ",
    "superscripts x² y³ ½ ¼ ① ⑵ Ⅻ",
    "emails bob@example.com https://example.org/path?q=deploy&x=1#frag",
    "hashtags #deploy @mention $var %s {braces} [brackets] <angle>",
    "quotes \"double\" 'single' «guillemets» „low“ “curly” ‘apos’",
    "x" * 70 + " " + "deploying" * 9,
    "supercalifragilisticexpialidociousnessesational",
    "",
    "   ",
    "🎉",
    "部",
    "the of and to in is that it",
    "nul\x00inside text after nul",
    "部署\x00迁移 after a nul in cjk",
]
WORDS = [
    "deploy",
    "deployed",
    "deploying",
    "café",
    "cafe",
    "部署失败",
    "kube",
    "kubernetes",
    "naïve",
    "42",
    "don't",
    "🎉",
    "Ω",
]


FAR_OUT = 1e12  # past the year 9999: no date words
SPEAKERS = [None, "Caroline", "O'Brien", "张伟", "María José", "", "back\\slash", None]


def corpus() -> list[tuple[str, str]]:
    """(role, content) pairs: the base texts in every role, and generated mixtures."""
    rows = [(role, text) for text in BASE for role in ("user", "assistant", "system")]
    rows += [("tool", text) for text in BASE[::3]] + [("system", BASE[0])]
    for n, combo in enumerate(itertools.combinations(WORDS, 3)):
        if n % 3 != 2:
            rows.append(("user" if n % 2 else "assistant", " ".join(combo)))
    long_tool = "deploy failed " * 700 + "部署失败" * 10  # past TOOL_INDEX_CHARS
    rows += [("tool", long_tool), ("user", long_tool), ("tool", "é" * 8190 + " cafés tail")]
    rows += [("user", "past the last position " * 4200)]  # the date words too
    return rows


def stamp(n: int) -> float:
    """The time of the n-th message: spread from 1970 to 2100, some before a day's end."""
    return (n * 15_485_863.25) % 4_102_444_800 + (n % 3) * 0.999


def speaker(n: int) -> str | None:
    return SPEAKERS[n % len(SPEAKERS)]


def rows_with_times(rows: list[tuple[str, str]]) -> list[tuple[str, str, float, str | None]]:
    """The index rows of `corpus()`: (role, content, timestamp, speaker_name)."""
    return [(role, text, stamp(n), speaker(n)) for n, (role, text) in enumerate(rows)]


def parse_literal(literal: str | None) -> dict[str, list[str]]:
    """{lexeme: positions, "12" or "12A"} of a tsvector literal as index_document writes it."""
    if literal is None:
        return {}
    out: dict[str, list[str]] = {}
    for match in re.finditer(r"'((?:[^'\\]|''|\\\\)*)':([\dA,]+)", literal):
        lexeme = match.group(1).replace("''", "'").replace("\\\\", "\\")
        out[lexeme] = match.group(2).split(",")
    return out


def sqlite_vocabulary(tmp_path: Path, rows: list[tuple[str, str]]) -> list[dict[str, list[str]]]:
    """Per message, {token: positions} as state.db's word index holds them, in a tsvector's
    terms: the text's at their 1-based position, the `about` column's weighted A after
    them and one empty position."""
    origin = SessionOrigin("k", "telegram", "telegram-1", "telegram-1", "private")
    with SessionDB(tmp_path / "state.db").open() as db:
        messages = [
            NewMessage(role=role, content=text, timestamp=ts, key=f"m{n}", speaker_name=name)
            for n, (role, text, ts, name) in enumerate(rows_with_times(rows))
        ]
        db.append_messages(origin=origin, messages=messages)
        conn: sqlite3.Connection = db.conn
        ids = [row[0] for row in conn.execute("SELECT id FROM messages ORDER BY id")]
        conn.execute(
            "CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, messages_fts, instance)"
        )
        found: dict[int, dict[str, list[str]]] = {i: {} for i in ids}
        last = dict.fromkeys(ids, 0)  # the position of each message's last text token
        for doc, col, term, offset in conn.execute(
            "SELECT doc, col, term, offset FROM temp.vocab WHERE col != 'owner' "
            "ORDER BY doc, col = 'about', offset"
        ):
            term = term.encode()[:2046].decode(errors="ignore")  # PostgreSQL's lexeme limit
            positions = found[doc].setdefault(term, [])
            if col == "content":
                last[doc] = offset + 1
                position = str(min(offset + 1, 16383))
            else:
                position = f"{min(last[doc] + 2 + offset, 16383)}A"
            # a tsvector keeps a lexeme's first 256 positions, one of those clamped
            if len(positions) < 256 and (
                not positions or positions[-1].rstrip("A") != position.rstrip("A")
            ):
                positions.append(position)
    return [found[i] for i in ids]


def test_index_document_holds_the_tokens_of_sqlites_word_index(tmp_path: Path) -> None:
    rows = corpus()
    assert len(rows) >= 280
    expected = sqlite_vocabulary(tmp_path, rows)
    for row, vocabulary in zip(rows_with_times(rows), expected, strict=True):
        assert parse_literal(index_document(*row)) == vocabulary, (row[0], row[1][:80], row[2:])
    assert index_document("user", "   ", FAR_OUT, None) is None
    assert index_document("user", "🎉 !!!", FAR_OUT, None) is None
    assert index_document("user", "", 1_683_547_200, "Caroline") is None  # no text: no words


def test_a_message_holds_its_date_and_speaker_weighted_a() -> None:
    literal = index_document("user", "hello there", 1_683_547_200.5, "Caroline")  # Mon 8 May 2023
    assert parse_literal(literal) == {
        "hello": ["1"], "there": ["2"], "mai": ["4A"], "mayo": ["5A"], "5": ["6A"],
        "月": ["7A"], "mondai": ["8A"], "lune": ["9A"], "星期": ["10A"], "期一": ["11A"],
        "一": ["12A"], "2023": ["13A"], "8": ["14A"], "carolin": ["15A"],
    }  # fmt: skip
    twice = parse_literal(index_document("user", "may may", 1_683_547_200, None))
    assert twice["mai"] == ["1", "2", "4A"]  # the text's and the date's, one lexeme


def test_word_tokens_are_stemmed_and_folded_like_the_index() -> None:
    assert word_tokens("Deploying deployed DEPLOYS") == ["deploi", "deploi", "deploi"]
    assert word_tokens("Café naïve") == ["cafe", "naiv"]
    assert word_tokens(" 部署 署失 ") == ["部署", "署失"]
    assert word_tokens("don't") == ["don", "t"]
    assert word_tokens("🎉") == []


def test_postgresql_reads_the_literals_back(pg_database: str) -> None:
    rows = corpus()
    literals = [index_document(*row) for row in rows_with_times(rows)]
    with psycopg.connect(pg_database) as conn:
        back = conn.execute(
            "SELECT n, lexeme, positions, weights FROM unnest(%s::text[]) "
            "WITH ORDINALITY AS l(v, n), unnest(v::tsvector) WHERE v IS NOT NULL",
            (literals,),
        ).fetchall()
    found: list[dict[str, list[str]]] = [{} for _ in rows]
    for n, lexeme, positions, weights in back:
        found[n - 1][lexeme] = [
            f"{p}{'' if w == 'D' else w}" for p, w in zip(positions, weights, strict=True)
        ]
    assert found == [parse_literal(literal) for literal in literals]


@pytest.mark.parametrize("lexeme", ["it's", "back\\slash", "a b", "x" * 3000])
def test_odd_lexemes_survive_the_cast(pg_database: str, lexeme: str) -> None:
    from memory_core.pg.search_text import tsvector_literal

    literal = tsvector_literal([(lexeme, 0), (lexeme, 20000)])
    assert literal is not None
    with psycopg.connect(pg_database) as conn:
        row = conn.execute("SELECT lexeme, positions FROM unnest(%s::tsvector)", (literal,))
        stored, positions = row.fetchone() or ("", [])
    assert lexeme.startswith(stored) and len(stored.encode()) <= 2046
    assert list(positions) == [1, 16383]
