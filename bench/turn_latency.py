"""Added latency per turn along one long session, with an instant model.

One person talks to the bot for `--turns` turns in one private chat, one turn
at a time, through `Conversations.handle` with the real services (as in
bench/turns.py: a state.db already holding `--history` messages, the history
recall provider, tools, prompts, the session writer); only the model's HTTP
transport is replaced by an in-process endpoint that answers at once.
"Added latency" is a turn's wall time less the time spent inside that
endpoint. The session grows by two messages a turn, so turn 300 sends about
600 messages.

It prints the p50/p95 of the added latency at turns 1-75 and 290-300 (and
every further window of `--window` turns past 300), the number of messages
each window's requests carried, and, for the last request, what the `openai`
client's request-parameter transformation (`async_maybe_transform`, the cost
of passing the messages as typed parameters rather than in `extra_body`)
takes on that same body: the cost the current request path avoids.

    python bench/turn_latency.py                   # 300 turns, 20,000 stored messages
    python bench/turn_latency.py --turns 1000
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import httpx2
from openai._utils import async_maybe_transform
from openai.types.chat import completion_create_params

sys.path.insert(0, str(Path(__file__).resolve().parent))

from turns import ROOT, SYLLABLES, Sink, build_store, load, percentile, sse_reply, words

from gateway.agent.model_client import ModelClient
from gateway.app import open_services
from gateway.config import load_config
from gateway.conversation import Conversations
from gateway.messages import InboundMessage


class InstantModel:
    """An in-process chat endpoint that answers at once; keeps each request's body."""

    def __init__(self) -> None:
        self.reply = sse_reply("Noted, thanks.")
        self.spent = 0.0  # seconds inside the endpoint since the last reset
        self.bodies: list[bytes] = []

    async def handle(self, request: httpx2.Request) -> httpx2.Response:
        started = time.perf_counter()
        self.bodies.append(await request.aread())
        response = httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=self.reply
        )
        self.spent += time.perf_counter() - started
        return response

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handle))


async def session(args: argparse.Namespace, home: Path) -> tuple[list[float], InstantModel]:
    """Runs the turns; returns each turn's added latency in seconds and the fake."""
    env = {"MNEMO_HOME": str(home), "MNEMO_SKILLS_DIR": str(ROOT / "skills")}
    env["OPENAI_BASE_URL"] = "http://model.invalid/v1"  # never reached: the transport is fake
    config = load_config(None, environ=env)
    rng = random.Random(args.seed)
    vocab = ["".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 3))) for _ in range(5000)]
    texts = [words(rng, vocab, rng.randint(4, 12)) for _ in range(args.turns)]
    fake = InstantModel()
    latencies: list[float] = []
    async with open_services(config) as opened:
        model = ModelClient(
            config.llm.base_url,
            None,
            config.llm.model,
            config.llm.timeout,
            stall_timeout=config.llm.stall_timeout,
            limiter=opened.model.limiter,
            http_client=fake.client(),
        )
        conversations = Conversations(replace(opened, model=model))
        for text in texts:
            message = InboundMessage(
                platform="telegram", chat_id="0", chat_type="private", user_id="0", text=text
            )
            fake.spent = 0.0
            started = time.perf_counter()
            await conversations.handle(message, Sink())
            latencies.append(time.perf_counter() - started - fake.spent)
        await conversations.close()
        await model.close()
    return latencies, fake


def windows(turns: int, width: int) -> list[tuple[int, int]]:
    """1-based inclusive turn ranges to report."""
    out = [(1, min(75, turns))]
    if turns >= 290:
        out.append((290, 300))
    end = 300 + width
    while end <= turns:
        out.append((end - width, end))
        end += width
    return out


async def transform_ms(body: dict[str, object], repeat: int = 5) -> float:
    """The median time of the `openai` client's typed-parameter transformation of `body`."""
    params = completion_create_params.CompletionCreateParamsStreaming
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        await async_maybe_transform(body, params)
        timings.append((time.perf_counter() - started) * 1000)
    return sorted(timings)[len(timings) // 2]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--history", type=int, default=20_000, help="messages already stored")
    parser.add_argument("--window", type=int, default=100, help="report width past turn 300")
    parser.add_argument("--seed", type=int, default=11)
    args = parser.parse_args()
    print(f"{os.cpu_count()} CPUs, Python {platform.python_version()}, "
          f"SQLite {sqlite3.sqlite_version}; load average before: {load()}")  # fmt: skip
    with tempfile.TemporaryDirectory(prefix="mnemo-turn-latency-") as folder:
        home = Path(folder) / "data"
        build_store(home, args.history, args.seed)
        latencies, fake = asyncio.run(session(args, home))
    sizes = [len(json.loads(b).get("messages", [])) for b in fake.bodies]
    per_turn = len(fake.bodies) / len(latencies)
    for first, last in windows(len(latencies), args.window):
        ms = [v * 1000 for v in latencies[first - 1 : last]]
        carried = sizes[int((first - 1) * per_turn) : int(last * per_turn)] or [0]
        print(f"turns {first:4d}-{last:<4d} added latency p50 {percentile(ms, 0.5):6.1f} ms  "
              f"p95 {percentile(ms, 0.95):6.1f} ms  max {max(ms):6.1f} ms  "
              f"({min(carried)}-{max(carried)} messages a request)")  # fmt: skip
    last_body = json.loads(fake.bodies[-1])
    cost = asyncio.run(transform_ms(last_body))
    print(f"the typed-parameter transformation (async_maybe_transform) of the last request, "
          f"{len(last_body['messages'])} messages, {len(fake.bodies[-1]):,} bytes: {cost:.1f} ms "
          f"(not paid: messages and tools go in extra_body)")  # fmt: skip
    print(f"load average after: {load()}")


if __name__ == "__main__":
    main()
