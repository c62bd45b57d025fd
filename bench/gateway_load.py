"""Telegram gateway under load: delivery latency and the highest per-chat update rate.

`--people` people (default 50), each in a private chat of their own, send
`--messages` messages each (default 20) through the fake Telegram Bot API
server (tests/fakes/telegram.py, in this process) to the real `TelegramAdapter`
(python-telegram-bot, long polling, AIORateLimiter, `gateway.delivery`) and the
REAL `Conversations` of `open_services` (SQLite state on a fresh data
directory, access control, commands, the agent turn) with the fake OpenAI
server echoing every message instantly (in a thread of its own). Each person
sends the next message once the previous reply is visible (a closed loop, no
think time unless `--pause`). Reviews are off (`memory.nudge_interval: 0`), so
only the reply path is measured.

With `--groups` each person is in a group of their own and mentions the bot,
so replies stream by message edits (python-telegram-bot's limiter then also
holds each group to Telegram's 20 calls per minute).

Latency: from the update injected into the fake to the reply's final text
first being visible in the fake (the final message in a private chat, the
final edit, or send, in a group). Update rate: the interim updates of each
chat (drafts in private chats, message edits elsewhere), counted over every
1-second window; the highest is printed with the limit the configured
`telegram.edit_interval` allows (1 / edit_interval per second; the final
message is not counted, it is a send). `--overall-rate` is python-telegram-
bot's AIORateLimiter overall limit (Telegram's 30 calls/s by default; 0: off):
with 50 chats it, not the gateway, bounds the throughput.

    python bench/gateway_load.py                          # 50 x 20, edit_interval 1.0
    python bench/gateway_load.py --edit-interval 0.2      # a tighter per-chat limit
    python bench/gateway_load.py --overall-rate 0         # no global flood limit
    python bench/gateway_load.py --groups                 # 50 groups: edits, not drafts
    python bench/gateway_load.py --people 10 --messages 5 # a quick look

`--burst N` measures something else: one person sends N messages at once
while the model takes `--model-delay` seconds a reply (default 1.0), and
`--idle` other people (default 5), idle until then, each send one first
message, one every `--model-delay` seconds while the burst is being answered.
It prints each idle person's wait for their reply beside the floor (one model
reply, measured alone first), and the worst: no chat should wait on another.

    python bench/gateway_load.py --burst 20               # 20 at once, a 1 s model

`--voice-burst N` is the same with voice notes: one person sends N voice notes
at once (each `--voice-kb` KiB, downloaded from the fake Bot API through
getFile, and transcribed by the fake ``/v1/audio/transcriptions``, which takes
`--transcribe-delay` seconds each, default 1.0), while the idle people send
text; the model answers at once. It prints the idle people's waits beside a
text reply alone, and how long the burst took to be answered.

    python bench/gateway_load.py --voice-burst 10         # 10 voice notes at once

`--strangers N` measures what refused strangers cost the people let in: only one
person is allowed (`telegram.allowed_users`), N strangers each write once at the same
time (each is refused with a pairing code written to the data directory's access
list), and the allowed person keeps writing (`--messages` replies at least, and until
every stranger was refused). It runs twice, with 0 strangers then with N, on fresh data
directories, and prints the allowed person's worst and p95 wait side by side, and the
added wait (goal: at most 1 s). Telegram's overall limit (`--overall-rate`, 30/s) also
holds the refusals' sends; `--overall-rate 0` shows the bot's own cost.

    python bench/gateway_load.py --strangers 1000 --overall-rate 0

`--replicas N` runs bench/replicas_load.py instead (its own options, see there):
real `mnemo run` replicas in webhook mode on one PostgreSQL, turns/s and CPU time
per turn with one replica and with N.

    python bench/gateway_load.py --replicas 3             # 40 x 10, 1 then 3 replicas

`--slow-clients N` runs bench/slow_clients.py instead (its own options, see there):
the worst latency of a real update, and of /healthz, of a real `mnemo run` in
webhook mode while N slow clients hold connections to its webhook.

    python bench/gateway_load.py --slow-clients 1000
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import logging
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from aiohttp import web

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

from gateway.access import AccessPolicy  # noqa: E402
from gateway.adapters.telegram_adapter import TelegramAdapter  # noqa: E402
from gateway.app import (  # noqa: E402
    adapter_fetch,
    build_conversations,
    job_context,
    open_services,
)
from gateway.config import load_config  # noqa: E402
from gateway.delivery import max_per_window  # noqa: E402
from gateway.jobs import BackgroundWork  # noqa: E402
from gateway.messages import InboundMessage  # noqa: E402
from tests.fakes.base import serving_in_thread  # noqa: E402
from tests.fakes.openai import FakeOpenAI  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402

TOKEN = "123:ABC"
FIRST_CHAT = 1000
FIRST_STRANGER = 5_000_000


class TimedTelegram(FakeTelegram):
    """The fake, noting when each message was sent and each draft or edit was made."""

    def __init__(self) -> None:
        super().__init__(token=TOKEN)
        self.final: dict[tuple[int, str], float] = {}  # (chat, text) -> first shown
        self.updates: dict[int, list[float]] = defaultdict(list)
        self.events: dict[int, asyncio.Event] = defaultdict(asyncio.Event)

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        result = await super()._api_sendMessage(params)
        self._shown(int(params["chat_id"]), result["text"])
        return result

    async def _api_editMessageText(self, params: dict[str, Any]) -> dict[str, Any]:
        result = await super()._api_editMessageText(params)
        self.updates[int(params["chat_id"])].append(time.perf_counter())
        self._shown(int(params["chat_id"]), result["text"])
        return result

    def _shown(self, chat: int, text: str) -> None:
        self.final.setdefault((chat, text), time.perf_counter())
        self.events[chat].set()

    async def _api_sendMessageDraft(self, params: dict[str, Any]) -> bool:
        result = await super()._api_sendMessageDraft(params)
        self.updates[int(params["chat_id"])].append(time.perf_counter())
        return result


async def person(tg: TimedTelegram, chat: int, args: argparse.Namespace) -> list[float]:
    """One person's closed loop: send, wait for the reply's final text, note the latency."""
    latencies = []
    for n in range(args.messages):
        text = f"message {n} from person {abs(chat)} " + "word " * args.words
        began = time.perf_counter()
        if chat < 0:  # a group: addressed to the bot by a mention
            mention = {"type": "mention", "offset": 0, "length": len("@mnemo_bot")}
            tg.inject_text(chat, -chat, "@mnemo_bot " + text, entities=[mention])
        else:
            tg.inject_text(chat, chat, text)
        final = f"echo: {text}".strip()
        while (done := tg.final.get((chat, final))) is None:
            tg.events[chat].clear()
            await asyncio.wait_for(tg.events[chat].wait(), args.timeout)
        latencies.append(done - began)
        if args.pause:
            await asyncio.sleep(args.pause)
    return latencies


async def one_reply(tg: TimedTelegram, chat: int, text: str, timeout: float) -> float:
    """Send `text` from `chat`'s person; seconds until the reply's final text shows."""
    began = time.perf_counter()
    tg.inject_text(chat, chat, text)
    final = f"echo: {text}"
    while (done := tg.final.get((chat, final))) is None:
        tg.events[chat].clear()
        await asyncio.wait_for(tg.events[chat].wait(), timeout)
    return done - began


async def burst(tg: TimedTelegram, args: argparse.Namespace) -> None:
    """One person's burst of `args.burst` messages; idle people's first replies meanwhile."""
    floor = await one_reply(tg, FIRST_CHAT - 1, "warm up, alone", args.timeout)
    busy = FIRST_CHAT
    for n in range(args.burst):
        tg.inject_text(busy, busy, f"burst {n}")
    waits = []
    for person in range(args.idle):
        await asyncio.sleep(args.model_delay)  # the burst is being answered meanwhile
        chat = FIRST_CHAT + 1 + person
        waits.append(await one_reply(tg, chat, f"first message of {chat}", args.timeout))
    last = f"echo: burst {args.burst - 1}"
    while tg.final.get((busy, last)) is None:
        tg.events[busy].clear()
        await asyncio.wait_for(tg.events[busy].wait(), args.timeout * args.burst)
    print(
        f"a burst of {args.burst} messages with a {args.model_delay:g} s model; "
        f"{args.idle} idle people's first replies meanwhile"
    )
    print(
        f"idle people's waits: {', '.join(f'{w:.2f}' for w in waits)} s; worst {max(waits):.2f} s "
        f"beside a reply alone {floor:.2f} s: worst added wait {max(waits) - floor:.2f} s"
    )


async def voice_burst(tg: TimedTelegram, args: argparse.Namespace) -> None:
    """One person's burst of `args.voice_burst` voice notes; idle people's text meanwhile."""
    floor = await one_reply(tg, FIRST_CHAT - 1, "warm up, alone", args.timeout)
    busy = FIRST_CHAT
    began = time.perf_counter()
    audio = b"OggS" + bytes(range(256)) * (args.voice_kb * 4)
    for _ in range(args.voice_burst):
        tg.inject_voice(busy, busy, audio, duration=5)
    waits = []
    for person in range(args.idle):
        await asyncio.sleep(args.transcribe_delay)  # the burst is being read meanwhile
        chat = FIRST_CHAT + 1 + person
        waits.append(await one_reply(tg, chat, f"first message of {chat}", args.timeout))

    def answered() -> int:  # the replies echo the transcript (all alike: count messages)
        return sum(1 for m in tg.chat_messages(busy) if "[voice note]" in (m.text or ""))

    while answered() < args.voice_burst:
        tg.events[busy].clear()
        await asyncio.wait_for(tg.events[busy].wait(), args.timeout * args.voice_burst)
    took = time.perf_counter() - began
    print(
        f"a burst of {args.voice_burst} voice notes of {args.voice_kb} KiB, each transcribed in "
        f"{args.transcribe_delay:g} s; {args.idle} idle people's text meanwhile"
    )
    print(
        f"idle people's waits: {', '.join(f'{w:.2f}' for w in waits)} s; worst {max(waits):.2f} s "
        f"beside a reply alone {floor:.2f} s: worst added wait {max(waits) - floor:.2f} s; "
        f"the burst answered in {took:.1f} s"
    )


async def strangers(tg: TimedTelegram, args: argparse.Namespace) -> list[float]:
    """The allowed person's waits while `args.strangers` strangers each write once."""
    for n in range(args.strangers):
        tg.inject_text(FIRST_STRANGER + n, FIRST_STRANGER + n, "hello, let me in")
    waits: list[float] = []
    deadline = time.perf_counter() + args.timeout
    while len(waits) < args.messages or refused(tg) < args.strangers:
        waits.append(await one_reply(tg, FIRST_CHAT, f"message {len(waits)}", args.timeout))
        if time.perf_counter() > deadline:
            print(f"only {refused(tg)} of {args.strangers} strangers refused in {args.timeout} s")
            break
    return waits


def refused(tg: TimedTelegram) -> int:
    """How many strangers were sent their refusal."""
    return len({chat for chat, _ in tg.final if chat >= FIRST_STRANGER})


def strangers_report(figures: dict[int, list[float]]) -> None:
    def cut(waits: list[float]) -> str:
        p95 = statistics.quantiles(waits, n=100, method="inclusive")[94]
        return f"worst {max(waits):6.2f} s, p95 {p95:6.2f} s ({len(waits)} replies)"

    for count, waits in figures.items():
        print(f"{count:>6} strangers: the allowed person's wait: {cut(waits)}")
        print(f"        the first waits in order: {' '.join(f'{w:.2f}' for w in waits[:10])} s")
    fewest, most = min(figures), max(figures)
    added = max(figures[most]) - max(figures[fewest])
    print(f"added worst wait with {most} strangers: {added:.2f} s (goal: at most 1 s)")


class SlowTranscriber(FakeOpenAI):
    """The echoing fake, taking `delay` seconds before each transcription."""

    def __init__(self, delay: float) -> None:
        super().__init__(echo_when_idle=True)
        self.delay = delay

    async def _transcribe(self, request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(self.delay)
        return await super()._transcribe(request)


class SlowEcho(FakeOpenAI):
    """The echoing fake, taking `delay` seconds before each completion."""

    def __init__(self, delay: float) -> None:
        super().__init__(echo_when_idle=True)
        self.delay = delay

    async def _completions(self, request: web.Request) -> web.StreamResponse:
        await asyncio.sleep(self.delay)
        return await super()._completions(request)


async def run(model_url: str, home: Path, args: argparse.Namespace) -> None:
    config_file = home / "mnemo.yaml"
    allowed = FIRST_CHAT if args.strangers is not None else "'*'"
    config_file.write_text(
        "memory: {nudge_interval: 0}\nskills: {creation_nudge_interval: 0}\n"
        f"telegram: {{allowed_users: [{allowed}], edit_interval: {args.edit_interval}}}\n"
        "media: {transcription: {model: whisper-1}}\n"
    )
    async with TimedTelegram() as tg:
        env = {
            "OPENAI_BASE_URL": model_url + "/v1",
            "MNEMO_HOME": str(home / "data"),
            "MNEMO_SKILLS_DIR": str(ROOT / "skills"),
            "TELEGRAM_BOT_TOKEN": TOKEN,
        }
        config = load_config(config_file, environ=env)
        config = config.model_copy(
            update={
                "telegram": config.telegram.model_copy(
                    update={"base_url": tg.url + "/bot", "base_file_url": tg.url + "/file/bot"}
                )
            }
        )

        async def notify(message: InboundMessage, text: str) -> None:
            pass

        async with open_services(config) as services:
            background = BackgroundWork(job_context(services, notify))
            adapter = TelegramAdapter(
                config.telegram, poll_timeout=10, overall_max_rate=args.overall_rate
            )
            conversations = build_conversations(
                services,
                AccessPolicy.from_config(config, services.access),
                background=background,
                media_fetch=adapter_fetch([adapter]),
            )
            background.start(conversations.sessions.end_quiet)
            await adapter.start(conversations, conversations.menu)
            began = time.perf_counter()
            if args.strangers is not None:
                try:
                    args.figures[args.strangers] = await strangers(tg, args)
                finally:
                    await adapter.stop()
                    await conversations.drain(5.0)
                    await adapter.close()
                    await conversations.close()
                    await background.close()
                return
            if args.burst or args.voice_burst:
                try:
                    await (burst(tg, args) if args.burst else voice_burst(tg, args))
                finally:
                    await adapter.stop()
                    await conversations.drain(5.0)
                    await adapter.close()
                    await conversations.close()
                    await background.close()
                return
            try:
                sign = -1 if args.groups else 1
                chats = [sign * c for c in range(FIRST_CHAT, FIRST_CHAT + args.people)]
                results = await asyncio.gather(*(person(tg, c, args) for c in chats))
            finally:
                took = time.perf_counter() - began
                await adapter.stop()
                await conversations.drain(5.0)
                await adapter.close()
                await conversations.close()
                await background.close()
        report(tg, [x for r in results for x in r], took, args)


def report(
    tg: TimedTelegram, latencies: list[float], took: float, args: argparse.Namespace
) -> None:
    latencies.sort()
    cuts = statistics.quantiles(latencies, n=100, method="inclusive")
    rates = {chat: max_per_window(times, 1.0) for chat, times in tg.updates.items()}
    busiest = max(rates, key=lambda c: rates[c], default=None)
    allowed = 1 / args.edit_interval
    print(
        f"{len(latencies)} replies "
        f"({args.people} people x {args.messages}) in {took:.1f} s "
        f"= {len(latencies) / took:.1f} replies/s; overall rate limit "
        f"{args.overall_rate or 'off'}/s"
    )
    print(
        f"delivery latency: p50 {cuts[49] * 1000:.0f} ms, p99 {cuts[98] * 1000:.0f} ms, "
        f"max {latencies[-1] * 1000:.0f} ms"
    )
    drafts = sum(len(v) for v in tg.drafts.values())
    edits = len(tg.calls_to("editMessageText"))
    highest = rates[busiest] if busiest is not None else 0
    verdict = "within" if highest <= max(1.0, allowed) else "OVER"
    print(
        f"interim updates: {drafts} drafts, {edits} edits; highest in any chat: {highest} "
        f"in a 1 s window (chat {busiest}); edit_interval {args.edit_interval} s allows "
        f"{allowed:g}/s: {verdict} the limit"
    )
    gaps = [b - a for times in tg.updates.values() for a, b in itertools.pairwise(times)]
    if gaps:
        gaps.sort()
        short = sum(g < args.edit_interval for g in gaps)
        print(
            f"gaps between two interim updates of one chat, as Telegram saw them: smallest "
            f"{gaps[0] * 1000:.0f} ms, {short} of {len(gaps)} shorter than edit_interval"
        )


def main() -> None:
    replicas = argparse.ArgumentParser(add_help=False)
    replicas.add_argument("--replicas", type=int, default=0)
    if replicas.parse_known_args()[0].replicas:
        import replicas_load  # bench/ is on sys.path: real `mnemo run` processes instead

        replicas_load.main(sys.argv[1:])
        return
    if "--slow-clients" in sys.argv[1:]:
        import slow_clients  # bench/ is on sys.path: a real `mnemo run` in webhook mode

        slow_clients.main(sys.argv[1:])
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--people", type=int, default=50)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--words", type=int, default=40, help="words per message (echoed)")
    parser.add_argument("--edit-interval", type=float, default=1.0)
    parser.add_argument("--overall-rate", type=float, default=30.0)
    parser.add_argument(
        "--groups", action="store_true", help="each person in a group of their own (edits)"
    )
    parser.add_argument("--pause", type=float, default=0.0, help="think time between messages")
    parser.add_argument("--timeout", type=float, default=120.0, help="per reply, seconds")
    parser.add_argument("--burst", type=int, default=0, help="one person's burst (see above)")
    parser.add_argument("--model-delay", type=float, default=1.0, help="with --burst, seconds")
    parser.add_argument("--idle", type=int, default=5, help="with --burst, idle people")
    parser.add_argument("--voice-burst", type=int, default=0, help="one person's voice notes")
    parser.add_argument("--voice-kb", type=int, default=64, help="with --voice-burst, KiB each")
    parser.add_argument("--transcribe-delay", type=float, default=1.0, help="seconds each")
    parser.add_argument("--strangers", type=int, default=None, help="refused strangers at once")
    parser.add_argument("--verbose", action="store_true", help="log at INFO")
    args = parser.parse_args()
    print(describe())
    logging.basicConfig(level=logging.WARNING if not args.verbose else logging.INFO)
    fake = (
        SlowEcho(args.model_delay)
        if args.burst
        else SlowTranscriber(args.transcribe_delay)
        if args.voice_burst
        else FakeOpenAI(echo_when_idle=True)
    )
    if args.strangers is not None:
        args.messages = min(args.messages, 10) if "--messages" not in sys.argv else args.messages
        args.figures = {}
        for count in (0, args.strangers):
            one = argparse.Namespace(**{**vars(args), "strangers": count})
            echo = FakeOpenAI(echo_when_idle=True)
            with serving_in_thread(echo) as model, tempfile.TemporaryDirectory() as tmp:
                asyncio.run(run(model.url, Path(tmp), one))
        strangers_report(args.figures)
        return
    with serving_in_thread(fake) as model, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(model.url, Path(tmp), args))


if __name__ == "__main__":
    main()
