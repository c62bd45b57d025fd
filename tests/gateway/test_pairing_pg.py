"""Replicas on one PostgreSQL share one access list: a code one gives, another redeems;
whom ``mnemo users allow`` lets in, every running replica serves at its next message."""

from __future__ import annotations

import re
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway.app import open_bot
from gateway.cli import main
from gateway.config import StorageConfig
from gateway.errors import AccessListError
from gateway.pairing import ACCESS_FILE, AccessList, Grant
from memory_core import StorageSettings, open_storage
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import SKILLS, config_for, private
from tests.gateway.sinks import ListSink
from tests.memory_core.pg.test_documents import wait_for, waiting_on_a_lock
from tests.timing import scaled

ALICE, BOB = Grant("telegram", "42"), Grant("telegram", "43")


@asynccontextmanager
async def replicas(
    tmp_path: Path, url: str, *clocks: Callable[[], float]
) -> AsyncIterator[list[AccessList]]:
    """One AccessList per clock, each from its own `open_storage` (its own data dir)."""
    async with AsyncExitStack() as stack:
        lists = []
        for n, clock in enumerate(clocks):
            settings = StorageSettings(home=tmp_path / f"replica{n}", skills_dir=SKILLS, url=url)
            storage = await stack.enter_async_context(open_storage(settings))
            lists.append(AccessList(storage.document(ACCESS_FILE), clock))
        yield lists


def nothing_under(home: Path) -> bool:
    """No access file (nor its lock) was written under `home`."""
    return not any(p.name.startswith(ACCESS_FILE) for p in home.rglob("*"))


async def test_a_code_one_replica_gave_is_redeemed_through_another_and_served_by_both(
    tmp_path: Path, pg_database: str
) -> None:
    async with replicas(tmp_path, pg_database, time.time, time.time) as (first, second):
        assert first.document.label == "postgresql:documents/access.json"
        assert first.granted("telegram") == frozenset()
        code = first.issue_code("telegram", ALICE.user_id)
        assert second.redeem(code) == ALICE
        assert first.granted("telegram") == {"42"}  # at once: the row's version moved
        with pytest.raises(AccessListError, match="unknown or already used"):
            first.redeem(code)  # used up for every replica
        assert second.deny(ALICE) and first.granted("telegram") == frozenset()
    assert nothing_under(tmp_path)


async def test_two_replicas_giving_codes_at_once_keep_both(
    tmp_path: Path, pg_database: str
) -> None:
    """Alice's replica is slow in the middle of its change (its clock stalls); Bob's,
    changing meanwhile, waits for it and keeps Alice's code beside his own."""
    holding, release = threading.Event(), threading.Event()

    def stalling() -> float:
        if not holding.is_set():
            holding.set()
            release.wait(scaled(10))
        return time.time()

    codes: dict[str, str] = {}
    async with replicas(tmp_path, pg_database, stalling, time.time) as (slow, fast):

        def issue(access: AccessList, grant: Grant) -> None:
            codes[grant.user_id] = access.issue_code(grant.platform, grant.user_id)

        alice = threading.Thread(target=issue, args=(slow, ALICE))
        alice.start()
        assert holding.wait(scaled(10))
        bob = threading.Thread(target=issue, args=(fast, BOB))
        bob.start()
        wait_for(lambda: waiting_on_a_lock(pg_database))
        release.set()
        alice.join(scaled(10))
        bob.join(scaled(10))
        assert fast.redeem(codes["42"]) == ALICE and slow.redeem(codes["43"]) == BOB
        assert slow.granted("telegram") == fast.granted("telegram") == {"42", "43"}


def mnemo(home: Path, url: str, *args: str) -> Result:
    """The real `mnemo` entry point with MNEMO_DATABASE_URL, as on another host."""
    env = {
        "MNEMO_HOME": str(home),
        "MNEMO_SKILLS_DIR": str(SKILLS),
        "MNEMO_CONFIG": None,
        "MNEMO_DATABASE_URL": url,
    }
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


async def test_mnemo_users_on_the_database_is_seen_by_a_running_replica(
    tmp_path: Path, pg_database: str
) -> None:
    cli_home = tmp_path / "cli"
    async with replicas(tmp_path, pg_database, time.time) as (running,):
        assert running.granted("telegram") == frozenset()
        allowed = mnemo(cli_home, pg_database, "users", "allow", "telegram:42")
        assert allowed.output.strip() == "let in telegram user 42", allowed.output
        assert running.granted("telegram") == {"42"}  # no restart

        code = running.issue_code("telegram", BOB.user_id)  # Bob refused, told his code
        redeemed = mnemo(cli_home, pg_database, "users", "allow", code)
        assert redeemed.output.strip() == "let in telegram user 43 (their pairing code is used up)"
        assert running.granted("telegram") == {"42", "43"}
        listed = mnemo(cli_home, pg_database, "users", "allowed")
        assert "telegram:42  (access.json)" in listed.output

        denied = mnemo(cli_home, pg_database, "users", "deny", "telegram:42")
        assert denied.exit_code == 0, denied.output
        assert running.granted("telegram") == {"43"}
    assert nothing_under(tmp_path)


async def test_the_bot_on_postgresql_gives_codes_from_the_database(
    fake: FakeOpenAI, tmp_path: Path, pg_database: str
) -> None:
    """`open_bot` takes the access list from the storage: a refused person's code, given
    by the running bot, is redeemed by ``mnemo users allow`` on another host."""
    home = tmp_path / "data"
    storage = StorageConfig(url=pg_database)
    config = config_for(fake.url, home).model_copy(update={"storage": storage})
    async with open_bot(config, []) as bot:
        refused = ListSink()
        await bot.conversations.handle(private("hello", "42"), refused)
        match = re.search(r"pairing code is ([A-Z0-9]{8})", "".join(refused.replies))
        assert match is not None, refused.replies
        redeemed = mnemo(tmp_path / "cli", pg_database, "users", "allow", match.group(1))
        assert redeemed.exit_code == 0, redeemed.output
        fake.say("Hi Alice.")
        served = ListSink()
        await bot.conversations.handle(private("hello again", "42"), served)
        assert served.replies == ["Hi Alice."]
    assert nothing_under(tmp_path)


def test_mnemo_users_without_the_database_fails_in_one_line(tmp_path: Path) -> None:
    refused = mnemo(tmp_path, "postgresql://mnemo:s3cret@127.0.0.1:1/mnemo", "users", "allowed")
    assert refused.exit_code == 1
    lines = refused.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("mnemo: cannot connect to PostgreSQL")
    assert "s3cret" not in refused.output and nothing_under(tmp_path)
