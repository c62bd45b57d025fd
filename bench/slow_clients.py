"""A real `mnemo run` in Telegram webhook mode while slow clients hold connections.

`--slow-clients N` (default 1000) raw connections to the webhook's port each send
a byte of a request head every `--trickle` seconds (default 1.0) and never finish
it; when the server closes one, it connects again `--reconnect` seconds later
(default: `--trickle`; a slowloris; 0 makes it a storm of new connections). The
process runs with `--open-files` as its limit (default 1024, the common one), its
webhook with the configured cap and header timeout (`--max-connections`,
`--header-timeout`; the config's defaults unless given), SQLite, /healthz on.
One person sends `--messages` messages (default 20) through the fake Telegram,
each once the reply to the previous is shown, first with no slow client, then
with the N; each reply's latency (update injected to reply shown) and a
/healthz answer's are printed, the worst beside the median, and what the log
holds (its counted lines about the webhook; tracebacks, which should be none).

    python bench/gateway_load.py --slow-clients 1000
    python bench/slow_clients.py --slow-clients 3000 --open-files 1024
    python bench/slow_clients.py --slow-clients 1000 --reconnect 0     # a storm
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import aiohttp  # noqa: E402
from machine import describe  # noqa: E402

from tests.fakes.openai import FakeOpenAI  # noqa: E402
from tests.fakes.telegram import FakeTelegram  # noqa: E402
from tests.gateway.processes import MNEMO, run_environment  # noqa: E402

TOKEN = "4242:bench-slow-clients"
SECRET = "bench-slow-clients-secret"
CHAT = 4242
HEAD = b"POST /telegram HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(tg: FakeTelegram, model: FakeOpenAI, workdir: Path, ports: tuple[int, int],
          args: argparse.Namespace) -> subprocess.Popen[str]:  # fmt: skip
    given = {"header_timeout": args.header_timeout, "max_connections": args.max_connections}
    limits = "".join(f"    {k}: {v}\n" for k, v in given.items() if v is not None)
    (workdir / "mnemo.yaml").write_text(
        f"telegram:\n  base_url: {tg.url}/bot\n  base_file_url: {tg.url}/file/bot\n"
        "  allowed_users: ['*']\n  edit_interval: 0.05\n"
        "  webhook:\n    url: https://bot.example/telegram\n"
        f"    listen: 127.0.0.1\n    port: {ports[0]}\n{limits}"
        f"health: {{enabled: true, listen: 127.0.0.1, port: {ports[1]}}}\n"
        "memory: {nudge_interval: 0}\nskills: {creation_nudge_interval: 0}\n",
        encoding="utf-8",
    )
    env = run_environment(
        model.url, workdir, TELEGRAM_BOT_TOKEN=TOKEN, TELEGRAM_WEBHOOK_SECRET=SECRET
    )

    def open_files() -> None:
        hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
        resource.setrlimit(resource.RLIMIT_NOFILE, (args.open_files, hard))

    with (workdir / "stderr.txt").open("w", encoding="utf-8") as log:
        return subprocess.Popen(
            [str(MNEMO), "run"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
            stderr=log, text=True, env=env, cwd=workdir, preexec_fn=open_files,
        )  # fmt: skip


async def slow_client(
    port: int, args: argparse.Namespace, stop: asyncio.Event, counts: list[int]
) -> None:
    """Holds a connection with a head that never ends; connects again when closed."""
    trickle, reconnect = args.trickle, args.trickle if args.reconnect is None else args.reconnect
    while not stop.is_set():
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            await asyncio.sleep(trickle)
            continue
        counts[0] += 1
        try:
            for byte in HEAD * 1000:
                writer.write(bytes([byte]))
                with contextlib.suppress(TimeoutError):
                    if not await asyncio.wait_for(reader.read(1024), trickle):
                        break  # closed by the server
                if stop.is_set():
                    break
        except OSError:
            pass
        finally:
            writer.close()
        await asyncio.sleep(reconnect)  # then again, as slowloris tools do


async def replies(tg: FakeTelegram, health: int, args: argparse.Namespace, tag: str) -> Any:
    """Each reply's latency and each /healthz answer's (None: not answered)."""
    waits: list[float] = []
    checks: list[float | None] = []
    timeout = aiohttp.ClientTimeout(total=args.timeout)
    async with aiohttp.ClientSession(timeout=timeout) as http:
        for n in range(args.messages):
            text = f"{tag} {n}"
            began = time.perf_counter()
            tg.inject_text(CHAT, CHAT, text)
            await tg.wait_until(lambda t=text: f"echo: {t}" in tg.chat_texts(CHAT), args.timeout)
            waits.append(time.perf_counter() - began)
            began = time.perf_counter()
            try:
                async with http.get(f"http://127.0.0.1:{health}/healthz") as answer:
                    ok = answer.status == 200
            except (aiohttp.ClientError, TimeoutError):
                ok = False
            checks.append(time.perf_counter() - began if ok else None)
    return waits, checks


def line(name: str, values: list[float | None]) -> str:
    answered = [v for v in values if v is not None]
    missing = len(values) - len(answered)
    if not answered:
        return f"  {name}: none answered"
    worst, median = max(answered) * 1000, statistics.median(answered) * 1000
    tail = f", {missing} not answered" if missing else ""
    return f"  {name}: worst {worst:.0f} ms, median {median:.0f} ms{tail}"


async def bench(args: argparse.Namespace) -> None:
    port, health = free_port(), free_port()
    model = FakeOpenAI(echo_when_idle=True)
    await model.start()
    async with FakeTelegram(token=TOKEN, webhook_backoff=0.05) as tg:
        tg.webhook_targets = [f"http://127.0.0.1:{port}/telegram"]
        with tempfile.TemporaryDirectory(prefix="mnemo-slow-") as tmp:
            process = start(tg, model, Path(tmp), (port, health), args)
            stop, counts, tasks = asyncio.Event(), [0], []
            try:
                await tg.wait_until(lambda: tg.calls_to("setWebhook") or process.poll(), 120)
                if process.poll() is not None:
                    sys.exit((Path(tmp) / "stderr.txt").read_text()[-3000:])
                alone = await replies(tg, health, args, "alone")
                tasks = [
                    asyncio.create_task(slow_client(port, args, stop, counts))
                    for _ in range(args.slow_clients)
                ]
                await asyncio.sleep(args.trickle * 3)  # the crowd in place (bench, not test)
                crowded = await replies(tg, health, args, "crowded")
            finally:
                stop.set()
                await asyncio.gather(*tasks, return_exceptions=True)
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=60)
                await model.stop()
            log = (Path(tmp) / "stderr.txt").read_text()
    print(f"{args.slow_clients} slow clients, mnemo run with {args.open_files} open files at most")
    print("no slow client:")
    print(line("reply", list(alone[0])))
    print(line("/healthz", alone[1]))
    print(f"{args.slow_clients} slow clients ({counts[0]} connections made):")
    print(line("reply", list(crowded[0])))
    print(line("/healthz", crowded[1]))
    counted = [entry for entry in log.splitlines() if "telegram: webhook:" in entry]
    print(f"log: {len(log.splitlines())} lines, {log.count('Traceback')} tracebacks; counted:")
    for entry in counted[-4:]:
        print("  " + entry[-150:])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--slow-clients", type=int, default=1000)
    parser.add_argument("--messages", type=int, default=20)
    parser.add_argument("--trickle", type=float, default=1.0, help="seconds between bytes")
    parser.add_argument("--open-files", type=int, default=1024, help="mnemo run's limit")
    parser.add_argument("--reconnect", type=float, default=None, help="seconds (0: a storm)")
    parser.add_argument("--max-connections", type=int, default=None)
    parser.add_argument("--header-timeout", type=float, default=None)
    parser.add_argument("--timeout", type=float, default=60.0, help="per reply, seconds")
    args = parser.parse_args(argv)
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    want = args.slow_clients + 256
    if hard != resource.RLIM_INFINITY and hard < want:
        sys.exit(f"this process needs {want} open files; the hard limit is {hard}")
    resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    print(describe())
    asyncio.run(bench(args))


if __name__ == "__main__":
    main()
