"""Turn throughput and the latency a turn adds on top of the model.

Builds a state.db already holding `--history` messages (imported as JSON
Lines, spread over 1,000 people; the bench's people are among them, so the
history recall provider searches a real history on every turn), opens the
bot's services as `mnemo run` does, and replaces only the model's HTTP
transport with an in-process endpoint that answers at once (a canned SSE
reply, through the real `openai` client and our `ModelClient`). Everything
else is real: the session store and its writer, the history recall provider
and its background worker, tools, prompts, the turn loop.

Three runs, each through `Conversations.handle` (its sink keeps nothing):

* closed loop: `--sessions` people talk at once, each sending its next
  message as soon as the last is answered, `--turns` turns in all: turns/s,
  and the latency under that load (by Little's law, about sessions / rate);
* paced: the same sessions, messages arriving at `--rate` turns/s in all
  (`--paced-turns` turns; by default at 60% of the closed loop's rate, a load
  the machine sustains): the latency at that offered load;
* alone: one turn at a time (`--solo` turns): the bare cost of a turn.

"Added latency" is a turn's wall time from `handle()` to its end, less the
time spent inside the fake model endpoint. The machine's load average is
printed before and after, since other work on it slows every figure.

    python bench/turns.py                     # 100 sessions, 5,000 turns, 100,000 messages
    python bench/turns.py --turns 1000 --history 20000
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

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gateway.agent.model_client import ModelClient  # noqa: E402
from gateway.app import open_services  # noqa: E402
from gateway.config import load_config  # noqa: E402
from gateway.conversation import Conversations, Services  # noqa: E402
from gateway.messages import InboundMessage  # noqa: E402
from memory_core.sessions import SessionDB  # noqa: E402

SYLLABLES = [a + b for a in "bcdfghklmnprstvwz" for b in ("a", "e", "i", "o", "u", "ou")]
PEOPLE = 1000

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


def instant_model() -> httpx2.AsyncClient:
    """An HTTP client whose chat endpoint answers at once, timing itself per turn."""
    reply = sse_reply("Noted, thanks.")

    async def handle(request: httpx2.Request) -> httpx2.Response:
        started = time.perf_counter()
        await request.aread()
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
    latencies: list[float] = []

    async def person(i: int) -> None:
        for _ in range(per[i]):
            latencies.append(await one_turn(conversations, i, rng.choice(texts)))

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


async def run(args: argparse.Namespace, home: Path) -> None:
    env = {"MNEMO_HOME": str(home), "MNEMO_SKILLS_DIR": str(ROOT / "skills")}
    env["OPENAI_BASE_URL"] = "http://model.invalid/v1"  # never reached: the transport is fake
    config = load_config(None, environ=env)
    rng = random.Random(args.seed)
    vocab = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(5000)]
    texts = [words(rng, vocab, 6) for _ in range(1000)]  # made up front: not the turn's cost
    async with open_services(config) as opened:
        model = ModelClient(
            config.llm.base_url,
            None,
            config.llm.model,
            config.llm.timeout,
            stall_timeout=config.llm.stall_timeout,
            limiter=opened.model.limiter,
            http_client=instant_model(),
        )
        services: Services = replace(opened, model=model)
        print(
            f"llm.max_concurrency {config.llm.max_concurrency}; "
            f"load average before: {load()} on {os.cpu_count()} CPUs"
        )
        cpu0, wall0 = time.process_time(), time.perf_counter()
        conversations = Conversations(services)
        rate = await closed_loop(conversations, args.sessions, args.turns, rng, texts)
        rate = 0.6 * rate if args.rate is None else args.rate
        if rate > 0 and args.paced_turns > 0:
            await paced(conversations, args.sessions, args.paced_turns, rate, rng, texts)
        if args.solo > 0:
            await solo(conversations, args.solo, rng, texts)
        await conversations.close()
        cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
        await model.close()
    print(
        f"this process used {cpu:.1f} s CPU in {wall:.1f} s ({100 * cpu / wall:.0f}% of one "
        f"core); load average after: {load()}"
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
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="mnemo-turns-") as folder:
        home = Path(folder) / "data"
        build_store(home, args.history, args.seed)
        asyncio.run(run(args, home))


if __name__ == "__main__":
    main()
