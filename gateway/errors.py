"""Errors of the gateway package.

GatewayError
 ├── ConfigError            configuration file or environment is invalid
 ├── ModelError             the model endpoint failed (status, retry_after)
 │    ├── ModelStalledError     no data from the model for `llm.stall_timeout` seconds
 │    ├── ModelCutOffError      the reply stream broke off before it was finished
 │    ├── ModelAuthError        the endpoint rejected our credentials (HTTP 401/403)
 │    ├── RequestTooLargeError  the endpoint refused the request as too long
 │    ├── ModelUnreadableError  the endpoint's answer could not be read (a chunk not JSON)
 │    └── ModelNotServedError   the endpoint's model list lacks the configured model
 ├── RateLimitedError       a platform asked us to wait `retry_after` seconds
 ├── DeliveryError          a platform refused a send or edit for good
 │    └── AnswerUnreadableError  it took the call, but its answer could not be read
 ├── NotStoredError         a message could not be kept (its store is unavailable); resent
 ├── InstanceLockedError    another `mnemo` process serves the same data directory
 ├── AdapterFailedError     a chat platform's adapter could not start, or stopped for good
 ├── RecallArgumentError    session_search or /recall was given arguments it cannot use
 ├── ChoiceRefusedError     a picked choice is unknown, used up, expired or someone else's
 ├── MediaError             a voice note, audio file or picture cannot be read; one line
 │   ├── MediaTooLargeError     over media.max_bytes (or media.max_seconds)
 │   ├── MediaDownloadError     the platform could not give the file (gone, refused, timeout)
 │   ├── TranscriptionError     the transcription endpoint failed or heard nothing
 │   └── ImageUnreadableError   Pillow cannot open it, or it decodes to too many pixels
 └── AccessListError        the data dir's access list or a pairing code or id was refused
"""

from __future__ import annotations

from typing import Any, Protocol


class GatewayError(Exception):
    """Root of every error raised by the gateway package."""


class ConfigError(GatewayError):
    """The configuration is invalid; the message names the key and the problem."""


class ModelError(GatewayError):
    """The model endpoint failed; `status` is the HTTP status when there was one."""

    def __init__(
        self, message: str, status: int | None = None, retry_after: float | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retry_after = retry_after


class ModelStalledError(ModelError):
    """The model sent nothing (no headers, or no next chunk) for the stall timeout."""


class ModelCutOffError(ModelError):
    """The reply stream ended or broke before the model finished its reply."""


class ModelAuthError(ModelError):
    """The endpoint refused our API key (HTTP 401 or 403); only the operator can fix it."""


class RequestTooLargeError(ModelError):
    """The endpoint refused the request as larger than the model's context (400 or 413)."""


class ModelUnreadableError(ModelError):
    """The endpoint sent something that is not what the API says (a stream chunk that is
    not JSON); trying again would most likely read the same."""


class ModelNotServedError(ModelError):
    """The model list came back without the configured model; `served` is what it lists."""

    def __init__(self, served: list[str]) -> None:
        super().__init__("model not served")
        self.served = served


class RateLimitedError(GatewayError):
    """A chat platform refused a call for now; try again after `retry_after` seconds."""

    def __init__(self, message: str, retry_after: float) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class DeliveryError(GatewayError):
    """A platform refused a send or edit for good (blocked, bad request, down); the
    message says what it answered."""


class AnswerUnreadableError(DeliveryError):
    """A platform answered a send or edit with something its client could not read (not
    JSON, or not the object it should be): the call most likely did what it was asked, so
    it is taken as done and never made again (the person would see it twice)."""


class NotStoredError(GatewayError):
    """A person's message could not be stored because its store is unavailable (a
    database that went away or refuses writes): it is not confirmed to its platform,
    which sends it again, and the person gets no apology for it now."""


class InstanceLockedError(GatewayError):
    """Another `mnemo run` or `mnemo chat` holds the data directory's lock; the message
    names the directory."""


class AdapterFailedError(GatewayError):
    """A platform adapter failed to start or failed while running; the message names it."""


class RecallArgumentError(GatewayError):
    """A history search was asked with a bad query, date or limit; the message says which."""


class Translates(Protocol):
    """Anything that gives a catalog message in a person's language (`PersonLocale`)."""

    def _(self, message: str, **values: Any) -> str: ...


class _PersonLine:
    """For an error that carries the line a person gets: a catalog message id and its
    values. ``str()`` is the English line (with a detail for the log, if given),
    `line(locale)` the person's."""

    def __init__(self, message: str, detail: str = "", **values: Any) -> None:
        english = message.format(**values) if values else message
        super().__init__(f"{english} ({detail})" if detail else english)  # type: ignore[call-arg]  # the exception class after this mixin in the MRO
        self.message_id = message
        self.values = values
        self.detail = detail

    def line(self, locale: Translates) -> str:
        """The line in `locale`'s language (English when it is not a catalog message)."""
        return locale._(self.message_id, **self.values)


class ChoiceRefusedError(_PersonLine, GatewayError):
    """A picked choice is forged, replayed, expired, stale or offered to someone else;
    it carries the person's line."""


class AccessListError(_PersonLine, GatewayError):
    """The data directory's access list cannot be read or written, or a pairing code or
    person given to it is malformed, unknown, used or expired; the message is one line,
    which may be a catalog message (`line(locale)`)."""


class MediaError(_PersonLine, GatewayError):
    """A voice note, audio file or picture cannot be read; it carries the person's line,
    and for the log a `detail`."""


class MediaTooLargeError(MediaError):
    """The file is over ``media.max_bytes``, or a recording over ``media.max_seconds``."""


class MediaDownloadError(MediaError):
    """The platform could not give the file: gone, refused, cut off or timed out."""


class TranscriptionError(MediaError):
    """The transcription endpoint answered with an error, or with no text."""


class ImageUnreadableError(MediaError):
    """Pillow cannot open the picture, or it would decode to more pixels than allowed."""
