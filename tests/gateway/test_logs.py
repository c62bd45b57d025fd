"""Log lines from the real `configure_logging` in a fresh process (pytest holds handlers of
its own): quiet libraries, JSON lines for log shippers, secrets masked."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

from gateway.logs import OncePerKind
from tests.timing import scaled

ROOT = Path(__file__).resolve().parents[2]
SECRET = "123456:telegram-secret-token"
SCRIPT = f"""
import logging
import discord
from gateway.logs import configure_logging

configure_logging(logging.INFO, [{SECRET!r}], {{fmt!r}})
discord.Client(intents=discord.Intents.default())  # warns: no voice support
logging.getLogger("httpx2").info("HTTP Request: POST http://127.0.0.1:9/v1/chat/completions")
logging.getLogger("mnemo").info("serving with token %s", {SECRET!r})
try:
    raise RuntimeError("failed with " + {SECRET!r})
except RuntimeError:
    logging.getLogger("mnemo").exception("a turn failed")
"""


def logged(fmt: str) -> list[str]:
    script = SCRIPT.replace("{fmt!r}", repr(fmt))
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=scaled(30)
    )
    assert result.returncode == 0, result.stderr
    return result.stderr.splitlines()


def test_json_lines_with_secrets_masked_and_no_library_noise() -> None:
    lines = [json.loads(line) for line in logged("json")]  # every line is one object
    assert [(r["level"], r["logger"], r["message"]) for r in lines] == [
        ("INFO", "mnemo", "serving with token ***"),
        ("ERROR", "mnemo", "a turn failed"),
    ]
    assert all(set(r) >= {"time", "level", "logger", "message"} for r in lines)
    assert "RuntimeError: failed with ***" in lines[1]["exc_info"]
    assert SECRET not in json.dumps(lines)


def test_text_lines_have_no_voice_warning_nor_request_lines() -> None:
    text = "\n".join(logged("text"))
    assert "voice" not in text and "HTTP Request" not in text
    assert "INFO mnemo: serving with token ***" in text and SECRET not in text


def test_the_pool_says_each_kind_of_line_once_a_minute_in_an_outage() -> None:
    now = [100.0]
    once = OncePerKind(60.0, clock=lambda: now[0])

    def line(text: str) -> logging.LogRecord:
        return logging.LogRecord("psycopg.pool", logging.WARNING, __file__, 1, text, (), None)

    dead = [
        line(f"discarding broken connection: <psycopg.Connection at 0x{i:x}>") for i in range(50)
    ]
    failed = [
        line(f"error connecting in 'pool-{i % 2}': connection failed: FATAL") for i in range(50)
    ]
    assert sum(once(r) for r in dead) == 1
    assert sum(once(r) for r in failed) == 1  # one kind: numbers in the pool's name aside
    now[0] += 61
    assert once(dead[0]) and not once(dead[1])  # again a minute later, once
