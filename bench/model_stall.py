"""How long a stalled model endpoint keeps a person waiting before they are told.

Against the fake OpenAI server (tests/fakes/openai.py), on 127.0.0.1, it times
two stalls: one before the response headers (every request hangs), and one in
the middle of a reply (after some text was shown). "before" is the client as
configured until issue 10 (`openai.AsyncOpenAI(timeout=T, max_retries=2)`:
the library's own retries, a per-read timeout of T); "after" is `ModelClient`
with `llm.timeout` T and `llm.stall_timeout` S.

    python bench/model_stall.py                          # defaults: T=60, S=30 (about 5 min)
    python bench/model_stall.py --timeout 6 --stall-timeout 3        # the same, scaled down
    python bench/model_stall.py --skip-before                        # "after" only (about 1 min)
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import openai

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

from gateway.agent.model_client import ModelClient  # noqa: E402
from gateway.errors import ModelError  # noqa: E402
from tests.fakes.openai import FakeOpenAI, Fault  # noqa: E402

MESSAGES = [{"role": "user", "content": "hello"}]
TEXT = "a reply that starts and then goes silent"


async def _old(fake: FakeOpenAI, timeout: float) -> None:
    client = openai.AsyncOpenAI(
        base_url=fake.url + "/v1", api_key="sk-bench", timeout=timeout, max_retries=2
    )
    try:
        stream = await client.chat.completions.create(
            model="m",
            messages=MESSAGES,
            stream=True,  # type: ignore[arg-type]
        )
        async for _ in stream:
            pass
    finally:
        await client.close()


async def _new(fake: FakeOpenAI, timeout: float, stall: float) -> None:
    client = ModelClient(fake.url + "/v1", "sk-bench", "m", timeout, stall_timeout=stall)
    try:
        await client.stream_chat(MESSAGES)
    finally:
        await client.close()


async def _time(
    call: Callable[[FakeOpenAI], Awaitable[None]], mid_stream: bool
) -> tuple[float, int, str]:
    """Seconds until the call fails, the requests the server saw, and what was raised."""
    async with FakeOpenAI() as fake:
        if mid_stream:
            fake.say(TEXT, fault=Fault.stall(after=4))
        for _ in range(10):  # every later request (a retry) hangs before its headers
            fake.say(TEXT, fault=Fault.stall())
        started = time.monotonic()
        try:
            await call(fake)
            raised = "nothing"
        except (ModelError, openai.OpenAIError) as exc:
            raised = type(exc).__name__
        elapsed = time.monotonic() - started
        return elapsed, len(fake.requests), raised


async def main() -> None:
    print(describe())
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--stall-timeout", type=float, default=30.0)
    parser.add_argument("--skip-before", action="store_true")
    args = parser.parse_args()
    t, s = args.timeout, args.stall_timeout
    print(f"llm.timeout {t:g} s, llm.stall_timeout {s:g} s")
    for where, mid in (("before headers", False), ("mid-stream", True)):
        if not args.skip_before:
            secs, reqs, raised = await _time(lambda f: _old(f, t), mid)
            print(f"  before  stall {where:15} told after {secs:7.2f} s  {reqs} requests  {raised}")
        secs, reqs, raised = await _time(lambda f: _new(f, t, s), mid)
        print(f"  after   stall {where:15} told after {secs:7.2f} s  {reqs} requests  {raised}")


if __name__ == "__main__":
    asyncio.run(main())
