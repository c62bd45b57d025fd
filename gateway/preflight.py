"""What `mnemo run` checks before it starts, so that a set-up mistake is one line.

The configuration loads without a platform token (the other commands need none)
and without looking at the disk; these are the mistakes that only show once the
bot starts: a platform switched on without its token, a skills folder that is
missing or cannot be read, a data directory that cannot be made or written.
Each problem is one line naming the key (or the variable) and the absolute path.
"""

from __future__ import annotations

import os
from pathlib import Path

from gateway.config import Config
from gateway.errors import ConfigError

_TOKENS = (("telegram", "TELEGRAM_BOT_TOKEN"), ("discord", "DISCORD_BOT_TOKEN"))


def check_startup(config: Config) -> None:
    """Raise `ConfigError` naming every one of `startup_problems`, one line each."""
    problems = startup_problems(config)
    if problems:
        raise ConfigError("\n".join(problems))


def default_skills_folder(config: Config) -> str | None:
    """Make the default skills folder when it is missing (the operator named none); the
    one line that says so, or None. A folder the operator named is never made here: its
    absence is a `startup_problems` mistake."""
    where = config.skills.dir.absolute()
    if config.skills.named or where.exists() or where.is_symlink():
        return None
    try:
        where.mkdir(parents=True)
    except OSError:  # startup_problems names it
        return None
    return f"made the skills folder {where} (empty): put SKILL.md folders there, or set skills.dir"


def startup_problems(config: Config) -> list[str]:
    """Every mistake that would stop `mnemo run`, one line each; nothing is created."""
    problems = [p for p in (_token_problem(config, name, var) for name, var in _TOKENS) if p]
    problems += _skills_problems(config.skills.dir)
    problems += _home_problems(config.home)
    return problems


def _token_problem(config: Config, platform: str, variable: str) -> str | None:
    section = config.telegram if platform == "telegram" else config.discord
    if section.enabled and not section.token:
        return (
            f"config error: {platform}.enabled is true but {variable} is not set: set it, "
            f"or set {platform}.enabled to false"
        )
    return None


def _skills_problems(folder: Path) -> list[str]:
    where = folder.absolute()
    fix = "point skills.dir (or MNEMO_SKILLS_DIR) at the skills folder"
    if not where.exists() and not where.is_symlink():
        return [f"config error: skills.dir: {where} does not exist (create it, or {fix})"]
    try:
        with os.scandir(where):  # what the skills store does first; a plain check misses ELOOP
            pass
    except NotADirectoryError:
        return [f"config error: skills.dir: {where} is not a folder ({fix})"]
    except OSError as exc:
        return [f"config error: skills.dir: cannot read {where}: {exc.strerror or exc}"]
    if not os.access(where, os.R_OK | os.X_OK):  # e.g. listable by root only
        return [f"config error: skills.dir: cannot read {where}: permission denied"]
    return []


def _home_problems(home: Path) -> list[str]:
    where = home.absolute()
    if where.exists() and not where.is_dir():
        return [f"config error: home: {where} is not a folder (set home or MNEMO_HOME)"]
    existing = where
    while not existing.exists():  # the folder that will hold the new data directory
        existing = existing.parent
    if not existing.is_dir() or not os.access(existing, os.W_OK | os.X_OK):
        what = "write to" if existing == where else f"create {where} in"
        return [f"config error: home: cannot {what} {existing} (set home or MNEMO_HOME)"]
    return []


DEFAULT_MODEL_URL = "https://api.openai.com/v1"


def model_setup_note(config: Config) -> str | None:
    """One line for a start with no model set up (no key, the default endpoint): how to set
    one; None when a key or an endpoint of the operator's is set. Not an error: a local
    server may need no key, and the console still answers commands."""
    if config.llm.api_key or str(config.llm.base_url).rstrip("/") != DEFAULT_MODEL_URL:
        return None
    return (
        "no model is set up: set OPENAI_BASE_URL (your OpenAI-compatible server) and "
        "OPENAI_API_KEY, then `mnemo doctor` checks that a turn would work"
    )
