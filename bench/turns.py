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

    python bench/turns.py                     # 100 sessions, 5,000 turns, 100,000 messages
    python bench/turns.py --turns 1000 --history 20000 --long 305
    python bench/turns.py --turns 0 --solo 0 --long 1005     # the long session alone
"""

from __future__ import annotations

import argparse
import asyncio
import contextvars
import json
import os
import random
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx2
from machine import describe
from openai._utils import async_maybe_transform
from openai.types.chat import completion_create_params

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
        started = time.perf_counter()
        body = await request.aread()
        if bodies is not None:
            bodies.append(body)
        response = httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=reply
        )
        spent = _model_time.get(None)
        if spent is not None:
            spent.append(time.perf_counter() - started)
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


def report(label: str, latencies: list[float], elapsed: float, cpu: float) -> None:
    """One line: rate, added latency, and this process's CPU time per turn (all threads)."""
    ms = [v * 1000 for v in latencies]
    print(
        f"{label:12s} {len(ms):6,} turns in {elapsed:6.1f} s = {len(ms) / elapsed:6.1f} turns/s  "
        f"added latency p50 {percentile(ms, 0.5):6.1f} ms  p99 {percentile(ms, 0.99):6.1f} ms  "
        f"max {max(ms):6.1f} ms  CPU {1000 * cpu / len(ms):4.1f} ms/turn"
    )


async def closed_loop(
    conversations: Conversations, sessions: int, turns: int, rng: random.Random, texts: list[str]
) -> float:
    per = [turns // sessions + (1 if i < turns % sessions else 0) for i in range(sessions)]
    # Each person's messages chosen up front: the same seed gives the same ones, however
    # the turns interleave.
    plan = [[rng.choice(texts) for _ in range(n)] for n in per]
    latencies: list[float] = []

    async def person(i: int) -> None:
        for text in plan[i]:
            latencies.append(await one_turn(conversations, i, text))

    started, cpu = time.perf_counter(), time.process_time()
    await asyncio.gather(*(asyncio.create_task(person(i)) for i in range(sessions)))
    elapsed = time.perf_counter() - started
    report("closed loop", latencies, elapsed, time.process_time() - cpu)
    return len(latencies) / elapsed


async def paced(
    conversations: Conversations,
    sessions: int,
    turns: int,
    rate: float,
    rng: random.Random,
    texts: list[str],
) -> None:
    started, cpu = time.perf_counter(), time.process_time()
    tasks = []
    for n in range(turns):
        due = started + n / rate
        delay = due - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        text = rng.choice(texts)
        tasks.append(asyncio.create_task(one_turn(conversations, n % sessions, text)))
    latencies = await asyncio.gather(*tasks)
    elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
    report(f"paced {rate:.0f}/s", list(latencies), elapsed, cpu)


async def solo(
    conversations: Conversations, turns: int, rng: random.Random, texts: list[str]
) -> None:
    latencies = []
    started, cpu = time.perf_counter(), time.process_time()
    for n in range(turns):
        latencies.append(await in_own_context(conversations, n % 10, rng.choice(texts)))
    report("alone", latencies, time.perf_counter() - started, time.process_time() - cpu)


class LongSession:
    """One person's session, one turn at a time; per turn its added latency, CPU time and
    request bodies (the instant endpoint keeps them in `bodies`)."""

    def __init__(
        self,
        conversations: Conversations,
        http: httpx2.AsyncClient,
        bodies: list[bytes],
        person: int,
    ) -> None:
        self.conversations = conversations
        self.http = http
        self.bodies = bodies
        self.person = person
        self.added: list[float] = []  # seconds, per turn
        self.cpu: list[float] = []  # this process's CPU seconds (all threads), per turn
        self.sent: list[list[bytes]] = []  # the bodies of each turn's requests
        self.floors: dict[int, float] = {}  # turn number: seconds of the raw POSTs

    async def turn(self, text: str) -> None:
        before = len(self.bodies)
        cpu = time.process_time()
        self.added.append(await one_turn(self.conversations, self.person, text))
        self.cpu.append(time.process_time() - cpu)
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


async def long_session(services: Services, turns: int, texts: list[str], runs: int) -> None:
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
    for run in range(runs):
        session = LongSession(conversations, http, bodies, LONG_PERSON - run)
        bodies.clear()
        for n in range(1, turns + 1):
            await session.turn(texts[(n - 1) % len(texts)])
            if n in reported:
                session.floors[n] = await session.floor(session.sent[-1])
        sessions.append(session)
    await conversations.close()
    await model.close()
    print(f"one long session, {turns:,} turns" + (f", {runs} runs pooled:" if runs > 1 else ":"))
    for first, last in WINDOWS:
        if last <= turns:
            _window(sessions, first, last)
    body = sessions[-1].sent[-1][-1]
    cost = await transform_ms(json.loads(body))
    print(f"  not paid: the openai client's typed-parameter transformation of the last body "
          f"({len(body):,} bytes) would take {cost:.1f} ms")  # fmt: skip


def _window(sessions: list[LongSession], first: int, last: int) -> None:
    """One line: turns `first` to `last` (1-based, inclusive) of every session."""
    turns = range(first, last + 1)
    added = [1000 * s.added[n - 1] for s in sessions for n in turns]
    floor = [1000 * s.floors[n] for s in sessions for n in turns]
    cpu = 1000 * sum(s.cpu[n - 1] for s in sessions for n in turns) / len(added)
    sizes = [len(json.loads(b)["messages"]) for n in (first, last) for b in sessions[0].sent[n - 1]]
    print(f"  turns {first:4d}-{last:<4d} added latency p50 {percentile(added, 0.5):5.1f} ms  "
          f"p95 {percentile(added, 0.95):5.1f} ms   floor (raw POST of the same body) "
          f"p50 {percentile(floor, 0.5):5.2f} ms  p95 {percentile(floor, 0.95):5.2f} ms   "
          f"CPU {cpu:4.1f} ms/turn  ({min(sizes)}-{max(sizes)} messages a request)")  # fmt: skip


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


async def run(args: argparse.Namespace, home: Path) -> None:
    env = {"MNEMO_HOME": str(home), "MNEMO_SKILLS_DIR": str(ROOT / "skills")}
    env["OPENAI_BASE_URL"] = "http://model.invalid/v1"  # never reached: the transport is fake
    config = load_config(None, environ=env)
    rng = random.Random(args.seed)
    vocab = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(5000)]
    texts = [words(rng, vocab, 6) for _ in range(1000)]  # made up front: not the turn's cost
    long_texts = [words(rng, vocab, rng.randint(4, 12)) for _ in range(args.long)]
    async with open_services(config) as opened:
        model = _model_client(opened, instant_model())
        services: Services = replace(opened, model=model)
        print(f"llm.max_concurrency {config.llm.max_concurrency}")
        cpu0, wall0 = time.process_time(), time.perf_counter()
        conversations = build_conversations(services, AccessPolicy.everyone())
        if args.turns > 0:
            rate = await closed_loop(conversations, args.sessions, args.turns, rng, texts)
            rate = 0.6 * rate if args.rate is None else args.rate
            if rate > 0 and args.paced_turns > 0:
                await paced(conversations, args.sessions, args.paced_turns, rate, rng, texts)
        if args.solo > 0:
            await solo(conversations, args.solo, rng, texts)
        await conversations.close()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        await model.close()
        if args.long > 0:
            await long_session(opened, args.long, long_texts, args.long_runs)
    print(
        f"this process used {cpu:.1f} s CPU in {wall:.1f} s before the long session "
        f"({100 * cpu / wall:.0f}% of one core); load average after: {load()}"
    )


def build_store(home: Path, messages: int, seed: int) -> None:
    rng = random.Random(seed + 1)
    vocab = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(5000)]
    started = time.perf_counter()
    lines = history_lines(messages, rng, vocab)
    home.mkdir(parents=True, exist_ok=True)
    with SessionDB(home / "state.db") as db:
        result = db.import_lines(lines)
        db.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    print(f"store: {result.messages_inserted:,} messages in {result.sessions_created:,} sessions "
          f"for {PEOPLE:,} people, built in {time.perf_counter() - started:.1f} s")  # fmt: skip


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
    args = parser.parse_args()
    print(describe())
    with tempfile.TemporaryDirectory(prefix="mnemo-turns-") as folder:
        home = Path(folder) / "data"
        build_store(home, args.history, args.seed)
        asyncio.run(run(args, home))


if __name__ == "__main__":
    main()
