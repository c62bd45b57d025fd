"""Access without restarts: a refused person's pairing code, redeemed by the real
``mnemo users allow`` or an admin's ``/allow``, lets in that person (and only them) on
their next message, in the same running `Conversations` reading the data dir's list."""

from __future__ import annotations

import re
import time
from pathlib import Path

from click.testing import CliRunner, Result

from gateway.access import AccessPolicy
from gateway.app import Services
from gateway.cli import main
from gateway.conversation import Conversations
from gateway.pairing import ACCESS_FILE, ALPHABET, CODE_LENGTH, AccessList
from memory_core import FileDocument
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import SKILLS, private, serving, stored_rows
from tests.gateway.sinks import ListSink

ALICE, BOB, ADMIN, MEMBER = "42", "43", "1", "7"
_CODE = re.compile(rf"pairing code is ([{ALPHABET}]{{{CODE_LENGTH}}})\b")


def mnemo(home: Path, *args: str) -> Result:
    """The real `mnemo` entry point on the test's data directory (another AccessList than
    the running bot's, as another process would have)."""
    env = {"MNEMO_HOME": str(home), "MNEMO_SKILLS_DIR": str(SKILLS), "MNEMO_CONFIG": None}
    return CliRunner().invoke(main, list(args), env=env, catch_exceptions=False)


def bot(services: Services, clock: float | None = None) -> Conversations:
    """The bot with the real policy: `ADMIN` is an admin, `MEMBER` in allowed_users, the
    data dir's list beside them (its codes issued at wall time minus `clock` seconds)."""
    path = services.config.home / ACCESS_FILE
    document = FileDocument(path)
    access_list = (
        AccessList(document) if clock is None else AccessList(document, lambda: time.time() - clock)
    )
    policy = AccessPolicy({"telegram": [MEMBER]}, admins=[f"telegram:{ADMIN}"], granted=access_list)
    return serving(services, policy)


async def say(conversations: Conversations, user: str, text: str) -> str:
    sink = ListSink()
    await conversations.handle(private(text, user), sink)
    return "".join(sink.replies)


def code_in(reply: str) -> str:
    match = _CODE.search(reply)
    assert match is not None, reply
    return match.group(1)


async def test_a_refused_person_gets_their_id_and_a_code_and_the_cli_lets_them_in(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = bot(services)
    refused = await say(conversations, ALICE, "hello")
    assert f"Your telegram user id is {ALICE}" in refused
    code = code_in(refused)
    assert f"mnemo users allow {code}" in refused
    assert fake.requests == [] and stored_rows(services, ALICE) == []  # nothing of hers kept
    path = services.config.home / ACCESS_FILE
    assert oct(path.stat().st_mode & 0o777) == "0o600"
    assert code not in path.read_text()  # only its hash is kept

    result = mnemo(services.config.home, "users", "allow", code.lower())  # any case
    assert result.exit_code == 0, result.output
    assert result.output.strip() == f"let in telegram user {ALICE} (their pairing code is used up)"

    fake.say("Hi Alice.")
    assert await say(conversations, ALICE, "hello again") == "Hi Alice."  # no restart
    assert stored_rows(services, ALICE) == [("user", "hello again"), ("assistant", "Hi Alice.")]

    again = mnemo(services.config.home, "users", "allow", code)
    assert again.exit_code == 1
    assert again.output.strip() == f"mnemo: pairing code {code[:2]}… is unknown or already used"


async def test_bob_cannot_get_in_with_alices_code(fake: FakeOpenAI, services: Services) -> None:
    conversations = bot(services)
    alice_code = code_in(await say(conversations, ALICE, "hi"))
    bob_code = code_in(await say(conversations, BOB, "hi"))
    assert alice_code != bob_code
    # Bob, refused, sends Alice's code every way he can: he stays out, and quiet
    assert await say(conversations, BOB, alice_code) == ""
    assert await say(conversations, BOB, f"/allow {alice_code}") == ""
    assert mnemo(services.config.home, "users", "allow", alice_code).exit_code == 0
    assert await say(conversations, BOB, "let me in") == ""  # her code admitted only her
    fake.say("Hello.")
    assert await say(conversations, ALICE, "hi") == "Hello."
    bodies = [str(r.body) for r in fake.requests]
    assert len(bodies) == 1 and "let me in" not in bodies[0] and alice_code not in bodies[0]
    assert stored_rows(services, BOB) == []
    # Bob's own code still works, for Bob only
    assert mnemo(services.config.home, "users", "allow", bob_code).exit_code == 0
    fake.say("Hi Bob.")
    assert await say(conversations, BOB, "hi") == "Hi Bob."


async def test_an_admins_allow_lets_them_in_and_a_members_is_refused(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = bot(services)
    code = code_in(await say(conversations, ALICE, "hi"))
    refused = await say(conversations, MEMBER, f"/allow {code}")
    assert refused == "/allow is for admins only."
    assert await say(conversations, ALICE, "hi") == ""  # still out
    assert "/allow" not in await say(conversations, MEMBER, "/help")
    assert "/allow — " in await say(conversations, ADMIN, "/help")

    reply = await say(conversations, ADMIN, f"/allow {code[:4]}-{code[4:]}")
    assert reply == f"Let in telegram user {ALICE}: their next message is answered."
    fake.say("Welcome.")
    assert await say(conversations, ALICE, "hi") == "Welcome."
    used = await say(conversations, ADMIN, f"/allow {code}")
    assert used == f"Nobody was let in: pairing code {code[:2]}… is unknown or already used."


async def test_a_wrong_or_expired_code_is_refused_in_one_line(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = bot(services, clock=3600 + 60)  # codes issued 61 minutes ago
    code = code_in(await say(conversations, ALICE, "hi"))
    home = services.config.home
    expired = mnemo(home, "users", "allow", code)
    assert expired.exit_code == 1
    assert expired.output.startswith(f"mnemo: pairing code {code[:2]}… has expired;")
    assert expired.output.count("\n") == 1
    wrong = mnemo(home, "users", "allow", "HHHHHHHH")
    assert (wrong.exit_code, wrong.output.count("\n")) == (1, 1)
    assert "unknown or already used" in wrong.output
    bad = mnemo(home, "users", "allow", "0O1I")
    assert bad.exit_code == 1 and "is not a pairing code" in bad.output
    chat = await say(conversations, ADMIN, "/allow nonsense!")
    assert chat.startswith("Nobody was let in: ") and "\n" not in chat
    assert await say(conversations, ALICE, "hi") == ""  # none of it let her in
    assert fake.requests == []


async def test_allow_and_deny_by_id_without_a_restart(fake: FakeOpenAI, services: Services) -> None:
    conversations = bot(services)
    home = services.config.home
    assert mnemo(home, "users", "allow", f"telegram:{ALICE}").output.strip() == (
        f"let in telegram user {ALICE}"
    )
    fake.say("Yes?")
    assert await say(conversations, ALICE, "hi") == "Yes?"
    listed = mnemo(home, "users", "allowed")
    assert f"telegram:{ALICE}  (access.json)" in listed.output
    assert f"telegram:{ADMIN}  (admins)" not in listed.output  # the test's policy, not config

    denied = mnemo(home, "users", "deny", f"telegram-{ALICE}")
    assert denied.exit_code == 0
    assert denied.output.strip() == f"removed telegram user {ALICE}: their next message is refused"
    refused = await say(conversations, ALICE, "hi")
    assert f"Your telegram user id is {ALICE}" in refused and len(fake.requests) == 1
    again = mnemo(home, "users", "deny", f"telegram:{ALICE}")
    assert again.exit_code == 1 and "not on the data directory's list" in again.output
    nobody = mnemo(home, "users", "deny", ALICE)  # no platform: which one?
    assert nobody.exit_code == 2 and "platform:id" in nobody.output


def test_deny_says_so_for_a_config_entry(tmp_path: Path) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text('telegram:\n  allowed_users: ["42"]\nadmins: ["telegram:1"]\n')
    env = {"MNEMO_HOME": str(tmp_path / "data"), "MNEMO_SKILLS_DIR": str(SKILLS)}

    def run(*args: str) -> Result:
        return CliRunner().invoke(main, ["--config", str(config), *args], env=env)

    only_config = run("users", "deny", "telegram:42")
    assert only_config.exit_code == 1
    assert "the config's telegram.allowed_users serves them" in only_config.output
    assert run("users", "allow", "telegram:42").exit_code == 0
    both = run("users", "deny", "telegram:42")
    assert both.exit_code == 0
    assert both.output.startswith("removed telegram user 42 from the data directory's list, but")
    admin = run("users", "deny", "telegram:1")
    assert admin.exit_code == 1 and "admins" in admin.output
    listed = run("users", "allowed", "--json")
    assert '"person": "telegram:42"' in listed.output and '"source": "admins"' in listed.output
