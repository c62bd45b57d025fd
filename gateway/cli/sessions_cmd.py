"""`mnemo sessions …`: import, export, search, delete and check session history.

Every command opens the configured session store (state.db under home, or
PostgreSQL when ``storage.url`` is set) through `gateway.cli.stores`; on SQLite,
the commands that only read or erase refuse a data directory without a state.db
rather than create one. Failures print one line and exit non-zero.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO

import click

from gateway.cli.base import (
    EXIT_CONFIG,
    CliState,
    fail,
    json_text,
    json_visible,
    run_command,
    user_key_option,
    visible,
)
from gateway.cli.stores import OpenStores, missing_history, open_stores
from memory_core.sessions import (
    ImportFormatError,
    SearchOptions,
    SearchScope,
    SessionHit,
    parse_time_phrase,
    parse_timestamp,
)


@contextmanager
def _existing(state: CliState) -> Iterator[OpenStores]:
    """The open stores, refusing (one line) a SQLite data directory without history."""
    config = state.config()
    path = missing_history(config)
    if path is not None:
        fail(f"no session history at {path}")
    with open_stores(config) as stores:
        yield stores


@click.group()
def sessions() -> None:
    """Import, export, search, erase and check conversation history."""


@sessions.command("import")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.pass_obj
def import_(state: CliState, file: Path) -> None:
    """Import FILE (JSON Lines, one message per line; see docs/formats.md): all of it, or nothing.

    A bad line stops the import with its number (exit code 2). The bot keeps
    writing while an import runs: rows go in short transactions and become
    visible together at the end.
    """

    def body() -> None:
        with open_stores(state.config()) as stores, file.open("rb") as lines:
            db = stores.storage.sessions
            if sys.stderr.isatty() and file.is_file():  # never count /dev/zero or a pipe
                total = _count_lines(file)
                with click.progressbar(length=total, label="importing", file=sys.stderr) as bar:
                    result = stores.run(db.import_lines(lines, progress=bar.update))
            else:
                result = stores.run(db.import_lines(lines))
        click.echo(
            f"imported {result.messages_inserted:,} messages "
            f"({result.sessions_created:,} new sessions, {result.sessions_extended:,} extended, "
            f"{result.messages_skipped:,} already present) from {result.lines:,} lines"
        )

    def checked() -> None:
        try:
            body()
        except ImportFormatError as exc:  # the file is wrong, not the store: exit 2
            fail(str(exc), EXIT_CONFIG)

    run_command(checked)


def _count_lines(file: Path) -> int:
    with file.open("rb") as handle:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: handle.read(1 << 20), b""))


@sessions.command()
@click.option(
    "--user", "user_key", required=True, callback=user_key_option, help="The person's user key."
)
@click.option(
    "--output", "-o", type=click.Path(dir_okay=False, path_type=Path), help="File (default stdout)."
)
@click.pass_obj
def export(state: CliState, user_key: str, output: Path | None) -> None:
    """Write all of a person's messages as JSON Lines (the import format)."""

    def body() -> int:
        with _existing(state) as stores:
            lines = stores.run(stores.storage.sessions.export_lines(user_key))
        if output is None:
            return _write_lines(lines, sys.stdout)
        with output.open("w", encoding="utf-8") as handle:
            return _write_lines(lines, handle)

    count = run_command(body)
    click.echo(f"exported {count:,} messages of {user_key}", err=True)


def _write_lines(lines: list[str], out: IO[str]) -> int:
    count = 0
    for line in lines:
        out.write(json_visible(line) + "\n")  # the same JSON, safe to print
        count += 1
    out.flush()
    return count


def _when(text: str | None, bound: str) -> float | None:
    """Epoch seconds from a number, an ISO-8601 date or time, or a phrase ("last week")."""
    if text is None:
        return None
    try:
        return parse_timestamp(text)
    except ValueError:
        pass
    window = parse_time_phrase(text, datetime.now(UTC).astimezone())
    if window.query or (window.since is None and window.until is None):
        raise click.BadParameter(f"cannot read {text!r} as a time", param_hint=f"--{bound}")
    if bound == "until":
        return window.until if window.until is not None else window.since
    return window.since if window.since is not None else window.until


@sessions.command()
@click.argument("query")
@click.option(
    "--user",
    "user_key",
    required=True,
    callback=user_key_option,
    help="Search this person's history.",
)
@click.option("--chat", "chat_id", default=None, help="Only this chat.")
@click.option("--since", default=None, help="From (epoch, ISO-8601 or e.g. 'last week').")
@click.option("--until", default=None, help="Before (epoch, ISO-8601 or e.g. 'yesterday').")
@click.option("--limit", default=10, show_default=True, type=click.IntRange(1, 100))
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.option("--include-internal", is_flag=True, help="Also review/extraction sessions.")
@click.pass_obj
def search(
    state: CliState,
    query: str,
    user_key: str,
    chat_id: str | None,
    since: str | None,
    until: str | None,
    limit: int,
    as_json: bool,
    include_internal: bool,
) -> None:
    """Search a person's past conversations for QUERY, best first."""
    since_at, until_at = _when(since, "since"), _when(until, "until")

    def body() -> list[SessionHit]:
        options = SearchOptions(
            since=since_at, until=until_at, limit=limit, include_internal=include_internal
        )
        with _existing(state) as stores:
            found = stores.storage.sessions.search(query, SearchScope(user_key, chat_id), options)
            return stores.run(found)

    hits = run_command(body)
    if as_json:
        click.echo(json_text([_hit_json(h) for h in hits], indent=2))
        return
    if not hits:
        click.echo("no matching sessions")
    for rank, hit in enumerate(hits, start=1):
        _print_hit(rank, hit, lambda line: click.echo(visible(line)))


def _iso(ts: float | None) -> str | None:
    return None if ts is None else datetime.fromtimestamp(ts, UTC).isoformat()


def _hit_json(hit: SessionHit) -> dict[str, object]:
    return {
        "session": hit.external_id if hit.external_id is not None else str(hit.session_id),
        "session_id": hit.session_id,
        "external_id": hit.external_id,
        "started_at": hit.started_at,
        "ended_at": hit.ended_at,
        "source": hit.source,
        "chat_id": hit.chat_id,
        "chat_type": hit.chat_type,
        "score": round(hit.score, 4),
        "snippet": hit.snippets[0].text if hit.snippets else "",
        "snippets": [
            {"message_id": s.message_id, "role": s.role, "timestamp": s.timestamp, "text": s.text}
            for s in hit.snippets
        ],
    }


def _print_hit(rank: int, hit: SessionHit, echo: Callable[[str], None]) -> None:
    name = hit.external_id if hit.external_id is not None else str(hit.session_id)
    echo(
        f"{rank}. session {name} (id {hit.session_id}) · {hit.source} · chat {hit.chat_id} "
        f"({hit.chat_type}) · started {_iso(hit.started_at)} · score {hit.score:.2f}"
    )
    for snippet in hit.snippets:
        text = " ".join(snippet.text.split())
        echo(f"   [{snippet.role} {_iso(snippet.timestamp)}] {text}")


@sessions.command()
@click.option(
    "--user",
    "user_key",
    required=True,
    callback=user_key_option,
    help="The person whose history to erase.",
)
@click.option("--yes", is_flag=True, help="Do not ask for confirmation.")
@click.pass_obj
def delete(state: CliState, user_key: str, yes: bool) -> None:
    """Erase all of a person's sessions, messages and index entries."""
    if not yes:
        click.confirm(f"Erase every session of {user_key}? This cannot be undone", abort=True)

    def body() -> tuple[int, int]:
        with _existing(state) as stores:
            result = stores.run(stores.storage.sessions.delete_user(user_key))
            return result.sessions, result.messages

    sessions_deleted, messages_deleted = run_command(body)
    click.echo(
        f"deleted {sessions_deleted:,} sessions and {messages_deleted:,} messages of {user_key}"
    )


@sessions.command()
@click.pass_obj
def check(state: CliState) -> None:
    """Check the session store: the database, its search indexes, the message counts."""

    def body() -> str:
        with _existing(state) as stores:
            stores.run(stores.storage.sessions.check(lambda line: click.echo(visible(line))))
            return stores.storage.backend

    backend = run_command(body)
    click.echo("state.db is consistent" if backend == "sqlite" else "session history is consistent")
