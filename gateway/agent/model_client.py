"""The one module that talks to the OpenAI-compatible model API.

Everything else in the gateway reaches the model through `ModelClient`, so the
`openai` package is imported here only (checked by the architecture test).
"""

from __future__ import annotations

from dataclasses import dataclass

import openai

from gateway.errors import GatewayError


class ModelError(GatewayError):
    """The model endpoint failed; `status` is the HTTP status when there was one."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


@dataclass(frozen=True)
class PingResult:
    ok: bool
    detail: str


class ModelClient:
    """A thin wrapper around `openai.AsyncOpenAI` for one endpoint."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None,
        model: str,
        timeout: float,
        max_retries: int = 2,
    ) -> None:
        self.model = model
        self._client = openai.AsyncOpenAI(
            base_url=base_url,
            # Local servers often need no key; the client insists on a value.
            api_key=api_key or "not-set",
            timeout=timeout,
            max_retries=max_retries,
        )

    async def ping(self) -> PingResult:
        """Ask the endpoint for its model list: does it answer, and accept us?"""
        try:
            page = await self._client.models.list()
        except openai.AuthenticationError as exc:
            return PingResult(False, f"answers but rejected the API key (HTTP {exc.status_code})")
        except openai.NotFoundError:
            return PingResult(True, "answers (no /models endpoint)")
        except openai.APIStatusError as exc:
            return PingResult(False, f"answered HTTP {exc.status_code}")
        except openai.APITimeoutError:
            return PingResult(False, "timed out")
        except openai.APIConnectionError as exc:
            return PingResult(False, f"unreachable ({exc.__cause__ or exc})")
        except openai.OpenAIError as exc:
            return PingResult(False, f"failed ({exc})")
        names = [m.id for m in page.data]
        if self.model in names:
            return PingResult(True, f"answers; model {self.model!r} is listed")
        return PingResult(True, f"answers; model {self.model!r} not in its list of {len(names)}")

    async def close(self) -> None:
        await self._client.close()
