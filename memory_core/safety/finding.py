"""What the scan reports: a `Finding`, and the category names it uses."""

from __future__ import annotations

from dataclasses import dataclass

PROMPT_INJECTION = "prompt_injection"
ROLE_HIJACK = "role_hijack"
EXFILTRATION = "exfiltration"
CREDENTIAL_FILES = "credential_files"
PERSISTENCE = "persistence"
REMOTE_CODE = "remote_code"
SECRET = "secret"
INVISIBLE_UNICODE = "invisible_unicode"
FAKE_MARKUP = "fake_markup"
OVERSIZED = "oversized"

EXCERPT_CHARS = 80


@dataclass(frozen=True)
class Finding:
    """One pattern that matched: its id, its category and the matching text."""

    pattern_id: str
    category: str
    excerpt: str


def excerpt(text: str) -> str:
    """`text` on one line, cut to `EXCERPT_CHARS` characters."""
    flat = " ".join(text.split())
    return flat if len(flat) <= EXCERPT_CHARS else flat[: EXCERPT_CHARS - 1] + "…"
