"""Turn throughput and the latency a turn adds on top of the model.

Builds a state.db already holding `--history` messages (imported as JSON
Lines, spread over 1,000 people; the bench's people are among them, so the
history recall provider searches a real history on every turn), opens the
bot's services as `mnemo run` does, and replaces only the model's HTTP
transport with an in-process endpoint that answers at once (a canned SSE
reply, through the real `openai` client and our `ModelClient`). Everything
else is real: the session store and its writer, the history recall provider
and its background worker, tools, prompts, the turn loop.

Four runs, each through `Conversations.handle` (its sink keeps nothing):

* closed loop: `--sessions` people talk at once, each sending its next
  message as soon as the last is answered, `--turns` turns in all: turns/s,
  and the latency under that load (by Little's law, about sessions / rate);
* paced: the same sessions, messages arriving at `--rate` turns/s in all
  (`--paced-turns` turns; by default at 60% of the closed loop's rate, a load
  the machine sustains): the latency at that offered load;
* alone: one turn at a time (`--solo` turns): the bare cost of a turn;
* one long session: one person (with a stored history of their own) sends
  `--long` messages in one private chat, one at a time. The session grows by
  two messages a turn (turn 1,000 sends about 2,000), so this shows what grows
  with its length. At turns 1-10, 95-105, 295-305 and 995-1,005 it prints the
  added latency (p50/p95) beside the floor: a raw HTTP POST of the same request
  body to the same endpoint with the same HTTP client (what carrying that body
  costs at all, less the endpoint's own time) and this process's CPU time per
  turn (all threads: less swayed than wall time by other work on the
  machine); then what the `openai` client's typed-parameter transformation of
  the last body would cost (not paid: `ModelClient` posts the body it
  encoded). `WARM_UP` turns of other people come first, so that a run of the
  long session alone starts warm, as in service. `--long-runs N` runs N such
  sessions (N people, one after the other) and pools their windows, for a
  steadier figure on a busy machine.

"Added latency" is a turn's wall time from `handle()` to its end, less the
time spent inside the fake model endpoint. The machine (with its load
average) is printed first and the load average at the end, since other work
on it slows every figure. The same `--seed` gives the same store and the same
messages in the same order.

`--storage` names the stores to run, one after the other, each on a store of
its own built the same way: ``sqlite`` (state.db under a temporary home) and
``postgres`` (a schema of its own on `--pg`: a postgresql:// URL, or
``embedded``, the test extras' PostgreSQL started for the run by
bench/pg_server.py); `--rounds N` alternates them N times. Every CPU figure is
split into the replica (this process, the bot, less the fakes), the server
(PostgreSQL's processes, from /proc; none for SQLite) and the fakes (the
instant model endpoint's own CPU time, on the event loop). `--count` counts what
each PostgreSQL turn sends (bench/pg_count.py: statements by kind, round trips,
rows) in the closed loop and in the long session's windows. A table of both
stores side by side ends the run.

    python bench/turns.py                     # 100 sessions, 5,000 turns, 100,000 messages
    python bench/turns.py --turns 1000 --history 20000 --long 305
    python bench/turns.py --turns 0 --solo 0 --long 1005     # the long session alone
    python bench/turns.py --storage sqlite,postgres --sessions 10 --turns 2000 --solo 0 \
        --paced-turns 0 --long 0 --rounds 2 --count       # PostgreSQL beside SQLite
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import contextvars
import io
import itertools
import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path

import httpx2
from machine import describe
from openai._utils import async_maybe_transform
from openai.types.chat import completion_create_params
from pg_count import ServerCpu, StatementCounter
from pg_top import TopStatements

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.access import AccessPolicy  # noqa: E402
from gateway.agent.model_client import ModelClient  # noqa: E402
from gateway.app import Services, build_conversations, open_services  # noqa: E402
from gateway.config import load_config  # noqa: E402
from gateway.conversation import Conversations  # noqa: E402
from gateway.messages import InboundMessage  # noqa: E402
from memory_core.sessions import SessionDB  # noqa: E402

SYLLABLES = [a + b for a in "bcdfghklmnprstvwz" for b in ("a", "e", "i", "o", "u", "ou")]
PEOPLE = 1000
LONG_PERSON = PEOPLE - 1  # the long session's person: in the store, not among `--sessions`
WINDOWS = ((1, 10), (95, 105), (295, 305), (995, 1005))  # turns of the long session reported
WARM_UP = 20  # turns of other people before the long session starts

# Seconds spent inside the fake model during the current turn (one list per turn).
_model_time: contextvars.ContextVar[list[float]] = contextvars.ContextVar("model_time")
_message_ids = itertools.count(1)
_fake_cpu = [0.0]  # CPU seconds the fake model endpoint spent, all turns


@dataclass
class Meter:
    """CPU seconds so far: this process, the PostgreSQL server (None: SQLite) and the fakes."""

    server: ServerCpu | None = None
    counter: StatementCounter | None = None
    top: TopStatements | None = None  # --top: the server's statements by time
    top_limit: int = 0

    def read(self) -> tuple[float, float | None, float]:
        """Now: this process's CPU seconds (taken after the server's), the server's, the
        fakes'."""
        spent = None if self.server is None else self.server.seconds()
        return time.process_time(), spent, _fake_cpu[0]

    def split(self, before: tuple[float, float | None, float], turns: int) -> Split:
        """Milliseconds per turn since `before`: (replica, server, fakes). This process's
        time is taken before the server's is read (as `read` takes it after): reading
        /proc is not counted as the turns' CPU."""
        cpu = time.process_time()
        now = (cpu, None if self.server is None else self.server.seconds(), _fake_cpu[0])
        fakes = now[2] - before[2]
        replica = now[0] - before[0] - fakes
        server = None if now[1] is None or before[1] is None else now[1] - before[1]
        per = 1000 / max(1, turns)
        return Split(replica * per, None if server is None else server * per, fakes * per)


@dataclass(frozen=True)
class Split:
    replica: float
    server: float | None
    fakes: float

    def __str__(self) -> str:
        server = "   -" if self.server is None else f"{self.server:4.1f}"
        total = self.replica + (self.server or 0.0)
        return (f"CPU {total:4.1f} ms/turn = replica {self.replica:4.1f} + server {server} "
                f"(fakes {self.fakes:3.1f})")  # fmt: skip


@dataclass
class Results:
    """One store's figures, for the table at the end."""

    storage: str
    closed: list[tuple[float, Split]] = field(default_factory=list)  # (turns/s, CPU split)
    windows: dict[tuple[int, int], list[float]] = field(default_factory=dict)  # p50s, ms


def words(rng: random.Random, vocabulary: list[str], n: int) -> str:
    return " ".join(rng.choice(vocabulary) for _ in range(n)).capitalize() + "."


def history_lines(n: int, rng: random.Random, vocabulary: list[str]) -> list[str]:
    """`n` messages as JSON Lines: sessions of 10-40 messages, for `PEOPLE` people."""
    lines: list[str] = []
    start = 1_700_000_000.0
    session = 0
    while len(lines) < n:
        person = rng.randrange(PEOPLE)
        length = min(n - len(lines), rng.randint(10, 40))
        ts = start + rng.random() * 300 * 86400
        for i in range(length):
            role = "user" if i % 2 == 0 else "assistant"
            record = {
                "session": f"h{session}",
                "user": f"telegram-{person}",
                "platform": "telegram",
                "chat": str(person),
                "chat_type": "private",
                "role": role,
                "content": words(rng, vocabulary, rng.randint(4, 12) * (1 if i % 2 == 0 else 3)),
                "timestamp": ts + 30 * i,
            }
            lines.append(json.dumps(record))
        session += 1
    return lines


def sse_reply(text: str) -> bytes:
    """A whole streamed chat completion, as the API sends it."""
    base = {"id": "chatcmpl-bench", "object": "chat.completion.chunk", "created": 0, "model": "m"}
    events = [
        {**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]},
        {**base, "choices": [{"index": 0, "delta": {"content": text}}]},
        {**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]},
        {**base, "choices": [], "usage": {"prompt_tokens": 1, "completion_tokens": 1}},
    ]
    body = "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"
    return body.encode()


def instant_model(bodies: list[bytes] | None = None) -> httpx2.AsyncClient:
    """An HTTP client whose chat endpoint answers at once, timing itself per turn
    (and keeping each request's body in `bodies`, when given)."""
    reply = sse_reply("Noted, thanks.")

    async def handle(request: httpx2.Request) -> httpx2.Response:
        started, cpu = time.perf_counter(), time.thread_time()
        body = await request.aread()
        if bodies is not None:
            bodies.append(body)
        response = httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=reply
        )
        spent = _model_time.get(None)
        if spent is not None:
            spent.append(time.perf_counter() - started)
        _fake_cpu[0] += time.thread_time() - cpu
        return response

    return httpx2.AsyncClient(transport=httpx2.MockTransport(handle))


class Sink:
    async def write(self, piece: str) -> None:
        self.last = piece

    async def finish(self) -> None:
        pass


async def one_turn(conversations: Conversations, person: int, text: str) -> float:
    """One turn; returns its added latency in seconds (wall time less model time)."""
    spent: list[float] = []
    _model_time.set(spent)
    message = InboundMessage(
        platform="telegram",
        chat_id=str(person),
        chat_type="private",
        user_id=str(person),
        text=text,
        message_id=str(next(_message_ids)),  # as a platform gives: with replicas, it is queued
    )
    started = time.perf_counter()
    await conversations.handle(message, Sink())
    return time.perf_counter() - started - sum(spent)


async def in_own_context(conversations: Conversations, person: int, text: str) -> float:
    return await asyncio.create_task(one_turn(conversations, person, text))


def load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def report(label: str, latencies: list[float], elapsed: float, cpu: Split) -> None:
    """One line: rate, added latency, and the CPU time per turn (`Split`)."""
    ms = [v * 1000 for v in latencies]
    print(
        f"{label:12s} {len(ms):6,} turns in {elapsed:6.1f} s = {len(ms) / elapsed:6.1f} turns/s  "
        f"added latency p50 {percentile(ms, 0.5):6.1f} ms  p99 {percentile(ms, 0.99):6.1f} ms  "
        f"max {max(ms):6.1f} ms  {cpu}"
    )


async def closed_loop(
    conversations: Conversations,
    sessions: int,
    turns: int,
    rng: random.Random,
    texts: list[str],
    meter: Meter,
    results: Results,
) -> float:
    per = [turns // sessions + (1 if i < turns % sessions else 0) for i in range(sessions)]
    # Each person's messages chosen up front: the same seed gives the same ones, however
    # the turns interleave.
    plan = [[rng.choice(texts) for _ in range(n)] for n in per]
    latencies: list[float] = []

    async def person(i: int) -> None:
        for text in plan[i]:
            latencies.append(await one_turn(conversations, i, text))

    if meter.counter is not None:
        meter.counter.reset()
    if meter.top is not None:
        meter.top.reset()
    started, cpu = time.perf_counter(), meter.read()
    await asyncio.gather(*(asyncio.create_task(person(i)) for i in range(sessions)))
    elapsed = time.perf_counter() - started
    split = meter.split(cpu, len(latencies))
    report("closed loop", latencies, elapsed, split)
    results.closed.append((len(latencies) / elapsed, split))
    if meter.counter is not None:
        meter.counter.print_per_turn(len(latencies))
    if meter.top is not None:
        meter.top.print_per_turn(len(latencies), meter.top_limit)
    return len(latencies) / elapsed


async def paced(
    conversations: Conversations,
    sessions: int,
    turns: int,
    rate: float,
    rng: random.Random,
    texts: list[str],
    meter: Meter,
) -> None:
    started, cpu = time.perf_counter(), meter.read()
    tasks = []
    for n in range(turns):
        due = started + n / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        text = rng.choice(texts)
        tasks.append(asyncio.create_task(one_turn(conversations, n % sessions, text)))
    latencies = await asyncio.gather(*tasks)
    elapsed = time.perf_counter() - started
    report(f"paced {rate:.0f}/s", list(latencies), elapsed, meter.split(cpu, turns))


async def solo(
    conversations: Conversations, turns: int, rng: random.Random, texts: list[str], meter: Meter
) -> None:
    latencies = []
    started, cpu = time.perf_counter(), meter.read()
    for n in range(turns):
        latencies.append(await in_own_context(conversations, n % 10, rng.choice(texts)))
    report("alone", latencies, time.perf_counter() - started, meter.split(cpu, turns))


class LongSession:
    """One person's session, one turn at a time; per turn its added latency, CPU time and
    request bodies (the instant endpoint keeps them in `bodies`)."""

    def __init__(
        self,
        conversations: Conversations,
        http: httpx2.AsyncClient,
        bodies: list[bytes],
        person: int,
        meter: Meter,
    ) -> None:
        self.meter = meter
        self.conversations = conversations
        self.http = http
        self.bodies = bodies
        self.person = person
        self.added: list[float] = []  # seconds, per turn
        self.cpu: list[Split] = []  # CPU time per turn (ms: replica, server, fakes)
        self.sent: list[list[bytes]] = []  # the bodies of each turn's requests
        self.floors: dict[int, float] = {}  # turn number: seconds of the raw POSTs

    async def turn(self, text: str) -> None:
        before = len(self.bodies)
        cpu = self.meter.read()
        self.added.append(await one_turn(self.conversations, self.person, text))
        self.cpu.append(self.meter.split(cpu, 1))
        self.sent.append(self.bodies[before:])

    async def floor(self, bodies: list[bytes]) -> float:
        """Seconds a raw POST of `bodies` to the same endpoint takes, less the endpoint's."""
        spent: list[float] = []
        _model_time.set(spent)
        started = time.perf_counter()
        for body in bodies:
            async with self.http.stream(
                "POST",
                "http://model.invalid/v1/chat/completions",
                content=body,
                headers={"content-type": "application/json"},
            ) as response:
                async for _ in response.aiter_bytes():
                    pass
        return time.perf_counter() - started - sum(spent)


async def long_session(
    services: Services, turns: int, texts: list[str], runs: int, meter: Meter, results: Results
) -> None:
    """The long-session run, `runs` times (one person each, one after the other): added
    latency beside the floor at each window of `WINDOWS`, pooled over the runs."""
    bodies: list[bytes] = []
    http = instant_model(bodies)
    model = _model_client(services, http)
    conversations = build_conversations(replace(services, model=model), AccessPolicy.everyone())
    for n in range(WARM_UP):  # other people first: the process is warm, as in service
        await one_turn(conversations, n % 10, texts[n % len(texts)])
    reported = {n for first, last in WINDOWS for n in range(first, last + 1) if last <= turns}
    sessions = []
    counted: dict[tuple[int, int], StatementCounter] = {}
    for run in range(runs):
        session = LongSession(conversations, http, bodies, LONG_PERSON - run, meter)
        bodies.clear()
        for n in range(1, turns + 1):
            _top(meter, n, run == runs - 1)
            with _counting(meter, counted, n, run == runs - 1):
                await session.turn(texts[(n - 1) % len(texts)])
            if n in reported:
                session.floors[n] = await session.floor(session.sent[-1])
        _top(meter, turns + 1, run == runs - 1)
        sessions.append(session)
    await conversations.close()
    await model.close()
    print(f"one long session, {turns:,} turns" + (f", {runs} runs pooled:" if runs > 1 else ":"))
    for first, last in WINDOWS:
        if last <= turns:
            results.windows.setdefault((first, last), []).append(_window(sessions, first, last))
            if (first, last) in counted:
                counted[first, last].print_per_turn(last - first + 1, indent="    ")
    body = sessions[-1].sent[-1][-1]
    cost = await transform_ms(json.loads(body))
    print(f"  not paid: the openai client's typed-parameter transformation of the last body "
          f"({len(body):,} bytes) would take {cost:.1f} ms")  # fmt: skip


def _top(meter: Meter, n: int, last_run: bool) -> None:
    """--top: before turn `n` of the last run, the server's statement times are reset at
    a window's start and printed after its end (the turns between are not measured)."""
    if meter.top is None or not last_run:
        return
    for first, last in WINDOWS:
        if n == first:
            meter.top.reset()
        elif n == last + 1:
            print(f"  server statements, long session turns {first}-{last}:")
            meter.top.print_per_turn(last - first + 1, meter.top_limit, indent="    ")


@contextlib.contextmanager
def _counting(
    meter: Meter, counted: dict[tuple[int, int], StatementCounter], n: int, last_run: bool
) -> Iterator[None]:
    """Within a reported window of the last run, count that turn's statements into the
    window's own counter (the meter's counter, if any, only tells whether to count)."""
    window = next(((a, b) for a, b in WINDOWS if a <= n <= b), None)
    if meter.counter is None or window is None or not last_run:
        yield
        return
    own = meter.counter
    own.reset()
    yield
    total = counted.setdefault(window, StatementCounter())
    total.statements.update(own.statements)
    total.round_trips += own.round_trips
    total.rows += own.rows


def _window(sessions: list[LongSession], first: int, last: int) -> float:
    """One line: turns `first` to `last` (1-based, inclusive) of every session; the p50."""
    turns = range(first, last + 1)
    added = [1000 * s.added[n - 1] for s in sessions for n in turns]
    floor = [1000 * s.floors[n] for s in sessions for n in turns]
    cpus = [s.cpu[n - 1] for s in sessions for n in turns]
    servers = [c.server for c in cpus if c.server is not None]
    cpu = Split(
        sum(c.replica for c in cpus) / len(cpus),
        sum(servers) / len(servers) if servers else None,
        sum(c.fakes for c in cpus) / len(cpus),
    )
    sizes = [len(json.loads(b)["messages"]) for n in (first, last) for b in sessions[0].sent[n - 1]]
    p50 = percentile(added, 0.5)
    print(f"  turns {first:4d}-{last:<4d} added latency p50 {p50:5.1f} ms  "
          f"p95 {percentile(added, 0.95):5.1f} ms   floor (raw POST of the same body) "
          f"p50 {percentile(floor, 0.5):5.2f} ms  p95 {percentile(floor, 0.95):5.2f} ms   "
          f"{cpu}  ({min(sizes)}-{max(sizes)} messages a request)")  # fmt: skip
    return p50


async def transform_ms(body: dict[str, object], repeat: int = 5) -> float:
    """The median time of the `openai` client's typed-parameter transformation of `body`."""
    params = completion_create_params.CompletionCreateParamsStreaming
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        await async_maybe_transform(body, params)
        timings.append((time.perf_counter() - started) * 1000)
    return sorted(timings)[len(timings) // 2]


def _model_client(services: Services, http: httpx2.AsyncClient) -> ModelClient:
    llm = services.config.llm
    return ModelClient(
        llm.base_url,
        None,
        llm.model,
        llm.timeout,
        stall_timeout=llm.stall_timeout,
        limiter=services.model.limiter,
        http_client=http,
    )


async def run(args: argparse.Namespace, home: Path, url: str | None, results: Results) -> None:
    """One store's runs: SQLite under `home`, or PostgreSQL at `url` (a fresh schema)."""
    env = {"MNEMO_HOME": str(home), "MNEMO_SKILLS_DIR": str(ROOT / "skills")}
    env["OPENAI_BASE_URL"] = "http://model.invalid/v1"  # never reached: the transport is fake
    if url is not None:
        env["MNEMO_DATABASE_URL"] = url
    config = load_config(None, environ=env)
    rng = random.Random(args.seed)
    vocab = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(5000)]
    texts = [words(rng, vocab, 6) for _ in range(1000)]  # made up front: not the turn's cost
    long_texts = [words(rng, vocab, rng.randint(4, 12)) for _ in range(args.long)]
    meter = Meter()
    if url is not None:
        meter.server = ServerCpu(url)
        if args.count:
            meter.counter = StatementCounter()
        if args.top > 0:
            meter.top, meter.top_limit = TopStatements(url), args.top
    async with open_services(config) as opened:
        if url is not None:
            await build_pg_store(opened, args.history, args.seed)
        if meter.counter is not None:
            meter.counter.install()
        model = _model_client(opened, instant_model())
        services: Services = replace(opened, model=model)
        print(f"llm.max_concurrency {config.llm.max_concurrency}")
        cpu0, wall0 = time.process_time(), time.perf_counter()
        conversations = build_conversations(services, AccessPolicy.everyone())
        if args.turns > 0:
            rate = await closed_loop(
                conversations, args.sessions, args.turns, rng, texts, meter, results
            )
            rate = 0.6 * rate if args.rate is None else args.rate
            if rate > 0 and args.paced_turns > 0:
                await paced(conversations, args.sessions, args.paced_turns, rate, rng, texts, meter)
        if args.solo > 0:
            await solo(conversations, args.solo, rng, texts, meter)
        await conversations.close()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        await model.close()
        if args.long > 0:
            await long_session(opened, args.long, long_texts, args.long_runs, meter, results)
        if meter.counter is not None:
            meter.counter.uninstall()
    print(
        f"this process used {cpu:.1f} s CPU in {wall:.1f} s before the long session "
        f"({100 * cpu / wall:.0f}% of one core); load average after: {load()}"
    )


def store_lines(messages: int, seed: int) -> list[str]:
    rng = random.Random(seed + 1)
    vocab = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(5000)]
    return history_lines(messages, rng, vocab)


def build_store(home: Path, messages: int, seed: int) -> None:
    started = time.perf_counter()
    lines = store_lines(messages, seed)
    home.mkdir(parents=True, exist_ok=True)
    with SessionDB(home / "state.db") as db:
        result = db.import_lines(lines)
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    print(f"store: {result.messages_inserted:,} messages in {result.sessions_created:,} sessions "
          f"for {PEOPLE:,} people, built in {time.perf_counter() - started:.1f} s")  # fmt: skip


async def build_pg_store(services: Services, messages: int, seed: int) -> None:
    """The same history as `build_store`, imported into the PostgreSQL session store."""
    started = time.perf_counter()
    data = ("\n".join(store_lines(messages, seed)) + "\n").encode()
    result = await services.sessions.import_lines(io.BytesIO(data))
    print(f"store: {result.messages_inserted:,} messages in {result.sessions_created:,} sessions "
          f"for {PEOPLE:,} people, built in {time.perf_counter() - started:.1f} s")  # fmt: skip


def table(results: list[Results]) -> None:
    """Each store's figures, side by side (ranges over the rounds)."""
    print("\nside by side (ranges over the rounds):")
    for kind in dict.fromkeys(r.storage for r in results):
        mine = [r for r in results if r.storage == kind]
        closed = [c for r in mine for c in r.closed]
        line = f"  {kind:9s}"
        if closed:
            rates = [rate for rate, _ in closed]
            totals = [s.replica + (s.server or 0.0) for _, s in closed]
            replica = [s.replica for _, s in closed]
            server = [s.server for _, s in closed if s.server is not None]
            line += (f" closed loop {_range(rates, '.0f')} turns/s, CPU {_range(totals)} ms/turn "
                     f"= replica {_range(replica)}"
                     + (f" + server {_range(server)}" if server else ""))  # fmt: skip
        for first, last in sorted({w for r in mine for w in r.windows}):
            pooled = [p for r in mine for p in r.windows.get((first, last), [])]
            line += f"; long {first}-{last} p50 {_range(pooled)} ms"
        print(line)


def _range(values: list[float], spec: str = ".1f") -> str:
    low, high = min(values), max(values)
    return f"{low:{spec}}" if f"{low:{spec}}" == f"{high:{spec}}" else f"{low:{spec}}-{high:{spec}}"


@contextlib.contextmanager
def postgres(where: str) -> Iterator[str]:
    """A fresh schema's URL on `where` (a URL, or 'embedded': a server started here)."""
    from pg_server import pg_schema

    with pg_schema(where) as url:
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=100)
    parser.add_argument("--turns", type=int, default=5000)
    parser.add_argument("--history", type=int, default=100_000, help="messages already stored")
    parser.add_argument("--rate", type=float, default=None, help="paced turns/s (0: skip)")
    parser.add_argument("--paced-turns", type=int, default=1000)
    parser.add_argument("--solo", type=int, default=300, help="turns one at a time (0: skip)")
    parser.add_argument("--long", type=int, default=1005, help="turns of one session (0: skip)")
    parser.add_argument("--long-runs", type=int, default=1, help="long sessions, pooled")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--storage", default="sqlite,postgres", help="sqlite, postgres or both, comma-separated"
    )
    parser.add_argument("--pg", default="embedded", help="a postgresql:// URL or 'embedded'")
    parser.add_argument("--rounds", type=int, default=1, help="the stores alternated N times")
    parser.add_argument("--count", action="store_true", help="count PostgreSQL statements")
    parser.add_argument(
        "--top",
        type=int,
        default=0,
        help="print the N statements with the most server time (embedded: loads "
        "pg_stat_statements, which costs the server a little)",
    )
    args = parser.parse_args()
    kinds = [k.strip() for k in args.storage.split(",") if k.strip()]
    if not kinds or set(kinds) - {"sqlite", "postgres"}:
        parser.error("--storage takes sqlite, postgres or sqlite,postgres")
    print(describe())
    results: list[Results] = []
    with contextlib.ExitStack() as stack:
        server = None
        if "postgres" in kinds and args.pg == "embedded":  # one server for every round
            from pg_server import server as pg_server

            server = stack.enter_context(pg_server("embedded"))
            if args.top > 0:
                from pg_top import enable

                enable(server)
        for round_ in range(args.rounds):
            for kind in kinds:
                print(f"\n== {kind}, round {round_ + 1} of {args.rounds}")
                results.append(Results(kind))
                with tempfile.TemporaryDirectory(prefix="mnemo-turns-") as folder:
                    home = Path(folder) / "data"
                    if kind == "sqlite":
                        build_store(home, args.history, args.seed)
                        asyncio.run(run(args, home, None, results[-1]))
                        continue
                    with postgres(server or args.pg) as url:
                        asyncio.run(run(args, home, url, results[-1]))
    table(results)


if __name__ == "__main__":
    main()
