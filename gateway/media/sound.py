"""Voice notes and audio to text: the length checks, the upload's file name, the transcript.

A recording's length is checked twice: by what the platform states, before the
download, and by what its own header says (`duration.measured_seconds`), after it and
before anything is sent to transcription; the download itself is capped at the bytes
`max_seconds` can take at a generous bit rate (`duration.audio_byte_cap`).

The recording stays in memory: it goes to the transcription endpoint as the
bytes the platform gave, under a file name whose extension tells the endpoint
its format (OpenAI's reads the format from the name).
"""

from __future__ import annotations

import logging
from typing import Protocol

from gateway.errors import MediaError, MediaTooLargeError, ModelError, TranscriptionError
from gateway.i18n import N_
from gateway.media.duration import measured_seconds
from gateway.messages import MediaRef

log = logging.getLogger(__name__)

TOO_LONG = N_("That recording is too long for me: I can listen to {minutes} min at most.")
NOT_LISTENING = N_(
    "I can't listen to voice notes here yet, so please type your message. "
    "(The operator can turn them on with media.transcription.model.)"
)
FAILED = N_("I couldn't transcribe that voice note just now. Please try again, or type it.")
NO_WORDS = N_("I couldn't make out any words in that voice note.")

# The endpoint reads the format from the extension (flac mp3 mp4 mpeg mpga m4a ogg wav webm).
_EXTENSIONS = {
    "audio/ogg": "ogg",
    "audio/opus": "ogg",
    "audio/x-opus+ogg": "ogg",
    "audio/mpeg": "mp3",
    "audio/mp3": "mp3",
    "audio/mp4": "m4a",
    "audio/m4a": "m4a",
    "audio/x-m4a": "m4a",
    "audio/aac": "m4a",
    "audio/wav": "wav",
    "audio/x-wav": "wav",
    "audio/wave": "wav",
    "audio/webm": "webm",
    "audio/flac": "flac",
    "audio/x-flac": "flac",
    "video/mp4": "mp4",
    "video/webm": "webm",
}
_KNOWN = frozenset(_EXTENSIONS.values()) | {"mpeg", "mpga", "oga"}


class Transcriber(Protocol):
    """An OpenAI-compatible transcription endpoint (`ModelClient.transcribe`)."""

    async def transcribe(self, audio: bytes, *, filename: str, mime: str | None) -> str: ...


def check_listenable(ref: MediaRef, max_seconds: float, transcriber: Transcriber | None) -> None:
    """Refuse, before anything is downloaded, a recording nobody can transcribe here or one
    longer than `max_seconds` (by the length the platform reports)."""
    if transcriber is None:
        raise MediaError(NOT_LISTENING, detail="media.transcription.model is not set")
    if ref.seconds is not None and ref.seconds > max_seconds:
        raise too_long(max_seconds, f"{ref.seconds:g} s by the platform")


def check_measured(audio: bytes, ref: MediaRef, max_seconds: float) -> None:
    """Refuse a downloaded recording whose header says it is longer than `max_seconds`,
    whatever the platform said; one whose length cannot be read from its header is
    bounded by its bytes only (`duration.audio_byte_cap`, on the download)."""
    seconds = measured_seconds(audio)
    if seconds is None:
        log.info("length of %s (%d bytes) not read from its header", upload_name(ref), len(audio))
    elif seconds > max_seconds:
        raise too_long(max_seconds, f"{seconds:.0f} s measured, {ref.seconds} s stated")


def too_long(max_seconds: float, detail: str) -> MediaTooLargeError:
    """The person's line for a recording over `max_seconds`; `detail` says how it was seen."""
    return MediaTooLargeError(
        TOO_LONG,
        detail=f"{detail}, over media.max_seconds {max_seconds:g}",
        minutes=f"{max_seconds / 60:.3g}",
    )


def upload_name(ref: MediaRef) -> str:
    """The file name to upload `ref` as: its own when its extension is a known format,
    else one made from its type ("voice.ogg" when the platform said nothing)."""
    name = (ref.name or "").strip().replace("/", "_")
    stem, dot, extension = name.rpartition(".")
    if dot and stem and extension.lower() in _KNOWN:
        return name
    mime = (ref.mime or "").split(";")[0].strip().lower()
    return f"{ref.kind}.{_EXTENSIONS.get(mime, 'ogg')}"


async def transcript(transcriber: Transcriber, audio: bytes, ref: MediaRef) -> str:
    """What `audio` says, on one line; `TranscriptionError` when the endpoint fails or
    hears nothing."""
    filename = upload_name(ref)
    try:
        text = await transcriber.transcribe(audio, filename=filename, mime=ref.mime)
    except ModelError as exc:
        log.warning("transcription of %s (%d bytes) failed: %s", filename, len(audio), exc)
        raise TranscriptionError(FAILED, detail=str(exc)) from exc
    words = " ".join(text.split())
    if not words:
        raise TranscriptionError(NO_WORDS, detail=f"empty transcript of {filename}")
    return words
