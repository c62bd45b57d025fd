"""`mnemo doctor`: check that this installation can run turns.

The checks (`gateway.doctor_checks`) cover the configuration, the data dir,
the skills folder, the storage (SQLite, or PostgreSQL with `storage.url`), the
model endpoints, Telegram and Discord. Each one prints one line, ``ok``, ``warn``
(passed, with something to know) or ``FAIL`` with the reason, or, as JSON, one
object ``{name, ok, detail, warning}`` of a list; the result is False when any
check failed.
Secrets never appear: credentials in a URL (``OPENAI_BASE_URL`` may hold
``https://user:key@host/v1``) are masked in every line, including error text
from a client that repeats the URL, and so are the API key and bot tokens.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import asdict

from gateway.config import Config
from gateway.doctor_checks import (
    Check,
    check_data_dir,
    check_skills_dir,
    check_storage,
    network_checks,
)
from gateway.urls import redact_url_credentials


def run_checks(config: Config, timeout: float, spend: bool = True) -> list[Check]:
    """Every check, in the order they are printed, with secrets masked in each detail."""
    checks = [
        Check("config", True, "valid"),
        check_data_dir(config.home),
        check_skills_dir(config.skills.dir, promotable=bool(config.admins)),
        check_storage(config),
        *asyncio.run(network_checks(config, timeout, spend)),
    ]
    given = (config.llm.api_key, config.telegram.token, config.discord.token)
    secrets = [s for s in given if s and len(s) >= 6]  # a shorter one would mangle words
    return [Check(c.name, c.ok, _masked(c.detail, secrets), c.warning) for c in checks]


def run_doctor(
    config: Config,
    timeout: float,
    echo: Callable[[str], None],
    spend: bool = True,
    as_json: Callable[[object], str] | None = None,
) -> bool:
    """Run every check and print them, a line each (or, given `as_json`, the list it
    renders); return True if all passed. `spend` False lists the models instead of
    asking for a one-token completion."""
    checks = run_checks(config, timeout, spend)
    if as_json is not None:
        echo(as_json([asdict(c) for c in checks]))
    else:
        for check in checks:
            mark = "FAIL" if not check.ok else "warn" if check.warning else "ok  "
            echo(f"{mark} {check.name}: {check.detail}")
    return all(check.ok for check in checks)


def _masked(text: str, secrets: list[str]) -> str:
    text = redact_url_credentials(text)
    for secret in secrets:
        text = text.replace(secret, "***")
    return text
