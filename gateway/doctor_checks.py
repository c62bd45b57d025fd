"""The checks of `mnemo doctor`, each one thing a turn needs, with a one-line verdict.

Local checks (data dir, skills folder, SQLite) are plain functions; the network
checks ask each service what a running bot would ask it: the model endpoint a
one-token chat completion (or, when nothing may be spent, its model list, with
the key), Telegram ``getMe`` and Discord ``/users/@me`` with the bot tokens.
A failure's detail says what is wrong and, where one is known, the fix.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import aiohttp

from gateway.agent.model_client import ModelClient
from gateway.config import Config, DiscordConfig, TelegramConfig, storage_settings
from gateway.errors import ModelAuthError, ModelError, ModelNotServedError, ModelStalledError
from memory_core import PostgresUnavailableError, storage_problem

MAX_NAMES_SHOWN = 10  # served model ids a "not served" line lists


@dataclass(frozen=True)
class Check:
    """One check's verdict: what was checked, whether it passed, and why."""

    name: str
    ok: bool
    detail: str
    warning: bool = False  # passed, with something the operator should know


@dataclass(frozen=True)
class ModelTarget:
    """One model as the bot calls it: where, with which key, under which name."""

    base_url: str
    api_key: str | None
    model: str


def check_data_dir(home: Path) -> Check:
    """The data dir exists (it is created) and a file can be written in it."""
    try:
        home.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=home, prefix=".doctor-"):
            pass
    except OSError as exc:
        return Check("data dir", False, f"{home}: not writable: {exc.strerror or exc}")
    return Check("data dir", True, f"{home.resolve()} is writable")


def check_skills_dir(folder: Path, promotable: bool) -> Check:
    """The shared skills folder exists and is readable; writable too when admins may
    /promote a person's skill into it (`promotable`)."""
    where = folder.resolve()
    if not folder.exists():
        return Check("skills", False, f"{where} does not exist (skills.dir, MNEMO_SKILLS_DIR)")
    if not folder.is_dir():
        return Check("skills", False, f"{where} is not a folder")
    try:
        count = sum(1 for entry in folder.iterdir() if (entry / "SKILL.md").is_file())
    except OSError as exc:
        return Check("skills", False, f"{where} cannot be read: {exc.strerror or exc}")
    detail = f"{where}: {count} skill{'' if count == 1 else 's'}, readable"
    if not promotable:
        return Check("skills", True, detail)
    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".doctor-"):
            pass
    except OSError as exc:
        reason = exc.strerror or exc
        return Check("skills", False, f"{where} is not writable, and admins may /promote: {reason}")
    return Check("skills", True, f"{detail} and writable (admins may /promote)")


def check_storage(config: Config) -> Check:
    """The configured backend can hold the bot's state: this Python's SQLite has FTS5 and
    a working trigram tokenizer, or the PostgreSQL server answers, has pg_trgm and a
    schema this Mnemo can migrate (nothing is changed)."""
    name = "storage"
    try:
        detail, problem = storage_problem(storage_settings(config))
    except PostgresUnavailableError as exc:
        return Check(name, False, str(exc))
    if problem is not None:
        return Check(name, False, problem)
    return Check(name, True, detail)


def model_targets(config: Config) -> list[tuple[str, ModelTarget]]:
    """The main model, and the auxiliary one when it is configured apart from it."""
    main = ModelTarget(config.llm.base_url, config.llm.api_key, config.llm.model)
    aux = ModelTarget(config.aux_base_url, config.llm.api_key, config.aux_model)
    targets = [("model", main)]
    if aux != main:
        targets.append(("auxiliary model", aux))
    return targets


async def check_model(name: str, target: ModelTarget, timeout: float, spend: bool) -> Check:
    """Call the endpoint as a turn does (`spend`: one token), else list its models."""
    client = ModelClient(
        base_url=target.base_url,
        api_key=target.api_key,
        model=target.model,
        timeout=timeout,
        max_retries=0,
    )
    warning = False
    try:
        if spend:
            detail = await _one_token(client, target)
        else:
            detail, warning = await _listed(client, target)
    except ModelError as exc:
        detail = await _model_failure(client, target, exc, spend)
        return Check(name, False, f"{target.base_url}: {detail}")
    finally:
        await client.close()
    return Check(name, True, f"{target.base_url}: {detail}", warning)


async def _one_token(client: ModelClient, target: ModelTarget) -> str:
    messages = [{"role": "user", "content": "Say ok."}]
    await client.complete(messages, max_tokens=1, background=False)
    return f"model {target.model!r} answered a one-token chat completion"


async def _listed(client: ModelClient, target: ModelTarget) -> tuple[str, bool]:
    """What the model list says, and whether it is only a warning: a model missing from
    the list may still be answered (many compatible servers answer any name they are
    given), so only a completion can say it is not served, and this spends none."""
    served = await client.served_models()
    if target.model in served:
        return f"answers with the key; model {target.model!r} is listed", False
    return (
        f"answers with the key, but {_not_served(target.model, served).removeprefix('model ')}"
        "; some servers answer models they do not list: `mnemo doctor` without --no-spend "
        "asks for one token",
        True,
    )


async def _model_failure(
    client: ModelClient, target: ModelTarget, exc: ModelError, spend: bool
) -> str:
    """The one-line reason for `exc`; a completion refused with 400/404 asks the model
    list whether the model is the problem (else the URL is)."""
    if isinstance(exc, ModelNotServedError):
        return _not_served(target.model, exc.served)
    if isinstance(exc, ModelStalledError):
        return f"timed out ({exc})"
    if isinstance(exc, ModelAuthError):
        return _credentials(exc.status, target.api_key)
    if exc.status is None:
        return f"unreachable ({str(exc).removeprefix('model API unreachable: ')})"
    if spend and exc.status in (400, 404):
        try:
            served = await client.served_models()
        except ModelError:
            served = None
        if served is not None and target.model not in served:
            return _not_served(target.model, served)
    if exc.status == 404:
        path = "/chat/completions" if spend else "/models"
        return _not_found(target.base_url, path)
    return f"answered HTTP {exc.status} ({exc})"


def _not_served(model: str, served: list[str]) -> str:
    if not served:
        return f"model {model!r} is not served: the endpoint lists no models"
    shown = ", ".join(served[:MAX_NAMES_SHOWN])
    more = len(served) - MAX_NAMES_SHOWN
    tail = f" and {more} more" if more > 0 else ""
    return f"model {model!r} is not served; it serves {shown}{tail} (llm.model)"


def _credentials(status: int | None, api_key: str | None) -> str:
    if api_key is None:
        return f"wants an API key (HTTP {status}) and none is set: set OPENAI_API_KEY"
    return f"rejected the API key (HTTP {status}): check OPENAI_API_KEY"


def _not_found(base_url: str, path: str) -> str:
    url = base_url.rstrip("/") + path
    hint = "is the base URL right?"
    if not urlsplit(base_url).path.rstrip("/").endswith("/v1"):
        hint = f"most endpoints need /v1: try {base_url.rstrip('/')}/v1"
    return f"HTTP 404 from {url}: {hint}"


async def check_telegram(section: TelegramConfig, timeout: float) -> Check:
    """Telegram's ``getMe`` with the bot token, as the adapter's start does."""
    if not section.active:
        return Check("telegram", True, "off")
    if not section.token:
        return Check("telegram", False, "enabled but TELEGRAM_BOT_TOKEN is not set")
    base = section.base_url
    url = base.replace("{token}", section.token) if "{token}" in base else base + section.token
    status, body = await _fetch("POST", url + "/getMe", {}, timeout)
    if isinstance(body, str):
        return Check("telegram", False, f"{_host(base)}: {body}")
    if status in (401, 404):
        return Check("telegram", False, "Telegram refused the token: check TELEGRAM_BOT_TOKEN")
    result = body.get("result") if isinstance(body, dict) else None
    if status != 200 or not isinstance(result, dict):
        return Check("telegram", False, f"getMe answered HTTP {status}")
    return Check("telegram", True, f"@{result.get('username')} (getMe answered)")


async def check_discord(section: DiscordConfig, timeout: float) -> Check:
    """Discord's ``/users/@me`` with the bot token, as discord.py's login does."""
    if not section.active:
        return Check("discord", True, "off")
    if not section.token:
        return Check("discord", False, "enabled but DISCORD_BOT_TOKEN is not set")
    headers = {"Authorization": f"Bot {section.token}"}
    url = section.api_base.rstrip("/") + "/users/@me"
    status, body = await _fetch("GET", url, headers, timeout)
    if isinstance(body, str):
        return Check("discord", False, f"{_host(url)}: {body}")
    if status in (401, 403):
        return Check("discord", False, "Discord refused the token: check DISCORD_BOT_TOKEN")
    if status != 200 or not isinstance(body, dict):
        return Check("discord", False, f"/users/@me answered HTTP {status}")
    return Check("discord", True, f"{body.get('username')} (/users/@me answered)")


async def _fetch(
    method: str, url: str, headers: dict[str, str], timeout: float
) -> tuple[int, object]:
    """The status and JSON body of one request; on failure, a reason that names no URL
    (the Telegram URL holds the token)."""
    limit = aiohttp.ClientTimeout(total=timeout)
    try:
        async with (
            aiohttp.ClientSession(timeout=limit) as session,
            session.request(method, url, headers=headers) as response,
        ):
            try:
                body: object = await response.json(content_type=None)
            except ValueError:
                body = None
            return response.status, body
    except TimeoutError:
        return 0, f"timed out after {timeout:g} s"
    except aiohttp.ClientConnectorError as exc:
        return 0, f"unreachable ({exc.os_error.strerror or type(exc.os_error).__name__})"
    except aiohttp.ClientError as exc:
        return 0, f"failed ({type(exc).__name__})"


def _host(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")


async def network_checks(config: Config, timeout: float, spend: bool) -> list[Check]:
    """The model, Telegram and Discord checks, run at once, in a fixed order."""
    jobs = [check_model(name, t, timeout, spend) for name, t in model_targets(config)]
    jobs.append(check_telegram(config.telegram, timeout))
    jobs.append(check_discord(config.discord, timeout))
    return list(await asyncio.gather(*jobs))
