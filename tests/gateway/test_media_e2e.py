"""Voice notes and pictures through the real `mnemo run`, on Telegram and on Discord.

The real `mnemo` script talks through python-telegram-bot and discord.py to the fake
platforms, which serve the files, and to the fake OpenAI server, which transcribes
(``/v1/audio/transcriptions``, multipart) and answers. With transcription set and
``llm.vision: true``: a voice note is transcribed, the model's request holds the
transcript, the reply arrives and `/recall` later finds the spoken words; a photo
reaches the model as an image part with its caption and is not sent again on the next
turn. An oversized voice note, a failing transcription and a corrupt image each get
one line, and leave nothing: no message in state.db, no byte of the file anywhere in
the data directory. With vision off the model is told an image was attached.
"""

from __future__ import annotations

import io
import json
import sqlite3
import subprocess
from pathlib import Path
from typing import Any

import pytest
from PIL import Image

from tests.fakes.discord import FakeFile
from tests.fakes.openai import Fault, image_parts
from tests.gateway.e2e_support import (
    discord_ready,
    discord_section,
    fakes_fixture,
    learning_section,
    stopped_cleanly,
    telegram_section,
    write_config,
)
from tests.gateway.processes import mnemo_run
from tests.gateway.test_discord_e2e import DC_TOKEN, TG_TOKEN, Fakes, Mnemo

pytestmark = pytest.mark.slow  # mnemo runs of their own

ALICE, BOB = 5101, 5102
MAX_BYTES = 200_000
SPOKEN = "I parked the car on level three near the lift"
VOICE = b"OggS" + b"VOICE-BYTES-5101 " * 200  # any bytes: the fake does not decode sound
HUGE_VOICE = b"OggS" + b"HUGE-VOICE-5101 " * 20_000  # over MAX_BYTES
BROKEN_IMAGE = b"\x89PNG\r\n\x1a\n" + b"BROKEN-IMAGE-5101 " * 50


def jpeg(color: tuple[int, int, int], size: tuple[int, int] = (1200, 900)) -> bytes:
    out = io.BytesIO()
    Image.new("RGB", size, color).save(out, "JPEG", quality=90)
    return out.getvalue()


def config(fakes: Fakes, vision: bool, telegram: bool) -> str:
    platform = (
        telegram_section(fakes.tg.url, (ALICE, BOB))
        if telegram
        else discord_section(fakes.dc.api_base, fakes.dc.gateway_url, (ALICE, BOB))
    )
    return (
        "shutdown_grace: 5\n"
        f"llm:\n  vision: {'true' if vision else 'false'}\n"
        f"media:\n  max_bytes: {MAX_BYTES}\n  transcription:\n    model: whisper-1\n"
        + platform
        + learning_section(nudge=1000, creation_nudge=1000)  # no reviews: the script in order
    )


def start(fakes: Fakes, workdir: Path, *, vision: bool, telegram: bool) -> Mnemo:
    write_config(workdir, config(fakes, vision, telegram))
    token = {"TELEGRAM_BOT_TOKEN": TG_TOKEN} if telegram else {"DISCORD_BOT_TOKEN": DC_TOKEN}
    process = mnemo_run(fakes.model.url, workdir, stdout=subprocess.DEVNULL, **token)
    mnemo = Mnemo(process, workdir / "data")
    mnemo.wait_line("serving ")
    if not telegram:
        discord_ready(fakes, mnemo)
    return mnemo


fakes = fakes_fixture(Fakes, scope="function")


def stored_messages(home: Path) -> list[str]:
    with sqlite3.connect(f"file:{home / 'state.db'}?mode=ro", uri=True) as db:
        return [row[0] for row in db.execute("SELECT content FROM messages ORDER BY id")]


def files_holding(home: Path, *needles: bytes) -> list[str]:
    """The files under `home` holding any of `needles` (the media's own bytes)."""
    found = []
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            found += [f"{path.name}: {n[:20]!r}" for n in needles if n in data]
    return found


def requests_since(fakes: Fakes, before: int) -> list[dict[str, Any]]:
    return fakes.requests()[before:]


def user_texts(body: dict[str, Any]) -> str:
    return json.dumps([m for m in body["messages"] if m["role"] == "user"], ensure_ascii=False)


# ----- Telegram ---------------------------------------------------------------------------


class Telegram:
    """Alice's private chat with the bot on the fake Telegram."""

    def __init__(self, fakes: Fakes) -> None:
        self.fakes = fakes

    def seen(self) -> int:
        return len(self.fakes.call(self.fakes.tg.chat_messages, ALICE))

    def reply(self, after: int, contains: str = "") -> str:
        def found() -> str | None:
            for m in self.fakes.tg.chat_messages(ALICE)[after:]:
                if m.text is not None and contains in m.text:
                    return m.text
            return None

        return self.fakes.wait(found, 20.0)


def test_telegram_voice_and_photo_reach_the_model_and_bad_media_leave_nothing(
    fakes: Fakes, tmp_path: Path
) -> None:
    chat, tg, model = Telegram(fakes), fakes.tg, fakes.model
    with stopped_cleanly(start(fakes, tmp_path / "tg", vision=True, telegram=True)) as mnemo:
        # a voice note: transcribed, its words in the model's request, the reply shown
        fakes.call(model.transcribe, SPOKEN)
        fakes.call(model.say, "Level three, by the lift: noted.")
        seen, asked = chat.seen(), len(fakes.requests())
        fakes.call(tg.inject_voice, ALICE, ALICE, VOICE, duration=4)
        assert chat.reply(seen, "Level three") == "Level three, by the lift: noted."
        sent = fakes.call(lambda: list(model.transcriptions))
        assert len(sent) == 1 and sent[0].model == "whisper-1" and sent[0].size == len(VOICE)
        turn = requests_since(fakes, asked)[-1]
        assert "[voice note] " + SPOKEN in user_texts(turn)

        # a photo with a caption: described once, shown as an image part with the caption
        fakes.call(model.say, "A plain red rectangle.")  # the auxiliary model's description
        fakes.call(model.say, "It is entirely red.")
        seen, asked = chat.seen(), len(fakes.requests())
        fakes.call(tg.inject_photo, ALICE, ALICE, jpeg((220, 20, 20)), "what is in this picture?")
        assert chat.reply(seen, "red") == "It is entirely red."
        shown = requests_since(fakes, asked)
        assert [len(image_parts(r)) for r in shown] == [1, 1]  # description, then the turn
        assert "what is in this picture?" in user_texts(shown[-1])
        assert image_parts(shown[-1])[0].startswith("data:image/jpeg;base64,")

        # the next turn: the picture is not sent again, its description stands in for it
        fakes.call(model.say, "You're welcome.")
        seen, asked = chat.seen(), len(fakes.requests())
        fakes.call(tg.inject_text, ALICE, ALICE, "thanks")
        chat.reply(seen, "welcome")
        (turn,) = requests_since(fakes, asked)
        assert image_parts(turn) == []
        assert "[image: A plain red rectangle.]" in user_texts(turn)

        # in a fresh session, /recall finds the spoken words (its recap request holds them)
        seen = chat.seen()
        fakes.call(tg.inject_command, ALICE, ALICE, "/new")
        chat.reply(seen, "fresh")
        seen, asked = chat.seen(), len(fakes.requests())
        fakes.call(tg.inject_command, ALICE, ALICE, "/recall lift")
        found = chat.reply(seen, "lift")
        assert "Nothing found" not in found
        recaps = requests_since(fakes, asked)
        assert any(SPOKEN in json.dumps(r, ensure_ascii=False) for r in recaps)
        before = stored_messages(mnemo.home)

        # bad media: one line each, nothing kept
        seen = chat.seen()
        fakes.call(tg.inject_voice, ALICE, ALICE, HUGE_VOICE, duration=60)
        assert "too large" in chat.reply(seen, "too large")
        fakes.call(model.fail_transcription, Fault.http(400, message="Invalid file format"))
        seen = chat.seen()
        fakes.call(tg.inject_voice, ALICE, ALICE, VOICE, duration=3)
        assert "couldn't transcribe" in chat.reply(seen, "transcribe")
        seen = chat.seen()
        sizes = [(800, 600, BROKEN_IMAGE)]
        fakes.call(tg.inject_photo, ALICE, ALICE, BROKEN_IMAGE, None, sizes)
        assert "couldn't open that picture" in chat.reply(seen, "picture")
        assert stored_messages(mnemo.home) == before  # nothing of the three was stored
    assert files_holding(mnemo.home, b"HUGE-VOICE-5101", b"VOICE-BYTES-5101", b"BROKEN-IMAGE") == []


def test_telegram_with_vision_off_the_model_is_told_an_image_was_attached(
    fakes: Fakes, tmp_path: Path
) -> None:
    chat, tg, model = Telegram(fakes), fakes.tg, fakes.model
    with stopped_cleanly(start(fakes, tmp_path / "off", vision=False, telegram=True)):
        fakes.call(model.say, "I can't see it, but I hear you.")
        seen, asked = chat.seen(), len(fakes.requests())
        fakes.call(tg.inject_photo, ALICE, ALICE, jpeg((20, 20, 220)), "my new bike")
        chat.reply(seen, "hear you")
        (turn,) = requests_since(fakes, asked)
        assert image_parts(turn) == []
        texts = user_texts(turn)
        assert "my new bike" in texts and "an image was attached" in texts
        assert fakes.call(lambda: list(tg.downloads)) == []  # nothing was downloaded
        seen, asked = chat.seen(), len(fakes.requests())
        fakes.call(tg.inject_photo, ALICE, ALICE, jpeg((20, 220, 20)))
        assert "llm.vision" in chat.reply(seen, "pictures")
        assert requests_since(fakes, asked) == []  # the model was not asked


# ----- Discord ----------------------------------------------------------------------------


def test_discord_voice_message_and_image_attachment_and_bad_media(
    fakes: Fakes, tmp_path: Path
) -> None:
    dc, model = fakes.dc, fakes.model
    with stopped_cleanly(start(fakes, tmp_path / "dc", vision=True, telegram=False)) as mnemo:
        channel = fakes.call(dc.dm_channel_id, ALICE)

        def send(**kw: Any) -> int:
            seen = len(fakes.texts(channel))
            fakes.run(lambda: dc.inject_message(kw.pop("text", ""), ALICE, guild=False, **kw))
            return seen

        fakes.call(model.transcribe, SPOKEN)
        fakes.call(model.say, "Level three: noted.")
        asked = len(fakes.requests())
        seen = send(voice=VOICE, voice_seconds=4.0)
        assert fakes.reply(channel, seen, "Level three") == "Level three: noted."
        assert "[voice note] " + SPOKEN in user_texts(requests_since(fakes, asked)[-1])

        fakes.call(model.say, "A plain green rectangle.")
        fakes.call(model.say, "All green.")
        asked = len(fakes.requests())
        seen = send(text="what colour is this?", files={"photo.jpg": jpeg((20, 200, 20))})
        fakes.reply(channel, seen, "All green")
        shown = requests_since(fakes, asked)
        assert [len(image_parts(r)) for r in shown] == [1, 1]
        assert "what colour is this?" in user_texts(shown[-1])
        fakes.call(model.say, "Sure.")
        asked = len(fakes.requests())
        fakes.reply(channel, send(text="ok"), "Sure")
        (turn,) = requests_since(fakes, asked)
        assert image_parts(turn) == [] and "[image: A plain green rectangle.]" in user_texts(turn)
        before = stored_messages(mnemo.home)

        huge = FakeFile(HUGE_VOICE, "audio/ogg", duration_secs=60.0)
        assert "too large" in fakes.reply(channel, send(files={"memo.ogg": huge}), "too large")
        fakes.call(model.fail_transcription, Fault.http(400, message="Invalid file format"))
        failed = fakes.reply(channel, send(voice=VOICE, voice_seconds=3.0), "transcribe")
        assert "couldn't transcribe" in failed
        broken = FakeFile(BROKEN_IMAGE, "image/png")
        unreadable = fakes.reply(channel, send(files={"x.png": broken}), "picture")
        assert "couldn't open that picture" in unreadable
        assert stored_messages(mnemo.home) == before
    assert files_holding(mnemo.home, b"HUGE-VOICE-5101", b"VOICE-BYTES-5101", b"BROKEN-IMAGE") == []
