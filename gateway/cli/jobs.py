"""`mnemo jobs`: the background work that is scheduled and pending, for an operator.

It runs as a process of its own, beside the bot or without it, so it reads
what the bot would act on: the configuration (the periodic quiet-time
extraction, the review thresholds) and the backlog in the session store
(session-end extractions due, quiet sessions awaiting extraction now,
sessions due for a review), SQLite or PostgreSQL as configured. It never
creates state.db: without one, nothing is pending.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

import click

from gateway.cli.base import CliState, json_text, run_command, visible
from gateway.cli.stores import missing_history, open_stores
from gateway.config import Config
from memory_core import SessionBackend
from memory_core.sessions import BacklogEntry, ReviewDue

MOST = 10_000  # rows read per list; beyond this the count shows a "+"


@dataclass(frozen=True)
class Backlog:
    """What `mnemo jobs` reports, read at one moment."""

    now: float
    pending: list[BacklogEntry]
    quiet: list[BacklogEntry]
    reviews: list[ReviewDue]


def periodic_line(config: Config) -> str:
    """The periodic job in one sentence, as the configuration sets it up."""
    fate = "ended" if config.sessions.idle_reset else "kept open"
    return (
        f"quiet-time extraction: sessions quiet for {config.sessions.idle_minutes} min "
        f"are extracted and {fate}"
    )


def review_line(config: Config) -> str:
    """When a background review is due, as the configuration sets it up."""
    turns, steps = config.memory.nudge_interval, config.skills.creation_nudge_interval
    parts = [f"{turns} turns without a memory write"] if turns > 0 else []
    parts += [f"{steps} tool steps without a skill write"] if steps > 0 else []
    if not parts:
        return "background review: off"
    return "background review: after a reply, once a session reaches " + " or ".join(parts)


async def read_backlog(store: SessionBackend, config: Config, now: float) -> Backlog:
    """The backlog in `store` as the bot's jobs would see it at `now`."""
    pending = await store.pending_extractions(limit=MOST)
    quiet = await store.quiet_sessions(before=now - config.sessions.idle_minutes * 60, limit=MOST)
    reviews = await store.reviews_due(
        config.memory.nudge_interval, config.skills.creation_nudge_interval, limit=MOST
    )
    return Backlog(now, pending, quiet, reviews)


def iso(ts: float) -> str:
    return datetime.fromtimestamp(ts, UTC).isoformat(timespec="seconds")


def _heading(title: str, rows: Sequence[object]) -> str:
    if not rows:
        return f"{title}: none"
    return f"{title}: {len(rows)}{'+' if len(rows) >= MOST else ''}"


def _messages(count: int) -> str:
    return f"{count} message" if count == 1 else f"{count} messages"


def text_lines(config: Config, backlog: Backlog) -> list[str]:
    """The report for a person at a terminal (stored text not yet made visible)."""
    lines = ["scheduled:", f"  {periodic_line(config)}", f"  {review_line(config)}"]
    lines.append(_heading("session-end extractions pending", backlog.pending))
    for e in backlog.pending:
        lines.append(
            f"  session {e.session_id}  {e.user_key}  ended {iso(e.ended_at or 0.0)} "
            f"({e.end_reason or 'no reason'})  {_messages(e.pending_messages)} pending"
        )
    lines.append(_heading("quiet sessions awaiting extraction", backlog.quiet))
    for e in backlog.quiet:
        lines.append(
            f"  session {e.session_id}  {e.user_key}  last message {iso(e.last_message_at)}  "
            f"{_messages(e.pending_messages)} pending"
        )
    lines.append(_heading("reviews due", backlog.reviews))
    for r in backlog.reviews:
        lines.append(
            f"  session {r.session_id}  {r.user_key}  {r.turns_since_memory} turns since a "
            f"memory write, {r.steps_since_skill} tool steps since a skill write"
        )
    return lines


def _entry_json(e: BacklogEntry) -> dict[str, object]:
    return {
        "session_id": e.session_id,
        "session_key": e.session_key,
        "user_key": e.user_key,
        "source": e.source,
        "chat_id": e.chat_id,
        "ended_at": e.ended_at,
        "ended_at_iso": None if e.ended_at is None else iso(e.ended_at),
        "end_reason": e.end_reason,
        "extracted_through": e.extracted_through,
        "last_message_id": e.last_message_id,
        "last_message_at": e.last_message_at,
        "last_message_at_iso": iso(e.last_message_at),
        "pending_messages": e.pending_messages,
    }


def json_payload(config: Config, backlog: Backlog) -> dict[str, object]:
    """The report for a program: the same facts, with raw timestamps too."""
    return {
        "now": backlog.now,
        "scheduled": {
            "quiet_extraction": {
                "idle_minutes": config.sessions.idle_minutes,
                "idle_reset": config.sessions.idle_reset,
                "description": periodic_line(config),
            },
            "review": {
                "turns": config.memory.nudge_interval,
                "steps": config.skills.creation_nudge_interval,
                "description": review_line(config),
            },
        },
        "pending_extractions": [_entry_json(e) for e in backlog.pending],
        "quiet_sessions": [_entry_json(e) for e in backlog.quiet],
        "reviews_due": [
            {
                "session_id": r.session_id,
                "session_key": r.session_key,
                "user_key": r.user_key,
                "turns_since_memory": r.turns_since_memory,
                "steps_since_skill": r.steps_since_skill,
            }
            for r in backlog.reviews
        ],
    }


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of text.")
@click.pass_obj
def jobs(state: CliState, as_json: bool) -> None:
    """Show the background work: what is scheduled, and what is pending in the session store."""

    def body() -> tuple[Config, Backlog]:
        config, now = state.config(), time.time()
        if missing_history(config) is not None:
            return config, Backlog(now, [], [], [])
        with open_stores(config) as stores:
            return config, stores.run(read_backlog(stores.storage.sessions, config, now))

    config, backlog = run_command(body)
    if as_json:
        click.echo(json_text(json_payload(config, backlog), indent=2))
        return
    for line in text_lines(config, backlog):
        click.echo(visible(line))
