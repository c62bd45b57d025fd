"""Voice notes and pictures in the turn, through `Conversations` against the fake model.

A fake reader (or the real `MediaReader` with a fake download and transcriber)
stands for the platform's file: what is stored is the text read; a picture is
an ``image_url`` part in its own turn only, and the later turns carry the
stored text, with the same bytes turn after turn; a read that fails is one
line and leaves nothing in state.db; a busy session's voice note is answered
in order; one person's slow download never holds up another's reply; and a
transcript is the person's data like any message (their /recall and /export
find it, /forget all takes it, nobody else's search does).
"""

from __future__ import annotations

import asyncio
import io
import json
import sqlite3
from dataclasses import replace
from pathlib import Path
from typing import Any

from PIL import Image

from gateway.access import AccessPolicy
from gateway.app import Services, build_conversations
from gateway.conversation import Conversations
from gateway.errors import MediaError, MediaTooLargeError
from gateway.media import NOT_SHOWN_MARK, MediaReader, ReadMedia, image_line, spoken_text
from gateway.messages import InboundMessage, MediaRef
from gateway.session_queue import SessionQueue
from gateway.turns import MediaReading
from memory_core import SearchScope
from tests.fakes.base import wait_until
from tests.fakes.openai import FakeOpenAI, Fault, image_parts
from tests.gateway.serving import private
from tests.gateway.serving import stored_rows as rows
from tests.gateway.sinks import ListSink
from tests.timing import scaled

PIXEL = (  # a 1x1 PNG: the fake model opens it as the API would
    "data:image/png;base64,iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk"
    "+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
)
VOICE = MediaRef("voice", "voice-1", mime="audio/ogg", seconds=4)
PHOTO = MediaRef("image", "photo-1", mime="image/jpeg")
KAYAK = spoken_text("I booked the kayak trip to Lake Bled for May")
BICYCLE = "look what I found\n" + image_line("a red bicycle leaning on a canal railing")


class FakeReader:
    """Reads a message's first media by its ref: a `ReadMedia`, or a `MediaError` raised;
    each read waits for `release` (set from the start)."""

    def __init__(self, results: dict[str, ReadMedia | MediaError]) -> None:
        self.results = results
        self.reads: list[str] = []
        self.release = asyncio.Event()
        self.release.set()

    async def read(self, message: InboundMessage) -> ReadMedia:
        ref = message.media[0].ref
        self.reads.append(ref)
        await self.release.wait()
        result = self.results[ref]
        if isinstance(result, MediaError):
            raise result
        return result


class FakeTranscriber:
    """The transcription endpoint: what it hears of each recording, by its bytes."""

    def __init__(self, heard: dict[bytes, str]) -> None:
        self.heard = heard

    async def transcribe(self, audio: bytes, *, filename: str, mime: str | None) -> str:
        return self.heard[audio]


def bot(services: Services, media: MediaReading) -> Conversations:
    return build_conversations(services, AccessPolicy.everyone(), media=media)


def sent(
    text: str, user: str = "42", media: tuple[MediaRef, ...] = (), message_id: str | None = None
) -> InboundMessage:
    return replace(private(text, user, message_id), media=media)


def last_user(body: dict[str, Any]) -> Any:
    return body["messages"][-1]["content"]


def table_rows(services: Services, table: str) -> int:
    with sqlite3.connect(services.config.home / "state.db") as conn:
        return int(conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0])


async def test_a_voice_note_is_stored_as_its_transcript_and_sent_as_text(
    fake: FakeOpenAI, services: Services
) -> None:
    reader = FakeReader({"voice-1": ReadMedia(KAYAK)})
    fake.say("Lake Bled in May sounds lovely.")
    sink = ListSink()
    await bot(services, reader).handle(sent("", media=(VOICE,), message_id="7"), sink)
    assert sink.replies == ["Lake Bled in May sounds lovely."]
    assert reader.reads == ["voice-1"]
    assert last_user(fake.requests[0].body) == KAYAK  # plain text: no picture, no parts
    assert rows(services, "42") == [
        ("user", KAYAK),
        ("assistant", "Lake Bled in May sounds lovely."),
    ]
    assert await SessionQueue(services.sessions).waiting("telegram") == []  # out once stored


async def test_a_picture_is_shown_in_its_turn_only_and_the_history_keeps_its_bytes(
    fake: FakeOpenAI, services: Services
) -> None:
    reader = FakeReader({"photo-1": ReadMedia(BICYCLE, images=(PIXEL,))})
    conversations = bot(services, reader)
    fake.say("A red bicycle!")
    fake.say("It was red.")
    fake.say("By a canal.")
    await conversations.handle(sent("look what I found", media=(PHOTO,)), ListSink())
    await conversations.handle(sent("what colour was it?"), ListSink())
    # a cold start: turn 3 rebuilds the history from state.db
    await bot(services, reader).handle(sent("and where?"), ListSink())
    one, two, three = (r.body for r in fake.requests)

    assert last_user(one) == [
        {"type": "text", "text": BICYCLE},
        {"type": "image_url", "image_url": {"url": PIXEL, "detail": "auto"}},
    ]
    assert image_parts(two) == [] and image_parts(three) == []  # never sent again
    assert two["messages"][1] == {"role": "user", "content": BICYCLE}  # the stored text
    assert "image_url" not in json.dumps(two) + json.dumps(three)
    earlier = two["messages"][:-1]  # everything before turn 2's own message
    assert json.dumps(three["messages"][: len(earlier)]) == json.dumps(earlier)
    assert three["messages"][len(earlier)] == two["messages"][-1]
    assert rows(services, "42")[0] == ("user", BICYCLE)


async def test_a_real_picture_read_with_vision_reaches_the_model_once(
    fake: FakeOpenAI, services: Services
) -> None:
    """The real reader: the photo decoded and scaled with Pillow, described once by the
    auxiliary model, shown as an image part the (fake) API accepts."""
    picture = io.BytesIO()
    Image.new("RGB", (3000, 2000), (200, 30, 30)).save(picture, "JPEG")

    async def fetch(platform: str, media: MediaRef, max_bytes: int) -> bytes:
        return picture.getvalue()

    vision = services.config.llm.model_copy(update={"vision": True})
    seen = replace(services, config=services.config.model_copy(update={"llm": vision}))
    conversations = build_conversations(seen, AccessPolicy.everyone(), media_fetch=fetch)
    fake.say("A plain red rectangle.")  # the auxiliary model's description
    fake.say("It is all red.")
    fake.say("Still red.")
    await conversations.handle(sent("what is this?", media=(PHOTO,)), ListSink())
    await conversations.handle(sent("and now?"), ListSink())
    describe, one, two = (r.body for r in fake.requests)

    text = "what is this?\n" + image_line("A plain red rectangle.")
    assert len(image_parts(describe)) == 1 and image_parts(one) == image_parts(describe)
    assert last_user(one)[0] == {"type": "text", "text": text}
    assert image_parts(two) == [] and two["messages"][1] == {"role": "user", "content": text}
    assert rows(services, "42")[0] == ("user", text)


async def test_a_media_error_is_one_line_and_nothing_is_kept(
    fake: FakeOpenAI, services: Services
) -> None:
    too_long = MediaTooLargeError(
        "That recording is too long for me: I can listen to {minutes} min at most.",
        detail="900 s",
        minutes=10,
    )
    reader = FakeReader({"voice-1": too_long})
    sink, confirmed = ListSink(), asyncio.Event()
    handled = bot(services, reader).handle(
        sent("", media=(VOICE,), message_id="9"), sink, confirmed.set
    )
    await handled
    assert sink.replies == ["That recording is too long for me: I can listen to 10 min at most."]
    assert confirmed.is_set()  # the platform need not send it again
    assert fake.requests == []
    assert table_rows(services, "messages") == 0 and table_rows(services, "sessions") == 0
    assert await SessionQueue(services.sessions).waiting("telegram") == []


async def test_by_default_a_voice_note_without_transcription_is_one_line_naming_the_setting(
    fake: FakeOpenAI, services: Services
) -> None:
    conversations = build_conversations(services, AccessPolicy.everyone())  # the real reader
    sink = ListSink()
    await conversations.handle(sent("", media=(VOICE,), message_id="5"), sink)
    assert len(sink.replies) == 1 and "media.transcription.model" in sink.replies[0]
    assert fake.requests == [] and table_rows(services, "messages") == 0
    assert await SessionQueue(services.sessions).waiting("telegram") == []


async def test_a_picture_with_vision_off_reaches_the_model_as_its_caption_and_a_note(
    fake: FakeOpenAI, services: Services
) -> None:
    fetched: list[MediaRef] = []

    async def fetch(platform: str, media: MediaRef, max_bytes: int) -> bytes:
        fetched.append(media)
        return b""

    conversations = build_conversations(services, AccessPolicy.everyone(), media_fetch=fetch)
    fake.say("Nice bike.")
    await conversations.handle(sent("my new bike", media=(PHOTO,)), ListSink())
    assert fetched == []  # not downloaded: it cannot be shown
    assert last_user(fake.requests[0].body) == f"my new bike\n{NOT_SHOWN_MARK}"
    assert rows(services, "42")[0] == ("user", f"my new bike\n{NOT_SHOWN_MARK}")


async def test_a_busy_sessions_voice_note_is_queued_and_answered_in_order(
    fake: FakeOpenAI, services: Services
) -> None:
    reader = FakeReader({"voice-1": ReadMedia(KAYAK)})
    conversations = bot(services, reader)
    fake.fail_next(Fault.stall())
    first, second = ListSink(), ListSink()
    turn_one = asyncio.create_task(conversations.handle(sent("one", message_id="1"), first))
    await wait_until(lambda: fake.stalled == 1)
    confirmed = asyncio.Event()
    voice = sent("", media=(VOICE,), message_id="2")
    turn_two = asyncio.create_task(conversations.handle(voice, second, confirmed.set))
    await asyncio.wait_for(confirmed.wait(), scaled(5))  # kept while "one" is still stalled
    waiting = await SessionQueue(services.sessions).waiting("telegram")
    assert [w.message.media for w in waiting] == [(VOICE,)]
    assert reader.reads == []  # read in its turn, after "one"

    fake.say("Answer one.")
    fake.say("Answer two.")
    fake.release()
    await asyncio.wait_for(asyncio.gather(turn_one, turn_two), scaled(5))
    assert first.replies == ["Answer one."] and second.replies == ["Answer two."]
    assert rows(services, "42") == [
        ("user", "one"),
        ("assistant", "Answer one."),
        ("user", KAYAK),
        ("assistant", "Answer two."),
    ]
    assert await SessionQueue(services.sessions).waiting("telegram") == []


async def test_a_slow_download_of_alices_voice_note_does_not_delay_bobs_reply(
    fake: FakeOpenAI, services: Services
) -> None:
    """The real reader: Alice's file is still downloading while Bob is answered."""
    arrived, fetched = asyncio.Event(), asyncio.Event()
    fetches: list[tuple[str, str, int]] = []

    async def fetch(platform: str, media: MediaRef, max_bytes: int) -> bytes:
        fetches.append((platform, media.ref, max_bytes))
        arrived.set()
        await fetched.wait()
        return b"ogg bytes"

    reader = MediaReader(
        services.config.media,
        vision=False,
        fetch=fetch,
        transcriber=FakeTranscriber({b"ogg bytes": "pick up the cello at noon"}),
        describer=None,
    )
    conversations = bot(services, reader)
    alice = ListSink()
    alice_confirmed = asyncio.Event()
    voice = sent("", "1", media=(VOICE,), message_id="a1")
    alices = asyncio.create_task(conversations.handle(voice, alice, alice_confirmed.set))
    await asyncio.wait_for(arrived.wait(), scaled(5))
    assert alice_confirmed.is_set()  # kept in the queue: the platform fetches on

    fake.say("Hi Bob.")
    bob = ListSink()
    await asyncio.wait_for(conversations.handle(sent("hi", "2", message_id="b1"), bob), scaled(5))
    assert bob.replies == ["Hi Bob."] and not alices.done()

    fake.say("Noon, the cello: noted.")
    fetched.set()
    await asyncio.wait_for(alices, scaled(5))
    assert alice.replies == ["Noon, the cello: noted."]
    assert fetches == [("telegram", "voice-1", services.config.media.max_bytes)]
    assert rows(services, "1") == [
        ("user", "[voice note] pick up the cello at noon"),
        ("assistant", "Noon, the cello: noted."),
    ]


async def test_a_transcript_is_the_persons_data_scoped_exported_and_erased(
    fake: FakeOpenAI, services: Services
) -> None:
    alice, bob = "42", "77"
    reader = FakeReader({"voice-1": ReadMedia(KAYAK)})
    conversations = bot(services, reader)
    fake.say("Lovely.")
    await conversations.handle(sent("", alice, media=(VOICE,), message_id="1"), ListSink())
    fake.say("Hi Bob.")
    await conversations.handle(sent("hello", bob), ListSink())
    await conversations.handle(sent("/new", alice), ListSink())

    fake.say("RECAP: a kayak trip to Lake Bled in May.")
    recall = ListSink()
    await conversations.handle(sent("/recall kayak", alice), recall)
    assert "RECAP: a kayak trip" in recall.replies[-1]
    assert KAYAK in json.dumps(fake.requests[-1].body, ensure_ascii=False)  # recapped from it
    assert await services.sessions.search("kayak", SearchScope(f"telegram-{bob}")) == []
    bobs_recall = ListSink()
    requests = len(fake.requests)
    await conversations.handle(sent("/recall kayak", bob), bobs_recall)
    assert len(fake.requests) == requests and "Bled" not in bobs_recall.replies[-1]

    export = ListSink()
    await conversations.handle(sent("/export", alice), export)
    exported = Path(export.replies[-1].rsplit("deleted in 10 minutes): ", 1)[1].strip())
    records = [json.loads(line) for line in exported.read_text(encoding="utf-8").splitlines()]
    assert ("user", KAYAK) in [(r.get("role"), r.get("content")) for r in records]

    await conversations.handle(sent("/forget all", alice), ListSink())
    await conversations.handle(sent("/forget all confirm", alice), ListSink())
    assert await services.sessions.search("kayak", SearchScope(f"telegram-{alice}")) == []
    assert rows(services, alice) == [] and not exported.exists()
    assert rows(services, bob) == [("user", "hello"), ("assistant", "Hi Bob.")]
