"""The walk of one Telegram message through the bot: modules visited, returns into them.

In one process and one event loop: the fake Telegram Bot API and the fake
OpenAI server (tests/fakes/, echoing every message), the bot's real services
(`open_services` on a temporary data directory), `build_conversations` with an
everyone policy and no background work, and the real `TelegramAdapter` polling
the fake. A warm-up message from another person comes first (imports and
one-time set-up done), then a fresh person's first message and that person's
second message are each traced from the update being queued in the fake to the
fake receiving the reply's final `sendMessage`.

Tracing: `sys.setprofile` on the event loop's thread only (the session store's
writer thread is not traced: what the loop hands it is seen, not what it does).
Only frames whose code lives under gateway/ or memory_core/ are counted; a
frame's caller is the nearest such frame on its `f_back` chain (library frames
between are skipped), and its stack is the modules of those frames below it.

An *entry* into module M is a 'call' event for a frame of M whose caller is in
another module. A 'call' event is either a fresh call (the frame starts at
its first instruction) or a resumption of a generator or coroutine. A
resumption counts as an entry only when code that runs drives it (an
`async for` asking a stream for the next chunk); the resumptions by which
the event loop wakes a suspended await chain continue a call already counted
and are not entries. Entries are sorted into:

* first visits: M not entered before in this walk;
* calls back up the stack: M is on the stack below the caller (a callback,
  such as the stream sink calling into the adapter that made it);
* re-entries: M was entered before, has been left, and is not on the stack;
* loop starts: a fresh call with no counted caller (a task or a scheduled
  callback the event loop runs) into a module entered before.

"Returns into a module already left" = calls back up the stack + re-entries.
Then, per module, how often control came back into it from a call it made
into another module, and into how many modules it called: the hubs of the walk.

Last, the walk between the gateway's stations, the figure issue 39 sets a goal
for: a *station* is a gateway module the walk entered that calls on into
another module (one that only answers, a value or a helper, is not one; nor is
the memory library below), and its returns are the distinct (caller module,
callee station) pairs, both in gateway/, of the calls back up the stack and the
re-entries above, each with its kind and the functions entered.
Each counted entry is listed as `caller_module.func -> callee_module.func`
with how often it happened; streamed chunks repeat an edge, so the total is
also given with each edge counted once. Module names drop the package prefix
("gateway." / "memory_core." stay, "__init__" becomes the package).

`--storage sqlite` (the default) walks the embedded store; `--storage
embedded` (the test extras' PostgreSQL, started here) or a postgresql:// URL
walks PostgreSQL as replica 0 of 2 (`replicas.count` 2): shared session locks,
and every message queued first and answered in order (`gateway.replicas`).

    python bench/message_walk.py
    python bench/message_walk.py --storage embedded
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dis
import logging
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from types import FrameType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

from gateway.access import AccessPolicy  # noqa: E402
from gateway.adapters.telegram_adapter import TelegramAdapter  # noqa: E402
from gateway.app import build_conversations, open_services  # noqa: E402
from gateway.config import load_config  # noqa: E402
from gateway.conversation import Conversations  # noqa: E402
from tests.fakes.openai import FakeOpenAI  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402

TOKEN = "123:ABC"
TRACKED = tuple(str(ROOT / pkg) + "/" for pkg in ("gateway", "memory_core"))
RESUME = dis.opmap["RESUME"]
TIMEOUT = 30.0


def module_of(path: str) -> str | None:
    """The dotted module of a source file under gateway/ or memory_core/, else None."""
    if not path.startswith(TRACKED):
        return None
    name = Path(path).relative_to(ROOT).with_suffix("").as_posix().replace("/", ".")
    return name.removesuffix(".__init__")


class Walk:
    """The profile function: sorts every entry into a tracked module (see the docstring)."""

    def __init__(self) -> None:
        self.modules: dict[str, str] = {}  # module -> the edge that first entered it
        self.kinds: dict[str, Counter[str]] = {
            k: Counter() for k in ("first", "callback", "reentry", "loop")
        }
        self.pairs: dict[str, tuple[str, str]] = {}  # edge -> (caller module, callee module)
        self._last: tuple[str, FrameType | None, bool] = ("", None, False)
        self._names: dict[Any, str | None] = {}

    def _module(self, frame: FrameType) -> str | None:
        code = frame.f_code
        if code not in self._names:
            self._names[code] = module_of(code.co_filename)
        return self._names[code]

    def _tracked_chain(self, frame: FrameType | None) -> list[tuple[str, FrameType]]:
        chain = []
        while frame is not None:
            if (module := self._module(frame)) is not None:
                chain.append((module, frame))
            frame = frame.f_back
        return chain

    def __call__(self, frame: FrameType, event: str, arg: object) -> None:
        if event.startswith("c_"):
            return
        last_event, last_frame, last_resumed = self._last
        resumed = False
        if event == "call":
            code = frame.f_code
            resumed = code.co_code[frame.f_lasti] == RESUME and code.co_code[frame.f_lasti + 1] != 0
            woken = resumed and last_event == "call" and last_resumed and last_frame is frame.f_back
            if not woken and (module := self._module(frame)) is not None:
                self._enter(module, frame, resumed)
        self._last = (event, frame, resumed)

    def _enter(self, module: str, frame: FrameType, resumed: bool) -> None:
        below = self._tracked_chain(frame.f_back)
        callee = f"{module}.{frame.f_code.co_qualname}"
        if not below:
            edge = f"(event loop) -> {callee}"
            if resumed:  # the loop wakes a task's outermost coroutine: not an entry
                self.modules.setdefault(module, edge + " (woken)")
                return
            kind = "loop"
        else:
            caller_module, caller_frame = below[0]
            if caller_module == module:
                return
            edge = f"{caller_module}.{caller_frame.f_code.co_qualname} -> {callee}"
            self.pairs[edge] = (caller_module, module)
            if module not in self.modules:
                kind = "first"
            elif module in {m for m, _ in below[1:]}:
                kind = "callback"
            else:
                kind = "reentry"
        if kind == "loop" and module not in self.modules:
            kind = "first"
        self.modules.setdefault(module, edge)
        self.kinds[kind][edge] += 1

    def report(self, title: str) -> None:
        print(f"\n== {title}")
        print(f"(1) {len(self.modules)} modules, in order of first visit (first entered by):")
        for n, (module, edge) in enumerate(self.modules.items(), 1):
            print(f"    {n:2}. {module:40} {edge}")
        returns = self.kinds["callback"] + self.kinds["reentry"]
        pairs = {self.pairs[edge] for edge in returns}
        print(
            f"(2) returns into a module already left: {sum(returns.values())}; "
            f"{len(returns)} with repeats of an edge collapsed, "
            f"{len(pairs)} distinct (caller module, callee module) pairs"
        )
        labels = {
            "callback": "calls back up the stack",
            "reentry": "re-entries into a module already left",
            "loop": "loop starts into a module entered before (not counted above)",
        }
        for kind, label in labels.items():
            edges = self.kinds[kind]
            print(f"    {label}: {sum(edges.values())} ({len(edges)} distinct edges)")
            for edge, times in edges.most_common():
                print(f"      {times:4} x {edge}")
        self._hubs()

    def _hubs(self) -> None:
        """Per caller module: how often control came back into it from a call it made into
        another module (every cross-module call returns into its caller), and into how many
        modules it called: a hub is a module the walk keeps coming back to."""
        back: Counter[str] = Counter()
        fan_out: dict[str, set[str]] = {}
        for kind in ("first", "callback", "reentry"):
            for edge, times in self.kinds[kind].items():
                caller, callee = self.pairs[edge]
                back[caller] += times
                fan_out.setdefault(caller, set()).add(callee)
        print("(3) returns into each caller from the modules it called, the ten most:")
        for module, times in back.most_common(10):
            print(f"      {times:4} x into {module:40} (calls {len(fan_out[module])} modules)")
        self._stations(fan_out)

    def _stations(self, fan_out: dict[str, set[str]]) -> None:
        """The walk between the gateway's stations (see the docstring)."""
        stations = [m for m in self.modules if m.startswith("gateway") and fan_out.get(m)]
        returns: dict[tuple[str, str], tuple[str, Counter[str]]] = {}
        for kind in ("callback", "reentry"):
            for edge, times in self.kinds[kind].items():
                caller, callee = self.pairs[edge]
                if caller.startswith("gateway") and callee in stations:
                    _, entered = returns.setdefault((caller, callee), (kind, Counter()))
                    entered[edge.split(" -> ")[1].removeprefix(callee + ".")] += times
        print(f"(4) {len(stations)} stations, in order of first visit: {', '.join(stations)}")
        print(f"    {len(returns)} returns into a station already left:")
        for (caller, callee), (kind, entered) in returns.items():
            names = ", ".join(f"{n}{f' x{t}' if t > 1 else ''}" for n, t in entered.items())
            kind_name = "callback" if kind == "callback" else "re-entry"
            print(f"      {kind_name:8} {caller} -> {callee}: {names}")


class TracingTelegram(FakeTelegram):
    """The fake, stopping the trace when the traced chat gets its reply's final message."""

    def __init__(self) -> None:
        super().__init__(token=TOKEN)
        self.traced_chat: int | None = None
        self.replied = asyncio.Event()

    async def _api_sendMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        if self.traced_chat is not None and int(params["chat_id"]) == self.traced_chat:
            sys.setprofile(None)
            self.traced_chat = None
            self.replied.set()
        return await super()._api_sendMessage(params)


async def traced(tg: TracingTelegram, chat: int, text: str) -> Walk:
    """Queue `text` from `chat`'s person and trace until the fake gets the reply's message."""
    walk = Walk()
    tg.replied.clear()
    tg.traced_chat = chat
    sys.setprofile(walk)
    tg.inject_text(chat, chat, text)
    try:
        await asyncio.wait_for(tg.replied.wait(), TIMEOUT)
    finally:
        sys.setprofile(None)
    return walk


async def settle(tg: TracingTelegram, conversations: Conversations, chat: int, n: int) -> None:
    """Wait until `chat` has `n` replies, every message is handled and confirmed, and the
    work a turn leaves behind (memory prefetch, the next poll) has had time to run."""
    await tg.wait_until(lambda: len(tg.chat_texts(chat)) >= n, TIMEOUT)
    await conversations.drain(TIMEOUT)
    await tg.wait_until(lambda: not tg.pending_updates, TIMEOUT)
    await asyncio.sleep(0.5)


async def run(home: Path, database_url: str | None) -> None:
    config_file = home / "mnemo.yaml"
    config_file.write_text("telegram: {allowed_users: ['*'], edit_interval: 0.05}\n")
    async with TracingTelegram() as tg, FakeOpenAI(echo_when_idle=True) as model:
        env = {
            "OPENAI_BASE_URL": model.url + "/v1",
            "MNEMO_HOME": str(home / "data"),
            "MNEMO_SKILLS_DIR": str(ROOT / "skills"),
            "TELEGRAM_BOT_TOKEN": TOKEN,
        }
        if database_url is not None:  # replica 0 of 2: the replicas' path
            env |= {"MNEMO_DATABASE_URL": database_url, "MNEMO_REPLICA_COUNT": "2"}
        config = load_config(config_file, environ=env)
        urls = {"base_url": tg.url + "/bot", "base_file_url": tg.url + "/file/bot"}
        config = config.model_copy(update={"telegram": config.telegram.model_copy(update=urls)})
        async with open_services(config) as services:
            conversations = build_conversations(services, AccessPolicy.everyone())
            adapter = TelegramAdapter(config.telegram, poll_timeout=10)
            if conversations.order is not None:  # as `gateway.service` does
                conversations.order.serve_platform(adapter.platform, adapter.reply_sink)
            await adapter.start(conversations, conversations.menu)
            try:
                tg.inject_text(7, 7, "warming up")
                await settle(tg, conversations, 7, 1)
                first = await traced(tg, 42, "hello there")
                await settle(tg, conversations, 42, 1)
                second = await traced(tg, 42, "and again")
            finally:
                await adapter.stop()
                await conversations.drain(5.0)
                await adapter.close()
                await conversations.close()
    first.report("a fresh person's first message (private chat)")
    second.report("the same person's second message")


@contextlib.contextmanager
def database(storage: str) -> Iterator[str | None]:
    """None for SQLite, else the URL of a fresh schema on `storage`'s PostgreSQL."""
    if storage == "sqlite":
        yield None
        return
    from pg_server import pg_schema, server_version

    with pg_schema(storage) as url:
        print(f"storage: {server_version(url)}, replica 0 of 2")
        yield url


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--storage",
        default="sqlite",
        help="sqlite (default), or 'embedded' or a postgresql:// URL: PostgreSQL, replicas",
    )
    args = parser.parse_args()
    print(describe())
    logging.basicConfig(level=logging.WARNING)
    with database(args.storage) as url, tempfile.TemporaryDirectory() as tmp:
        asyncio.run(run(Path(tmp), url))
    print(f"\n{describe()}")


if __name__ == "__main__":
    main()
