"""Reply latency with and without a background review due after every reply.

One person talks to the bot for `--turns` turns in one private chat through
`Conversations.handle`, with the bot's real services on a fresh data directory
(`open_services`, as `mnemo run` opens them) and its background work started
(`BackgroundWork` with the `JobContext` of `gateway.app.job_context`: the real
scheduler, the auxiliary model client, the stores). The model is the fake
OpenAI server (tests/fakes/openai.py) on 127.0.0.1, in a thread of its own,
echoing each message, through the real `openai` client; it holds each review's
model call for `--review-delay` seconds (a slow auxiliary model), then answers
"Nothing to save.". Two runs on fresh data:

* no review: `memory.nudge_interval` 0, so no review is ever due;
* review due: `memory.nudge_interval` 1, so every reply schedules a review.

A turn's latency is the wall time from `handle()` until the sink's `finish`
(the reply delivered), model time included. The next message follows after
`--pause` seconds, the person's think time (default 20 ms: each review has
started and is waiting for the model when the next message comes, which
cancels it; with no pause the next message cancels the review before it even
starts; with a pause longer than a review, reviews finish between turns). The
same pause applies to both runs and is not part of any latency. It prints
p50/p95/p99/max of both runs and their difference, and for the second run
after how many replies a review was scheduled (or still running), and, from
the scheduler's log, how many reviews started, how many the next message
cancelled as they began or in flight, and how many finished; and how many
review calls reached the model.

Each run's line also says how many full (generation 2) garbage collections
fell in the measured turns, the longest, and how many replies they slowed: on a
2-CPU machine a full collection of this process takes about 100 ms, and
cancelled reviews leave cyclic garbage that brings the next one sooner, which
is the review run's tail. `--gc-freeze` calls `gc.freeze()` once the modules
are imported, so later full collections skip what start-up created.

    python bench/background_latency.py                    # 200 turns, 50 ms reviews (~25 s)
    python bench/background_latency.py --gc-freeze        # the same, start-up objects frozen
    python bench/background_latency.py --pause 0.3        # reviews finish between turns
    python bench/background_latency.py --pause 0          # reviews cancelled before they start
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import logging
import os
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

from gateway.access import AccessPolicy  # noqa: E402
from gateway.app import build_conversations, job_context, open_services  # noqa: E402
from gateway.config import load_config  # noqa: E402
from gateway.jobs import BackgroundWork  # noqa: E402
from gateway.messages import InboundMessage  # noqa: E402
from tests.fakes.base import serving_in_thread  # noqa: E402
from tests.fakes.openai import FakeOpenAI  # noqa: E402

REVIEW_MARK = "[Background review."


class SlowReviews(FakeOpenAI):
    """The echoing fake; it holds each background review's model call for `delay` s,
    then answers it "Nothing to save." (as the review prompt asks when nothing is)."""

    def __init__(self, delay: float) -> None:
        super().__init__(echo_when_idle=True)
        self.delay = delay
        self.reviews = 0  # review calls received
        self.abandoned = 0  # review calls whose client was gone when the answer was due

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        if not _is_review(await request.json()):
            return await super()._completions(request)
        self.reviews += 1
        await asyncio.sleep(self.delay)
        if request.transport is None or request.transport.is_closing():
            self.abandoned += 1  # the review was cancelled: aiohttp logs the failed write
        # No await until the handler below takes this turn (the body is read already),
        # so no reply's request can take it first.
        self.say("Nothing to save.")
        return await super()._completions(request)


def _is_review(body: Any) -> bool:
    messages = body.get("messages", []) if isinstance(body, dict) else []
    users = [m for m in messages if isinstance(m, dict) and m.get("role") == "user"]
    return bool(users) and str(users[-1].get("content", "")).startswith(REVIEW_MARK)


class ReviewRuns(logging.Handler):
    """Counts review runs from the log: fired by APScheduler, then skipped by our
    scheduler's wrapper (cancelled or replaced before it began), cancelled in flight
    (a new message), or else finished."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.fired = self.skipped = self.cancelled = 0

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith('Running job "review:'):
            self.fired += 1
        elif message.startswith("background job review:"):
            self.skipped += " skipped" in message
            self.cancelled += message.endswith(" cancelled")

    @property
    def finished(self) -> int:
        return self.fired - self.skipped - self.cancelled

    def attach(self) -> None:
        for name, level in (("apscheduler", logging.INFO), ("gateway.scheduler", logging.DEBUG)):
            logging.getLogger(name).addHandler(self)
            logging.getLogger(name).setLevel(level)


class TimedSink:
    """Keeps nothing but the moment the reply was finished."""

    def __init__(self) -> None:
        self.finished = 0.0

    async def write(self, piece: str) -> None:
        pass

    async def finish(self) -> None:
        self.finished = time.perf_counter()


class FullCollections:
    """Full (generation 2) garbage collections: when each began and how long it took, in s.

    A full collection stops every thread of the process; the fake's too, here."""

    def __init__(self) -> None:
        self.pauses: list[tuple[float, float]] = []
        self._began = 0.0
        gc.callbacks.append(self._observe)

    def _observe(self, phase: str, info: dict[str, Any]) -> None:
        if info["generation"] != 2:
            return
        if phase == "start":
            self._began = time.perf_counter()
        else:
            self.pauses.append((self._began, time.perf_counter() - self._began))


@dataclass
class Run:
    latencies: list[float] = field(default_factory=list)  # seconds, one per measured turn
    spans: list[tuple[float, float]] = field(default_factory=list)  # each turn's start, end
    scheduled: int = 0  # measured replies after which a review was scheduled or running
    cut: int = 0  # background jobs cut short at close

    def collections(self, full: FullCollections) -> str:
        """The full collections during the measured turns, and how many replies they hit."""
        first, last = self.spans[0][0], self.spans[-1][1]
        pauses = [(at, took) for at, took in full.pauses if first <= at <= last]
        hit = sum(any(a <= at <= b for at, _ in pauses) for a, b in self.spans)
        longest = max((took for _, took in pauses), default=0.0) * 1000
        return f"{len(pauses)} full GCs (longest {longest:.0f} ms) during {hit} replies"


async def run(fake: SlowReviews, home: Path, nudge: int, args: argparse.Namespace) -> Run:
    """`args.turns` measured turns, after `args.warmup` uncounted ones."""
    home.mkdir(parents=True)
    config_file = home / "mnemo.yaml"
    config_file.write_text(
        f"memory: {{nudge_interval: {nudge}}}\nskills: {{creation_nudge_interval: 0}}\n"
    )
    env = {
        "OPENAI_BASE_URL": fake.url + "/v1",
        "MNEMO_HOME": str(home / "data"),
        "MNEMO_SKILLS_DIR": str(ROOT / "skills"),
    }
    config = load_config(config_file, environ=env)
    result = Run()

    async def notify(message: InboundMessage, text: str) -> None:
        pass  # echoed reviews call no tool: nothing changes, nothing is said

    async with open_services(config) as services:
        background = BackgroundWork(job_context(services, notify))
        conversations = build_conversations(
            services, AccessPolicy.everyone(), background=background
        )
        background.start(conversations.sessions.end_quiet)
        for n in range(args.warmup + args.turns):
            message = InboundMessage(
                platform="telegram",
                chat_id="1",
                chat_type="private",
                user_id="1",
                text=f"message {n}: the bees swarmed again this morning",
            )
            sink = TimedSink()
            started = time.perf_counter()
            await conversations.handle(message, sink)
            if n >= args.warmup:
                result.latencies.append(sink.finished - started)
                result.spans.append((started, sink.finished))
                jobs = background.jobs()
                result.scheduled += any(job.id.startswith("review:") for job in jobs)
            if args.pause > 0:
                await asyncio.sleep(args.pause)  # the person's think time
        result.cut = len(await background.close())
        await conversations.close()
    return result


def percentiles(values: list[float]) -> list[float]:
    """p50, p95, p99 and max, in ms."""
    ordered = sorted(v * 1000 for v in values)
    at = [min(len(ordered) - 1, int(share * len(ordered))) for share in (0.5, 0.95, 0.99)]
    return [ordered[i] for i in at] + [ordered[-1]]


def line(label: str, values: list[float]) -> str:
    p50, p95, p99, most = values
    return (
        f"{label:24s} p50 {p50:7.2f} ms   p95 {p95:7.2f} ms   p99 {p99:7.2f} ms   "
        f"max {most:7.2f} ms"
    )


def measure(args: argparse.Namespace, folder: Path) -> None:
    runs = ReviewRuns()
    runs.attach()
    full = FullCollections()
    if args.gc_freeze:  # what is alive after start-up is never traversed again
        gc.collect()
        gc.freeze()
    logging.getLogger("aiohttp.server").disabled = True  # writes to cancelled reviews' sockets
    # The fake serves from a thread of its own, so its work is not on the bot's event loop.
    with serving_in_thread(SlowReviews(args.review_delay)) as fake:
        quiet = asyncio.run(run(fake, folder / "no-review", 0, args))
        assert fake.reviews == 0, "a review ran with nudge_interval 0"
        assert runs.fired == 0, "a review started with nudge_interval 0"
        due = asyncio.run(run(fake, folder / "review-due", 1, args))
    a, b = percentiles(quiet.latencies), percentiles(due.latencies)
    print(line("no review due", a) + f"   {quiet.collections(full)}")
    print(line("review due every reply", b) + f"   {due.collections(full)}")
    print(line("difference", [y - x for x, y in zip(a, b, strict=True)]))
    print(
        f"reviews: one scheduled or running after {due.scheduled} of {len(due.latencies)} "
        f"replies; {runs.fired} started, {runs.skipped} skipped (cancelled as they began), "
        f"{runs.cancelled} cancelled in flight by the next message, {runs.finished} finished, "
        f"{due.cut} cut short at close; {fake.reviews} review calls reached the model "
        f"({args.review_delay * 1000:.0f} ms each), {fake.abandoned} of them abandoned by "
        "the bot before the answer"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200, help="measured turns per run")
    parser.add_argument("--warmup", type=int, default=5, help="turns first, not measured")
    parser.add_argument("--review-delay", type=float, default=0.05, help="seconds")
    parser.add_argument("--pause", type=float, default=0.02, help="seconds between turns")
    parser.add_argument(
        "--gc-freeze", action="store_true", help="gc.freeze() before the runs (see the doc)"
    )
    args = parser.parse_args()
    print(describe())
    with tempfile.TemporaryDirectory(prefix="mnemo-background-latency-") as folder:
        measure(args, Path(folder))
    print(f"load average after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
