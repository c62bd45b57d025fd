"""index_document holds exactly the tokens of SQLite's word index, and PostgreSQL reads them back.

About 300 varied messages go through a real state.db (`SessionDB`): its
`messages_fts` vocabulary (fts5vocab, per message and position) is compared
with the tsvector literal `index_document` makes for the same role and text,
then the literals are cast to tsvector on PostgreSQL and read back.
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


def corpus() -> list[tuple[str, str]]:
    """(role, content) pairs: the base texts in every role, and generated mixtures."""
    rows = [(role, text) for text in BASE for role in ("user", "assistant", "system")]
    rows += [("tool", text) for text in BASE[::3]] + [("system", BASE[0])]
    for n, combo in enumerate(itertools.combinations(WORDS, 3)):
        if n % 3 != 2:
            rows.append(("user" if n % 2 else "assistant", " ".join(combo)))
    long_tool = "deploy failed " * 700 + "部署失败" * 10  # past TOOL_INDEX_CHARS
    rows += [("tool", long_tool), ("user", long_tool), ("tool", "é" * 8190 + " cafés tail")]
    return rows


def parse_literal(literal: str | None) -> dict[str, list[int]]:
    """{lexeme: positions} of a tsvector literal as index_document writes it."""
    if literal is None:
        return {}
    out: dict[str, list[int]] = {}
    for match in re.finditer(r"'((?:[^'\\]|''|\\\\)*)':([\d,]+)", literal):
        lexeme = match.group(1).replace("''", "'").replace("\\\\", "\\")
        out[lexeme] = [int(p) for p in match.group(2).split(",")]
    return out


def sqlite_vocabulary(tmp_path: Path, rows: list[tuple[str, str]]) -> list[dict[str, list[int]]]:
    """Per message, {token: 1-based positions} as state.db's word index holds them."""
    origin = SessionOrigin("k", "telegram", "telegram-1", "telegram-1", "private")
    with SessionDB(tmp_path / "state.db").open() as db:
        messages = [
            NewMessage(role=role, content=text, timestamp=1000.0 + n, key=f"m{n}")
            for n, (role, text) in enumerate(rows)
        ]
        db.append_messages(origin=origin, messages=messages)
        conn: sqlite3.Connection = db.conn
        ids = [row[0] for row in conn.execute("SELECT id FROM messages ORDER BY id")]
        conn.execute(
            "CREATE VIRTUAL TABLE temp.vocab USING fts5vocab(main, messages_fts, instance)"
        )
        found: dict[int, dict[str, list[int]]] = {i: {} for i in ids}
        for doc, term, offset in conn.execute(
            "SELECT doc, term, offset FROM temp.vocab WHERE col = 'content' ORDER BY doc, offset"
        ):
            term = term.encode()[:2046].decode(errors="ignore")  # PostgreSQL's lexeme limit
            positions = found[doc].setdefault(term, [])
            if len(positions) < 256:  # a tsvector keeps a lexeme's first 256 positions
                positions.append(offset + 1)
    return [found[i] for i in ids]


def test_index_document_holds_the_tokens_of_sqlites_word_index(tmp_path: Path) -> None:
    rows = corpus()
    assert len(rows) >= 280
    expected = sqlite_vocabulary(tmp_path, rows)
    for (role, text), vocabulary in zip(rows, expected, strict=True):
        assert parse_literal(index_document(role, text)) == vocabulary, (role, text[:80])
    assert index_document("user", "   ") is None
    assert index_document("user", "🎉 !!!") is None


def test_word_tokens_are_stemmed_and_folded_like_the_index() -> None:
    assert word_tokens("Deploying deployed DEPLOYS") == ["deploi", "deploi", "deploi"]
    assert word_tokens("Café naïve") == ["cafe", "naiv"]
    assert word_tokens(" 部署 署失 ") == ["部署", "署失"]
    assert word_tokens("don't") == ["don", "t"]
    assert word_tokens("🎉") == []


def test_postgresql_reads_the_literals_back(pg_database: str) -> None:
    rows = corpus()
    literals = [index_document(role, text) for role, text in rows]
    with psycopg.connect(pg_database) as conn:
        back = conn.execute(
            "SELECT n, lexeme, positions FROM unnest(%s::text[]) WITH ORDINALITY AS l(v, n), "
            "unnest(v::tsvector) WHERE v IS NOT NULL",
            (literals,),
        ).fetchall()
    found: list[dict[str, list[int]]] = [{} for _ in rows]
    for n, lexeme, positions in back:
        found[n - 1][lexeme] = list(positions)
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
