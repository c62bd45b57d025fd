"""Several `mnemo run` replicas on one PostgreSQL: turns/s and CPU time per turn.

`--replicas N` (default 3) real `mnemo run` processes in Telegram webhook mode share
one PostgreSQL (`--storage URL`, or ``embedded``: bench/pg_server.py starts one); the
fake Telegram (tests/fakes/telegram.py) POSTs each update to one replica in turn and
the fake OpenAI echoes at once, both served by this process. `--people` people
(default 40), each in a private chat, send `--messages` messages each (default 10)
in a closed loop: the next once the reply to the previous is visible. It runs once
with one replica and once with N, each on a fresh schema; reviews are off
(`memory.nudge_interval: 0`), so only the reply path is measured.

Timed from the first message sent to the last reply shown (the replicas' start
left out). CPU time over the same span, from /proc/<pid>/stat (utime, stime and
the reaped children's): the replicas', the PostgreSQL server's (the postmaster of
a backend of ours and its children; n/a when the server is not on this machine)
and this process's (the fakes and the people). On a 2-core machine the turns/s
stop growing once the cores are busy; the CPU per turn shows what a turn costs
either way. The replicas share the bot's Telegram calls a second
(`telegram.calls_per_second`, Telegram's 30 unless `--calls-per-second`;
python-telegram-bot's AIORateLimiter), so the Telegram calls per turn are printed
too: the bot cannot pass that rate / calls per turn, whatever its CPU;
`--calls-per-second 0` lifts the limit, to see what the CPU allows.

`--chaos` runs N replicas once, on an embedded PostgreSQL of its own
(tests/gateway/chaos.py's `ChaosServer`), and breaks things on a schedule while the
people write: every `--every` seconds, in turn, the server restarts (``pg_ctl
restart -m fast``), the session-lock connections of the replicas are cut
(``pg_terminate_backend``), and one replica is SIGKILLed and started again
`--down` seconds later; `--faults` of them (default 6: each twice), and the people
write until the last is `--every` seconds past (`--messages` is not used). A
person whose reply does not come within `--timeout` sends the next message
anyway. Once the people are done and the stragglers are in
(or `--timeout` passed), it prints the messages sent, answered once, answered
twice, never answered and answered out of order (the goal: all but the first
zero), and the lines that were not answers (apologies).

    python bench/replicas_load.py --replicas 3                          # 40 x 10
    python bench/replicas_load.py --replicas 3 --people 10 --messages 5 # a quick look
    python bench/replicas_load.py --calls-per-second 0                  # CPU-bound
    python bench/replicas_load.py --storage postgresql://...            # your server
    python bench/replicas_load.py --chaos --people 10 --faults 9        # faults meanwhile
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psycopg  # noqa: E402
from machine import describe  # noqa: E402
from pg_server import EMBEDDED, pg_schema, server, server_version  # noqa: E402

from tests.fakes.openai import FakeOpenAI  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402
from tests.gateway.chaos import ChaosServer, Tally, tally  # noqa: E402
from tests.gateway.processes import MNEMO, run_environment  # noqa: E402

TOKEN = "4242:bench-replicas-token"
SECRET = "bench-replicas-secret"
FIRST_CHAT = 1001
TICK = os.sysconf("SC_CLK_TCK")


class ShownTelegram(FakeTelegram):
    """The fake, waking a chat's person when the bot sends a message there."""

    def __init__(self, backoff: float = 0.05) -> None:
        """`backoff`: seconds before a refused update is POSTed again."""
        super().__init__(token=TOKEN, webhook_backoff=backoff)
        self.sent: dict[int, list[str]] = defaultdict(list)
        self.events: dict[int, asyncio.Event] = defaultdict(asyncio.Event)

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        result = await super()._api_sendMessage(params)
        chat = int(params["chat_id"])
        self.sent[chat].append(str(result["text"]))
        self.events[chat].set()
        return result


def cpu_seconds(pid: int) -> float:
    """utime + stime + cutime + cstime of `pid` (/proc/<pid>/stat fields 14-17)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()  # fields[0] is field 3 (the state)
    return sum(int(x) for x in fields[11:15]) / TICK


def parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def postmaster_of(url: str) -> int | None:
    """The pid of the server's postmaster, if it runs on this machine (else None)."""
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT pg_backend_pid()").fetchone()
    try:
        return parent_of(int(row[0])) if row else None
    except OSError:
        return None


def server_cpu(postmaster: int) -> float:
    """The postmaster's CPU with its reaped children's, plus its live children's."""
    total = cpu_seconds(postmaster)
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if parent_of(int(entry.name)) == postmaster:
                    total += cpu_seconds(int(entry.name))
            except (OSError, ValueError):
                continue  # exited meanwhile: reaped into the postmaster's own
    return total


def machine_cpu() -> float:
    """CPU seconds every process of this machine spent (/proc/stat: all but idle, iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / TICK


def own_cpu() -> float:
    times = os.times()
    return times.user + times.system


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_replica(
    tg: ShownTelegram,
    model: FakeOpenAI,
    workdir: Path,
    url: str,
    port: int,
    edit_interval: float,
    calls_per_second: float = 30.0,
) -> subprocess.Popen[str]:
    workdir.mkdir(parents=True, exist_ok=True)  # a killed replica starts again in it
    (workdir / "mnemo.yaml").write_text(
        "shutdown_grace: 5\n"
        "telegram:\n"
        f"  base_url: {tg.url}/bot\n  base_file_url: {tg.url}/file/bot\n"
        f"  allowed_users: ['*']\n  edit_interval: {edit_interval}\n"
        f"  calls_per_second: {calls_per_second}\n"
        "  webhook:\n    url: https://bot.example/telegram\n"
        f"    listen: 127.0.0.1\n    port: {port}\n"
        "memory: {nudge_interval: 0}\nskills: {creation_nudge_interval: 0}\n",
        encoding="utf-8",
    )
    env = run_environment(
        model.url,
        workdir,
        TELEGRAM_BOT_TOKEN=TOKEN,
        TELEGRAM_WEBHOOK_SECRET=SECRET,
        MNEMO_DATABASE_URL=f"{url}{'&' if '?' in url else '?'}application_name={workdir.name}",
    )
    with (workdir / "stderr.txt").open("a", encoding="utf-8") as log:
        return subprocess.Popen(
            [str(MNEMO), "run"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=log, text=True, env=env, cwd=workdir,
        )  # fmt: skip


@dataclass(frozen=True)
class Row:
    replicas: int
    turns: int
    wall: float
    replica_cpu: float
    pg_cpu: float | None
    fakes_cpu: float
    machine_cpu: float  # every process's on this machine (the others' too) meanwhile
    calls: Counter[str]  # the Telegram calls during the timed span, by method
    wrong: int  # people whose replies were not their messages' echoes, once each, in order
    waits: list[float]  # each reply's latency, sorted


async def until(probe: Callable[[], bool], timeout: float, what: str) -> None:
    """Wait for `probe` (other processes' progress, seen through the fakes)."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise SystemExit(f"not within {timeout} s: {what}")
        await asyncio.sleep(0.05)


async def person(
    tg: ShownTelegram, chat: int, args: argparse.Namespace, until: asyncio.Event | None = None
) -> tuple[list[str], list[float]]:
    """One person's closed loop; the texts sent and each reply's latency. With `until`
    (chaos) the person writes until it is set, and a reply not shown within
    `args.timeout` is given up on (the next message is sent)."""
    sent: list[str] = []
    waits: list[float] = []
    for n in itertools.count() if until else range(args.messages):
        if until is not None and until.is_set():
            break
        text = f"message {n} from person {chat}"
        sent.append(text)
        began = time.perf_counter()
        tg.inject_text(chat, chat, text)
        try:
            while f"echo: {text}" not in tg.sent[chat][-3:]:
                tg.events[chat].clear()
                await asyncio.wait_for(tg.events[chat].wait(), args.timeout)
        except TimeoutError:
            if until is None:
                raise
            continue
        waits.append(time.perf_counter() - began)
    return sent, waits


async def one_run(count: int, url: str, postmaster: int | None, args: argparse.Namespace) -> Row:
    tg, model = ShownTelegram(), FakeOpenAI(echo_when_idle=True, chunk_size=64)
    await tg.start()
    await model.start()
    ports = [free_port() for _ in range(count)]
    tg.webhook_targets = [f"http://127.0.0.1:{p}/telegram" for p in ports]
    replicas: list[subprocess.Popen[str]] = []
    with tempfile.TemporaryDirectory(prefix="mnemo-replicas-") as tmp:
        try:
            for i, port in enumerate(ports):
                replicas.append(
                    start_replica(
                        tg, model, Path(tmp) / f"r{i}", url, port, args.edit_interval, args.rate
                    )
                )

            def ready() -> bool:
                if any(r.poll() is not None for r in replicas):
                    logs = [(Path(tmp) / f"r{i}" / "stderr.txt") for i in range(count)]
                    sys.exit("a replica exited:\n" + "\n".join(p.read_text()[-2000:] for p in logs))
                return len(tg.calls_to("setWebhook")) >= count

            await until(ready, 120, f"{count} replicas set the webhook")
            chats = range(FIRST_CHAT, FIRST_CHAT + args.people)
            cpu = [sum(cpu_seconds(r.pid) for r in replicas), own_cpu(), machine_cpu()]
            pg = server_cpu(postmaster) if postmaster else None
            first, began = len(tg.calls), time.perf_counter()
            loops = await asyncio.gather(*(person(tg, c, args) for c in chats))
            wall = time.perf_counter() - began
            replica_cpu = sum(cpu_seconds(r.pid) for r in replicas) - cpu[0]
            fakes_cpu = own_cpu() - cpu[1]
            all_cpu = machine_cpu() - cpu[2]
            pg_cpu = server_cpu(postmaster) - pg if postmaster and pg is not None else None
            calls = Counter(call.method for call in tg.calls[first:])
        finally:
            for process in replicas:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in replicas:
                process.wait(timeout=30)
            await tg.stop()
            await model.stop()
    sent = [texts for texts, _ in loops]
    waits = sorted(w for _, ws in loops for w in ws)
    wrong = sum(
        [t for t in tg.sent[c] if t.startswith("echo: ")] != [f"echo: {t}" for t in texts]
        for c, texts in zip(chats, sent, strict=True)
    )
    turns = sum(len(texts) for texts in sent)
    return Row(count, turns, wall, replica_cpu, pg_cpu, fakes_cpu, all_cpu, calls, wrong, waits)


@dataclass
class Faults:
    """What the schedule did."""

    restarts: int = 0
    locks_cut: int = 0  # session-lock connections terminated
    cuts: int = 0  # times it tried (no replica may have held a lock then)
    kills: int = 0


async def schedule(
    chaos: ChaosServer,
    replicas: list[subprocess.Popen[str]],
    again: Callable[[int], subprocess.Popen[str]],
    args: argparse.Namespace,
    done: asyncio.Event,
) -> Faults:
    """`args.faults` faults, one every `args.every` seconds: a server restart, the lock
    connections cut, a replica SIGKILLed (and started again `args.down` seconds
    later), in turn; then `done` is set a last `args.every` seconds on."""
    faults = Faults()
    for step in range(args.faults + 1):
        await asyncio.sleep(args.every)  # the schedule's pace
        if step == args.faults:
            break
        kind = step % 3
        if kind == 0:
            await asyncio.to_thread(chaos.restart)
            faults.restarts += 1
        elif kind == 1:
            faults.cuts += 1
            faults.locks_cut += len(await asyncio.to_thread(chaos.kill_lock_connections))
        else:
            victim = (step // 3) % len(replicas)
            replicas[victim].send_signal(signal.SIGKILL)
            await asyncio.to_thread(replicas[victim].wait)
            faults.kills += 1
            await asyncio.sleep(args.down)  # the replica's time down, part of the fault
            replicas[victim] = again(victim)
    done.set()
    return faults


async def chaos_run(chaos: ChaosServer, args: argparse.Namespace) -> tuple[Tally, Faults, float]:
    """The people's loops against `args.replicas` replicas while `schedule` breaks things;
    the tally of what they saw, the faults done and the wall time."""
    tg, model = ShownTelegram(backoff=0.25), FakeOpenAI(echo_when_idle=True, chunk_size=64)
    await tg.start()
    await model.start()
    count = args.replicas
    ports = [free_port() for _ in range(count)]
    tg.webhook_targets = [f"http://127.0.0.1:{p}/telegram" for p in ports]
    with tempfile.TemporaryDirectory(prefix="mnemo-chaos-") as tmp:

        def again(i: int) -> subprocess.Popen[str]:
            workdir = Path(tmp) / f"replica-{i}"
            return start_replica(tg, model, workdir, chaos.url, ports[i], args.edit_interval)

        replicas = [again(i) for i in range(count)]
        try:
            await until(lambda: len(tg.calls_to("setWebhook")) >= count, 120, "replicas up")
            chats = range(FIRST_CHAT, FIRST_CHAT + args.people)
            done = asyncio.Event()
            faults = asyncio.create_task(schedule(chaos, replicas, again, args, done))
            began = time.perf_counter()
            loops = await asyncio.gather(*(person(tg, c, args, until=done) for c in chats))
            done_faults = await faults
            sent = {c: texts for c, (texts, _) in zip(chats, loops, strict=True)}

            def answered() -> bool:
                shown = {c: set(tg.chat_texts(c)) for c in chats}
                return all(f"echo: {t}" in shown[c] for c in chats for t in sent[c])

            with contextlib.suppress(SystemExit):  # the ones never answered are counted
                await until(answered, args.timeout, "the last answers")
            wall = time.perf_counter() - began
        finally:
            for process in replicas:
                if process.poll() is None:
                    process.send_signal(signal.SIGTERM)
            for process in replicas:
                process.wait(timeout=30)
            await tg.stop()
            await model.stop()
    result = tally(sent, lambda chat: [t or "" for t in tg.chat_texts(chat)])
    return result, done_faults, wall


def chaos_report(result: Tally, faults: Faults, wall: float, args: argparse.Namespace) -> None:
    print(
        f"{args.replicas} replicas, {wall:.0f} s: {faults.restarts} server restarts, "
        f"{faults.locks_cut} lock connections cut in {faults.cuts} tries, "
        f"{faults.kills} replicas SIGKILLed and started again"
    )
    print(f"messages sent          {result.sent:>6}")
    print(f"answered once          {result.once:>6}")
    print(f"answered twice or more {result.twice:>6}")
    print(f"never answered         {result.never:>6}")
    print(f"out of order           {result.out_of_order:>6}")
    lines = sum(len(found) for found in result.others.values())
    print(
        f"other lines (apologies) {lines:>5} to {len(result.others)} people, "
        f"at most {result.most_others()} to one"
    )
    for line, n in Counter(t for found in result.others.values() for t in found).most_common(3):
        print(f"  {n} x {line[:100]!r}")


def report(rows: list[Row], rate: float) -> None:
    def per_turn(seconds: float | None, row: Row) -> str:
        return "n/a" if seconds is None else f"{seconds * 1000 / row.turns:.1f}"

    head = ("replicas", "turns", "wall s", "turns/s", "replica CPU", "PG CPU", "fakes CPU")
    print("  ".join(f"{h:>11}" for h in head) + "   (CPU: ms/turn)")
    for row in rows:
        cells = (
            str(row.replicas),
            str(row.turns),
            f"{row.wall:.1f}",
            f"{row.turns / row.wall:.1f}",
            per_turn(row.replica_cpu, row),
            per_turn(row.pg_cpu, row),
            per_turn(row.fakes_cpu, row),
        )
        print("  ".join(f"{c:>11}" for c in cells))
    for row in rows:
        spent = row.replica_cpu + (row.pg_cpu or 0) + row.fakes_cpu
        calls = sum(row.calls.values()) / row.turns
        methods = ", ".join(f"{n / row.turns:.1f} {m}" for m, n in row.calls.most_common())
        cuts = statistics.quantiles(row.waits, n=100, method="inclusive")
        latency = f"p50 {cuts[49] * 1000:.0f} ms, p99 {cuts[98] * 1000:.0f} ms"
        verdict = "all answered once, in order" if not row.wrong else f"{row.wrong} people WRONG"
        cores = os.cpu_count() or 1
        print(
            f"{row.replicas} replica(s): {verdict}; reply latency {latency}\n"
            f"  {spent / row.wall:.2f} of {cores} cores busy with this bench, "
            f"{max(0.0, row.machine_cpu - spent) / row.wall:.2f} with other processes; its CPU "
            f"{spent * 1000 / row.turns:.1f} ms/turn: the cores allow "
            f"{cores * row.turns / spent:.0f} turns/s\n"
            f"  Telegram calls/turn {calls:.1f} ({methods}); "
            + (
                f"the bot's {rate:g} calls/s (python-telegram-bot's AIORateLimiter) allow "
                f"{rate / calls:.0f} turns/s"
                if rate
                else "no rate limit (--calls-per-second 0)"
            )
        )


async def bench(url: str, args: argparse.Namespace) -> list[Row]:
    rows = []
    for count in sorted({1, args.replicas}):
        with pg_schema(url) as schema:
            postmaster = postmaster_of(schema)
            rows.append(await one_run(count, schema, postmaster, args))
    return rows


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--replicas", type=int, default=3)
    parser.add_argument("--people", type=int, default=40)
    parser.add_argument("--messages", type=int, default=10)
    parser.add_argument("--storage", default=EMBEDDED, help="a postgresql:// URL or 'embedded'")
    parser.add_argument("--edit-interval", type=float, default=1.0, help="telegram.edit_interval")
    parser.add_argument(
        "--calls-per-second",
        dest="rate",
        type=float,
        default=30.0,
        help="telegram.calls_per_second, the bot's (0: no limit)",
    )
    parser.add_argument("--timeout", type=float, default=60.0, help="per reply, seconds")
    parser.add_argument("--chaos", action="store_true", help="break things meanwhile")
    parser.add_argument("--faults", type=int, default=6, help="--chaos: how many (in turn)")
    parser.add_argument("--every", type=float, default=4.0, help="--chaos: seconds between faults")
    parser.add_argument("--down", type=float, default=2.0, help="--chaos: a killed replica's s")
    args = parser.parse_args(argv)
    print(describe())
    if args.chaos:
        if args.storage != EMBEDDED:
            sys.exit("--chaos restarts the server: it runs on an embedded one of its own")
        with ChaosServer.started() as chaos:
            print(
                f"{server_version(chaos.url)}; {args.people} people in a closed loop, "
                f"{args.faults} faults, one every {args.every:g} s",
                flush=True,
            )
            result, faults, wall = asyncio.run(chaos_run(chaos, args))
        chaos_report(result, faults, wall, args)
        print(describe())
        return
    with server(args.storage) as url:
        print(
            f"{server_version(url)}; {args.people} people x {args.messages} messages, "
            f"closed loop, webhook mode, an instant echoing model",
            flush=True,
        )
        rows = asyncio.run(bench(url, args))
    report(rows, args.rate)
    print(describe())


if __name__ == "__main__":
    main()
