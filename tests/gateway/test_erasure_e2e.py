"""`mnemo run` serving Telegram: an erasure leaves nothing of the person (issue 22, item 3).

The real `mnemo` script against the fake Bot API and the fake model (the fixtures of
test_telegram_e2e). Alice's work is held at the fake model when she confirms
``/forget all`` in private: a group turn of hers, or the background review of her
group session; the model is then released with a memory write of a new word. Each
test reads the data directory itself, once the bot has stopped: no file under it holds
a word of Alice's or her user key in its path (state.db and its WAL included, and
its word index queried too), while Bob, who talked in the same group before and
after, keeps all of his. The last test runs `mnemo users erase` beside the running
bot: it refuses in one line and erases nothing. Each test has its own fakes and its
own `mnemo run`.
"""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

import pytest

from tests.fakes.openai import Fault, ToolCall, Turn
from tests.gateway.e2e_support import fakes_fixture, learning_section
from tests.gateway.processes import MNEMO, dump_state, run_environment
from tests.gateway.test_telegram_e2e import ALICE, BOB, GROUP, MENTION, Fakes, Mnemo, start_mnemo
from tests.timing import scaled

pytestmark = pytest.mark.slow  # a mnemo run of its own per test

ALICE_KEY, BOB_KEY = f"telegram-{ALICE}", f"telegram-{BOB}"
ALICE_WORDS = ("xylocarpus", "pterodactylus", "zygodactyl")
"""Said by Alice in private, said by her in the group, written by the held model call."""
BOB_WORDS = ("quinceberries", "marmalade", "gooseberry")
"""In Bob's memory, in his group message before the erasure, and in the one after."""
REVIEW_PROMPT_START = "[Background review."
ERASED_LINE = "(everything I held about you was just erased, this message with it)"


fakes = fakes_fixture(Fakes, scope="function")


def start_bot(fakes: Fakes, workdir: Path, nudge: int = 1000) -> Mnemo:
    """`mnemo run` in `workdir` (data in `workdir`/data), a review after every `nudge`
    turns without a memory write; waits until it is about to poll Telegram."""
    learning = learning_section(nudge=nudge, creation_nudge=1000)
    return start_mnemo(fakes, workdir, grace=10, learning=learning)


def remember(fakes: Fakes, chat: int, user: int, fact: str, said: str, answer: str) -> None:
    """`user` says `said` in `chat`; the model writes `fact` to their USER.md and answers."""
    seen = len(fakes.bot_messages(chat))
    fact_call = {"target": "user", "action": "add", "content": fact}
    fakes.call(fakes.model.call_tools, ToolCall("memory", fact_call))
    fakes.call(fakes.model.say, answer)
    fakes.text(chat, user, said, **({"entities": [MENTION]} if chat == GROUP else {}))
    fakes.reply(chat, seen, answer)


def bob_then_alice_remember(fakes: Fakes) -> None:
    """Bob, then Alice, each tell the bot a fact in private: the model writes it down."""
    remember(fakes, BOB, BOB, "User grows quinceberries", "I grow quinceberries", "Noted, Bob.")
    remember(
        fakes, ALICE, ALICE, "User rows on the xylocarpus lake",
        "I row on the xylocarpus lake", "Noted, Alice.",
    )  # fmt: skip


def in_group(fakes: Fakes, user: int, said: str) -> str:
    """`user` says `said` to the bot in the group; the echoed reply (waits for it)."""
    seen = len(fakes.bot_messages(GROUP))
    fakes.text(GROUP, user, f"@mnemo_bot {said}", entities=[MENTION])
    return fakes.reply(GROUP, seen, said)


def forget_all(fakes: Fakes) -> str:
    """Alice asks for /forget all in private and confirms it by text; the confirmation."""
    seen = len(fakes.bot_messages(ALICE))
    fakes.command(ALICE, ALICE, "/forget all")
    fakes.reply(ALICE, seen, "/forget all confirm")
    seen = len(fakes.bot_messages(ALICE))
    fakes.command(ALICE, ALICE, "/forget all confirm")
    return fakes.reply(ALICE, seen, "Erased everything I held about you")


def review_requests(fakes: Fakes, word: str) -> int:
    """How many background-review requests the fake model saw for a session holding
    `word` (a probe for `fakes.wait`: it runs on the fakes' loop)."""
    bodies = [r.body["messages"] for r in fakes.model.requests]
    return sum(
        1
        for messages in bodies
        if str(messages[-1].get("content")).startswith(REVIEW_PROMPT_START)
        and any(word in str(m.get("content")) for m in messages)
    )


def stop(mnemo: Mnemo) -> None:
    code, err = mnemo.stop()
    assert code == 0, err
    assert not any(word in err for word in ALICE_WORDS + BOB_WORDS)  # the logs neither


def indexed(home: Path, word: str) -> int:
    """How many messages the word index of `home`/state.db finds for `word`."""
    with sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True) as db:
        sql = "SELECT COUNT(*) FROM messages_fts WHERE messages_fts MATCH ?"
        count: int = db.execute(sql, (f'"{word}"',)).fetchone()[0]
    return count


def assert_nothing_of_alice(home: Path) -> None:
    """No file under `home` holds Alice's words, or her key in its path; Bob's data is
    all there. Read once the bot has stopped (state.db's WAL is a file like the others)."""
    files = [p for p in home.rglob("*") if p.is_file()]
    assert home / "state.db" in files
    assert not (home / "memories" / "users" / ALICE_KEY).exists()
    assert [p for p in home.rglob("*") if ALICE_KEY in str(p.relative_to(home))] == []
    for path in files:
        held = path.read_bytes()
        found = [w for w in ALICE_WORDS if w.encode() in held]
        assert found == [], f"{path.relative_to(home)} holds {found}"
    rows = dump_state(home)
    assert ALICE_KEY not in rows
    for word in ALICE_WORDS:  # the word index (its terms are prefix-compressed on disk)
        assert indexed(home, word) == 0, word
    assert indexed(home, "marmalade") == 2  # Bob's group message and its echo
    bob = home / "memories" / "users" / BOB_KEY / "USER.md"
    assert bob.read_text(encoding="utf-8").strip() == "User grows quinceberries"
    assert BOB_KEY in rows and all(word in rows for word in BOB_WORDS)


def test_a_group_turn_held_at_the_model_keeps_nothing_once_its_person_is_erased(
    fakes: Fakes, tmp_path: Path
) -> None:
    mnemo = start_bot(fakes, tmp_path / "bot")
    try:
        bob_then_alice_remember(fakes)
        assert (mnemo.home / "memories" / "users" / ALICE_KEY / "USER.md").exists()
        assert in_group(fakes, BOB, "bob before: marmalade") == "echo: bob before: marmalade"

        fact = {"target": "user", "action": "add", "content": "User draws zygodactyl birds"}
        held = Turn(tool_calls=(ToolCall("memory", fact),), fault=Fault.stall())
        fakes.call(fakes.model.add_turn, held)  # then the fake echoes: her reply
        alice_said = len(fakes.bot_messages(GROUP))
        fakes.text(
            GROUP,
            ALICE,
            "@mnemo_bot alice here: pterodactylus, I draw zygodactyl birds",
            entities=[MENTION],
        )
        fakes.wait(lambda: fakes.model.stalled == 1)

        assert "1 memory entry" in forget_all(fakes)
        fakes.call(fakes.model.release)  # the held call answers: write zygodactyl, then reply
        fakes.wait(lambda: fakes.model.stalled == 0)
        after = in_group(fakes, BOB, "bob after: gooseberry")
        assert after == "echo: bob after: gooseberry"
        shown = [m.text for m in fakes.bot_messages(GROUP)[alice_said:]]
        assert not any(w in (t or "") for t in shown for w in ALICE_WORDS)  # no held answer
        assert [t for t in shown if t != after] in ([], [ERASED_LINE])
    finally:
        stop(mnemo)
    assert_nothing_of_alice(mnemo.home)


def test_a_review_held_at_the_model_writes_nothing_once_its_person_is_erased(
    fakes: Fakes, tmp_path: Path
) -> None:
    mnemo = start_bot(fakes, tmp_path / "bot", nudge=1)  # a review after each plain reply
    try:
        bob_then_alice_remember(fakes)
        in_group(fakes, BOB, "bob before: marmalade")
        fakes.wait(lambda: review_requests(fakes, "marmalade") == 1)  # Bob's: echoed, no write

        fakes.call(fakes.model.say, "Lovely, Alice.")  # her group reply; then her review:
        fact = {"target": "user", "action": "add", "content": "User draws zygodactyl birds"}
        fakes.call(fakes.model.add_turn, Turn(tool_calls=(ToolCall("memory", fact),),
                                              fault=Fault.stall()))  # fmt: skip
        seen = len(fakes.bot_messages(GROUP))
        fakes.text(
            GROUP,
            ALICE,
            "@mnemo_bot alice here: pterodactylus, I draw zygodactyl birds",
            entities=[MENTION],
        )
        fakes.reply(GROUP, seen, "Lovely, Alice.")
        fakes.wait(lambda: fakes.model.stalled == 1)
        assert (
            fakes.call(review_requests, fakes, "pterodactylus") == 1
        )  # the held one is her review

        assert "1 memory entry" in forget_all(fakes)
        fakes.call(fakes.model.release)  # the held review answers: write zygodactyl
        fakes.wait(lambda: fakes.model.stalled == 0)
        after = in_group(fakes, BOB, "bob after: gooseberry")
        fakes.wait(lambda: review_requests(fakes, "gooseberry") == 1)  # Bob's reviews go on
        assert not (mnemo.home / "memories" / "users" / ALICE_KEY).exists()
        shown = [m.text for m in fakes.bot_messages(GROUP)[seen:]]
        assert shown == ["Lovely, Alice.", after]  # no line saying her memory changed
    finally:
        stop(mnemo)
    assert_nothing_of_alice(mnemo.home)
    assert "zygodactyl" not in dump_state(mnemo.home)  # no review record session either


def test_mnemo_users_erase_beside_a_running_bot_refuses_in_one_line_and_erases_nothing(
    fakes: Fakes, tmp_path: Path
) -> None:
    workdir = tmp_path / "bot"
    mnemo = start_bot(fakes, workdir)
    profile = mnemo.home / "memories" / "users" / ALICE_KEY / "USER.md"

    def erase() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(MNEMO), "users", "erase", ALICE_KEY, "--yes"],
            capture_output=True, text=True, timeout=scaled(60), cwd=workdir,
            env=run_environment(fakes.model.url, workdir),
        )  # fmt: skip

    try:
        bob_then_alice_remember(fakes)
        refused = erase()
        assert refused.returncode == 1, refused
        [line] = (refused.stdout + refused.stderr).strip().splitlines()
        assert "a running mnemo serves" in line and "/forget all" in line
        assert profile.read_text(encoding="utf-8").strip() == "User rows on the xylocarpus lake"
        assert "xylocarpus" in dump_state(mnemo.home)  # her session too
        in_group(fakes, BOB, "bob after the refusal")  # the bot serves on, undisturbed
        in_group(fakes, ALICE, "alice after the refusal")
    finally:
        stop(mnemo)
    assert "xylocarpus" in dump_state(mnemo.home)
    erased = erase()  # the bot stopped: now the same command goes through
    assert erased.returncode == 0, erased
    assert not profile.exists() and "xylocarpus" not in dump_state(mnemo.home)
    bob = mnemo.home / "memories" / "users" / BOB_KEY / "USER.md"
    assert bob.read_text(encoding="utf-8").strip() == "User grows quinceberries"
