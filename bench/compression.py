"""What compression costs a turn, with an instant auxiliary model.

Prints (1) the per-turn cost of the check every turn pays (cutting long
messages and estimating the request) on a session just under the default
budget, and (2) the time of one rotation into a child session (read the
parent, pick the tail, build the summary request, write the child), from a
session of about 190,000 characters with tool pairs, on a real state.db.

    .venv/bin/python bench/compression.py [--messages 400] [--runs 20]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx2

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

from gateway.agent.compression import Compressor, fixed_chars, message_chars  # noqa: E402
from gateway.agent.model_client import ModelClient  # noqa: E402
from memory_core import NewMessage, SearchScope, SessionOrigin, SessionStore  # noqa: E402

BUDGET = 200_000
SCHEMAS = [
    {"type": "function", "function": {"name": f"t{i}", "description": "d" * 1500}} for i in range(4)
]


def instant_auxiliary() -> ModelClient:
    body = {
        "id": "x",
        "object": "chat.completion",
        "created": 0,
        "model": "aux",
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": "A summary."},
                "finish_reason": "stop",
            }
        ],
    }

    async def handle(request: httpx2.Request) -> httpx2.Response:
        await request.aread()
        return httpx2.Response(200, json=body)

    client = httpx2.AsyncClient(transport=httpx2.MockTransport(handle))
    return ModelClient("http://127.0.0.1:9/v1", None, "aux", 30.0, http_client=client)


def session_messages(count: int, key: str) -> list[NewMessage]:
    size = int(BUDGET * 0.95) // count
    out: list[NewMessage] = []
    for i in range(count):
        t = float(i)
        if i % 4 == 1:
            calls = json.dumps(
                [
                    {
                        "id": f"c{i}",
                        "type": "function",
                        "function": {"name": "memory", "arguments": "{}"},
                    }
                ]
            )
            out.append(NewMessage("assistant", "", t, key=f"{key}{i}", tool_calls=calls))
        elif i % 4 == 2:
            out.append(NewMessage("tool", "r" * size, t, key=f"{key}{i}", tool_call_id=f"c{i - 1}"))
        else:
            out.append(
                NewMessage(
                    "user" if i % 4 == 0 else "assistant", "w " * (size // 2), t, key=f"{key}{i}"
                )
            )
    return out


def hook_cost(count: int) -> float:
    compressor = Compressor(None, None, BUDGET)  # type: ignore[arg-type]  # fit/due need neither
    history = [{"role": m.role, "content": m.content} for m in session_messages(count, "h")]
    runs = []
    for _ in range(200):
        started = time.perf_counter()
        clipped, text = compressor.fit(history, "the next message")
        size = fixed_chars("p" * 2000, text, SCHEMAS) + sum(message_chars(m) for m in clipped)
        compressor.due(size)
        runs.append(time.perf_counter() - started)
    return statistics.median(runs)


async def rotations(count: int, runs: int) -> list[float]:
    times = []
    with tempfile.TemporaryDirectory() as tmp:
        async with SessionStore(Path(tmp) / "state.db") as store:
            compressor = Compressor(store, instant_auxiliary(), BUDGET)
            for r in range(runs):
                origin = SessionOrigin(f"k{r}", "telegram", f"telegram-{r}", str(r), "private")
                msgs = [*session_messages(count, "m"), NewMessage("user", "now", 1e6, key="now")]
                parent = (await store.append_messages(origin=origin, messages=msgs)).session_id
                started = time.perf_counter()
                child = await compressor.rotate(
                    parent, SearchScope(origin.user_key), 9_000, 195_000
                )
                times.append(time.perf_counter() - started)
                assert child is not None
    return times


def main() -> None:
    print(describe())
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", type=int, default=400)
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    print(
        f"per-turn check, {args.messages} messages, ~190,000 chars: "
        f"{hook_cost(args.messages) * 1e3:.2f} ms (median)"
    )
    times = asyncio.run(rotations(args.messages, args.runs))
    print(
        f"rotation into a child (instant model), {args.runs} runs: "
        f"median {statistics.median(times) * 1e3:.1f} ms, max {max(times) * 1e3:.1f} ms"
    )


if __name__ == "__main__":
    main()
