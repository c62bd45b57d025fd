"""`mnemo doctor`: check that this installation can run.

Each check prints one line, ``ok`` or ``FAIL`` with the reason; the result is
False when any check failed. Credentials in a URL (``OPENAI_BASE_URL`` may hold
``https://user:key@host/v1``) are masked in every line, including error text
from the client that repeats the URL.
"""

from __future__ import annotations

import asyncio
import sqlite3
import tempfile
from collections.abc import Callable
from pathlib import Path

from gateway.agent.model_client import ModelClient
from gateway.config import Config, redact_url_credentials


def run_doctor(config: Config, timeout: float, echo: Callable[[str], None]) -> bool:
    """Run every check, print one line per check, return True if all passed."""

    def say(line: str) -> None:
        echo(redact_url_credentials(line))

    results = [
        ("config", True, "valid"),
        ("data dir", *check_data_dir(config.home)),
        ("sqlite", *check_sqlite()),
        ("model", *asyncio.run(check_model(config, timeout))),
    ]
    for name, ok, detail in results:
        say(f"{'ok  ' if ok else 'FAIL'} {name}: {detail}")
    for name, section in (("telegram", config.telegram), ("discord", config.discord)):
        if section.active and not section.token:
            say(f"FAIL {name}: enabled but its token variable is not set")
            results.append((name, False, ""))
        else:
            say(f"ok   {name}: {'enabled' if section.active else 'off'}")
    return all(ok for _, ok, _ in results)


def check_data_dir(home: Path) -> tuple[bool, str]:
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-"):
            pass
    except OSError as exc:
        return False, f"{home}: {exc.strerror or exc}"
    return True, f"{home.resolve()} is writable"


def check_sqlite() -> tuple[bool, str]:
    version = sqlite3.sqlite_version
    conn = sqlite3.connect(":memory:")
    try:
        conn.execute("CREATE VIRTUAL TABLE w USING fts5(t, tokenize='unicode61')")
    except sqlite3.OperationalError as exc:
        return False, f"SQLite {version} has no FTS5 ({exc})"
    try:
        conn.execute("CREATE VIRTUAL TABLE g USING fts5(t, tokenize='trigram')")
        conn.execute("INSERT INTO g(t) VALUES ('服务器重启')")
        hits = conn.execute("SELECT count(*) FROM g WHERE g MATCH '服务器'").fetchone()[0]
    except sqlite3.OperationalError as exc:
        return False, f"SQLite {version} has no trigram tokenizer ({exc})"
    finally:
        conn.close()
    if hits != 1:
        return False, f"SQLite {version}: trigram tokenizer returned {hits} rows, expected 1"
    return True, f"SQLite {version} with FTS5 and trigram"


async def check_model(config: Config, timeout: float) -> tuple[bool, str]:
    client = ModelClient(
        base_url=config.llm.base_url,
        api_key=config.llm.api_key,
        model=config.llm.model,
        timeout=timeout,
        max_retries=0,
    )
    try:
        result = await client.ping()
    finally:
        await client.close()
    return result.ok, f"{config.llm.base_url}: {result.detail}"
