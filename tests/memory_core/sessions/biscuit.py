"""A person's history holding "I have a dog called Biscuit" in every place a session keeps
text, for the `/forget` tests of both backends (`write_biscuit_history`)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from memory_core.sessions.backend import SessionBackend
from memory_core.sessions.models import NewMessage, SessionOrigin
from tests.memory_core.sessions.helpers import message, origin

ALICE, BOB = "telegram-1001", "telegram-2002"
SAID = "I have a dog called Biscuit"
ENTRY = 'User has a dog called "Biscuit" — a beagle'  # quotes and a non-ASCII dash
TEXTS = (SAID, ENTRY)
PROMPT = f"You are Mnemo.\n## What you know about the user\n- {ENTRY}\n- User likes tea\n"
ROWS_CHANGED = 11  # see `write_biscuit_history`


def memory_call(content: str) -> str:
    """A stored tool call (the gateway's form): arguments JSON inside the list's JSON."""
    arguments = json.dumps({"action": "add", "target": "user", "content": content})
    call = {"id": "c1", "type": "function", "function": {"name": "memory", "arguments": arguments}}
    return json.dumps([call], ensure_ascii=False)


@dataclass(frozen=True)
class BiscuitHistory:
    first: int  # the conversation's first session (ended by the compression)
    child: int  # its continuation, open, with a stored prompt
    review: int  # a background review's session that holds the entry
    extraction: int  # one that does not
    said: int  # the message "I have a dog called Biscuit"
    evidence: int  # a message named by id (its copy in `child` goes too)


def internal(source: str) -> SessionOrigin:
    return SessionOrigin(
        session_key=f"{source}:1:run",
        source=source,
        user_key=ALICE,
        chat_id=ALICE,
        chat_type="private",
        title=f"{source} of session 1",
    )


async def write_biscuit_history(store: SessionBackend) -> BiscuitHistory:
    """Alice's history: the text in her messages, a tool call (escaped twice), a tool
    result (escaped once), a reply, a stored prompt, a compression's copy and a review.

    Forgetting `TEXTS` and the evidence changes `ROWS_CHANGED` rows: the review's
    session and its 3 messages deleted, 6 messages rewritten (said, the call, the
    result, the reply, the evidence and its copy) and the child's prompt."""
    alice = origin(ALICE)
    first = await store.append_messages(
        origin=alice,
        messages=[
            message(SAID, 1000, platform_message_id="101"),
            message("", 1001, role="assistant", key="t:1", tool_calls=memory_call(ENTRY)),
            message(
                json.dumps({"ok": True, "saved": ENTRY}, ensure_ascii=False),
                1002,
                role="tool",
                tool_name="memory",
                tool_call_id="c1",
            ),
            message(f"Noted: {ENTRY}.", 1003, role="assistant"),
            message("he is three and loves the park", 1004, platform_message_id="105"),
        ],
    )
    said, evidence = first.message_ids[0], first.message_ids[4]
    copy = NewMessage(
        "user", "he is three and loves the park", 1004, platform_message_id="105", key="c:105"
    )
    child = await store.start_child_session(
        first.session_id, messages=[copy, message("I also have a cat", 1010)]
    )
    await store.set_system_prompt(child, PROMPT)
    review = await store.append_messages(
        origin=internal("review"),
        messages=[
            message(f"The conversation:\n[user] {SAID}", 1020, key="r:0"),
            message("", 1021, role="assistant", key="r:1", tool_calls=memory_call(ENTRY)),
            message("saved", 1022, role="tool", key="r:2", tool_call_id="c1"),
        ],
    )
    await store.end_session(review.session_id, "done")
    extraction = await store.append_messages(
        origin=internal("extraction"),
        messages=[message("The conversation:\n[user] I also have a cat", 1030, key="e:0")],
    )
    await store.end_session(extraction.session_id, "done")
    return BiscuitHistory(
        first.session_id, child, review.session_id, extraction.session_id, said, evidence
    )
