"""Safety scan for text that will be read back into a system prompt.

Memory entries and skills end up in the model's prompt, so anything that reads
like an instruction to the model, a way to leak data, a foothold on the host
or a secret is refused before it is written, and blocked again when rendered.

`scan()` returns the first `Finding` (or None), `scan_all()` every one.
Invisible Unicode is checked on the raw text, because NFKC keeps zero-width
and bidi characters; the patterns then run on the NFKC form with those
characters removed, so "ign\u200bore" cannot slip past "ignore".

Categories: prompt_injection, role_hijack, exfiltration, credential_files,
persistence (SSH and agent configuration files), secret, invisible_unicode.
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass

from memory_core.errors import UnsafeContentError

PROMPT_INJECTION = "prompt_injection"
ROLE_HIJACK = "role_hijack"
EXFILTRATION = "exfiltration"
CREDENTIAL_FILES = "credential_files"
PERSISTENCE = "persistence"
SECRET = "secret"
INVISIBLE_UNICODE = "invisible_unicode"

_EXCERPT_CHARS = 80


@dataclass(frozen=True)
class Finding:
    """One pattern that matched: its id, its category and the matching text."""

    pattern_id: str
    category: str
    excerpt: str


# A gap of up to `n` filler words between trigger words. Words are separated by
# spaces and light punctuation only, so a match never runs across a sentence.
_SEP = r"[\s,:\"'“”‘’()*_`-]+"
_WORD = r"[\w'’/-]+(?:\.[\w'’/-]+)*"  # a dot only inside a word, never at its end


def _gap(n: int) -> str:
    return rf"{_SEP}(?:{_WORD}{_SEP}){{0,{n}}}?"


_G8, _G3 = _gap(8), _gap(3)

_OVERRIDE_VERBS = r"(?:ignore|disregard|forget|override|bypass|skip|drop|abandon)"
_QUALIFIERS = (
    r"(?:previous|prior|above|earlier|preceding|all|your|any|every|safety|system|"
    r"original|initial|developer|existing)"
)
_RULE_NOUNS = (
    r"(?:instructions?|directives?|guidelines?|rules|prompts?|constraints|guardrails|"
    r"programming|policies|restrictions)"
)
_LIMITS = (
    r"(?:restrictions|limitations|limits|filters?|filtering|rules|guidelines|censorship|guardrails)"
)
_SECRET_VAR = r"\$\{?\w*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH)\w*\}?"
_CRED_FILE = (
    r"(?:\.env(?:\.\w+)?|\.netrc|\.pgpass|\.npmrc|\.pypirc|\.git-credentials|"
    r"\.aws/credentials|\.docker/config\.json|credentials(?:\.json|\.ya?ml)?|"
    r"secrets?\.(?:json|ya?ml|toml)|id_(?:rsa|ed25519|ecdsa|dsa)|/etc/shadow)"
)
_READ_VERBS = (
    r"(?:cat|less|more|head|tail|bat|strings|base64|xxd|od|grep|cp|scp|rsync|"
    r"read|print|dump|upload|exfiltrate|open|source|type|show|display|output)"
)

# (pattern id, category, regex). Order matters: scan() reports the first hit.
_PATTERNS: tuple[tuple[str, str, str], ...] = (
    (
        "ignore_instructions",
        PROMPT_INJECTION,
        rf"\b{_OVERRIDE_VERBS}\b{_G8}{_QUALIFIERS}\b{_G3}{_RULE_NOUNS}\b",
    ),
    (
        "system_prompt_override",
        PROMPT_INJECTION,
        r"\b(?:system\s+prompt\s+(?:override|overwrite|replacement)|"
        r"(?:override|overwrite|replace)\s+(?:the\s+|your\s+)?system\s+prompt|"
        r"new\s+system\s+prompt)\b",
    ),
    (
        "no_restrictions",
        PROMPT_INJECTION,
        rf"\b(?:act|behave|operate|proceed)\b{_G8}(?:no|without|zero)\s+(?:any\s+)?{_LIMITS}\b",
    ),
    (
        "conceal_from_user",
        PROMPT_INJECTION,
        r"\b(?:do\s+not|don[’']?t|never|without)\s+(?:tell|telling|inform|informing|"
        r"notify|notifying|alert|alerting|mention\s+(?:this|it)\s+to|reveal\s+(?:this|it)\s+to)"
        r"\s+(?:the\s+)?user\b",
    ),
    (
        "from_now_on",
        PROMPT_INJECTION,
        rf"\bfrom\s+now\s+on\b{_G3}you\s+(?:must|will|shall|should|have\s+to)\b",
    ),
    ("hidden_html_comment", PROMPT_INJECTION, r"<!--"),
    (
        "hidden_html_style",
        PROMPT_INJECTION,
        r"<[^<>]{0,200}\bstyle\s*=\s*[\"']?[^<>]{0,200}(?:display\s*:\s*none|visibility\s*:\s*hidden|"
        r"font-size\s*:\s*0|opacity\s*:\s*0(?![.\d]*[1-9]))",
    ),
    (
        "you_are_now",
        ROLE_HIJACK,
        r"\byou\s*(?:are|[’']re)\s+(?:now|no\s+longer)\b",
    ),
    (
        "pretend_to_be",
        ROLE_HIJACK,
        r"\b(?:pretend|imagine|roleplay|role-play)\s+(?:that\s+)?you\s*(?:are|[’']re)\b|"
        r"\b(?:act|roleplay|role-play)\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|"
        r"uncensored|jailbroken|evil|DAN)\b|\b(?:jailbreak|DAN)\s+mode\b|\bdo\s+anything\s+now\b",
    ),
    (
        "reveal_system_prompt",
        ROLE_HIJACK,
        rf"\b(?:output|print|reveal|show|repeat|leak|dump|display|share|recite)\b{_G3}"
        r"(?:system\s+prompt|initial\s+instructions|hidden\s+instructions|"
        r"(?:your|the)\s+instructions\s+verbatim)\b",
    ),
    (
        "unfiltered_response",
        ROLE_HIJACK,
        rf"\b(?:respond|answer|reply|talk|speak|write|output)\b{_G3}"
        rf"(?:without|with\s+no)\s+(?:any\s+)?{_LIMITS}\b",
    ),
    (
        "curl_with_secret",
        EXFILTRATION,
        rf"\b(?:curl|wget|http|httpie|invoke-webrequest|iwr|nc|netcat)\b[^\n]{{0,300}}{_SECRET_VAR}",
    ),
    (
        "send_to_url",
        EXFILTRATION,
        rf"\b(?:send|post|upload|forward|transmit|exfiltrate|leak|beacon)\b{_G8}"
        r"to\s+(?:https?|ftp)://",
    ),
    (
        "dump_conversation",
        EXFILTRATION,
        rf"\b(?:output|print|send|dump|reveal|repeat|share|forward|leak|copy|post|upload)\b"
        rf"{_G3}(?:conversation|chat|message)\s+(?:history|logs?|transcripts?)\b",
    ),
    (
        "read_credential_file",
        CREDENTIAL_FILES,
        rf"\b{_READ_VERBS}\b{_G3}(?:-\S{{1,40}}\s+){{0,6}}[~\w./$-]{{0,200}}{_CRED_FILE}\b",
    ),
    (
        "credential_path",
        CREDENTIAL_FILES,
        r"(?:~|\$HOME|/root|/home/[\w.-]+)/(?:\.netrc|\.pgpass|\.git-credentials|"
        r"\.aws/credentials|\.docker/config\.json|\.config/gh/hosts\.ya?ml|"
        r"\.ssh/id_\w+)\b|/etc/(?:shadow|sudoers)\b",
    ),
    ("ssh_authorized_keys", PERSISTENCE, r"\bauthorized_keys2?\b"),
    ("ssh_dir", PERSISTENCE, r"(?:~|\$HOME|/root|/home/[\w.-]+)/\.ssh\b"),
    ("ssh_public_key", PERSISTENCE, r"\bssh-(?:rsa|ed25519|dss)\s+AAAA[0-9A-Za-z+/]{20,}"),
    (
        "agent_config_edit",
        PERSISTENCE,
        rf"\b(?:edit|modify|write|append|overwrite|change|update|add|insert)\b{_G3}"
        r"(?:[\w./~-]*/)?(?:AGENTS\.md|CLAUDE\.md|\.cursorrules|SOUL\.md|SKILL\.md|"
        r"mnemo\.ya?ml|\.mnemo/)",
    ),
    (
        "hardcoded_secret",
        SECRET,
        r"\b(?:api[_-]?key|apikey|access[_-]?key|secret(?:[_-]?key)?|auth[_-]?token|"
        r"token|password|passwd|client[_-]?secret)\b\s*[:=]\s*[\"']?[A-Za-z0-9_\-+/=.]{20,}",
    ),
    (
        "known_secret_format",
        SECRET,
        r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|ghp_[A-Za-z0-9]{30,}|"
        r"github_pat_\w{22,}|xox[baprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|"
        r"AIza[0-9A-Za-z_\-]{35}|glpat-[\w-]{20,}|\d{8,10}:AA[A-Za-z0-9_-]{33})\b|"
        r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY-----",
    ),
)


@functools.cache
def _compiled() -> tuple[tuple[str, str, re.Pattern[str]], ...]:
    # Compiled on first use, not at import time.
    return tuple((pid, cat, re.compile(rx, re.IGNORECASE)) for pid, cat, rx in _PATTERNS)


_ZERO_WIDTH = frozenset("\u200b\u200c\u200d\u2060\u2061\u2062\u2063\u2064\ufeff\u00ad")
_BIDI = frozenset("\u200e\u200f\u061c\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


def _is_tag(ch: str) -> bool:
    # Unicode tag characters can spell out hidden ASCII ("ASCII smuggling").
    return 0xE0000 <= ord(ch) <= 0xE007F


def _legit_joiner(text: str, i: int) -> bool:
    """ZWJ inside an emoji sequence, or ZWNJ between letters (Persian, Hindi…)."""
    before = text[i - 1] if i > 0 else ""
    after = text[i + 1] if i + 1 < len(text) else ""
    if not before or not after:
        return False
    if text[i] == "\u200d":
        emoji_before = unicodedata.category(before) in ("So", "Sk") or before == "\ufe0f"
        return emoji_before and unicodedata.category(after) == "So"
    if text[i] == "\u200c":
        return before.isalpha() and after.isalpha() and not (before.isascii() or after.isascii())
    return False


def _invisible_finding(text: str) -> Finding | None:
    for i, ch in enumerate(text):
        if ch in _BIDI:
            pid = "bidi_control"
        elif ch in _ZERO_WIDTH and not _legit_joiner(text, i):
            pid = "zero_width_char"
        elif _is_tag(ch):
            pid = "unicode_tag_char"
        else:
            continue
        return Finding(pid, INVISIBLE_UNICODE, f"U+{ord(ch):04X} at offset {i}")
    return None


def _visible_form(text: str) -> str:
    """NFKC with every invisible or format character removed, for pattern matching."""
    # Zero-width, bidi and tag characters are all in category Cf.
    kept = "".join(ch for ch in text if unicodedata.category(ch) != "Cf")
    return unicodedata.normalize("NFKC", kept)


def _excerpt(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= _EXCERPT_CHARS else flat[: _EXCERPT_CHARS - 1] + "…"


def _findings(text: str) -> Iterator[Finding]:
    invisible = _invisible_finding(text)
    if invisible is not None:
        yield invisible
    visible = _visible_form(text)
    for pid, category, regex in _compiled():
        match = regex.search(visible)
        if match:
            yield Finding(pid, category, _excerpt(match.group(0)))


def scan_all(text: str) -> list[Finding]:
    """Every finding in `text`: at most one invisible-Unicode finding, then one per pattern."""
    return list(_findings(text))


def scan(text: str) -> Finding | None:
    """The first finding in `text`, or None when it is clean."""
    return next(_findings(text), None)


def check(text: str) -> None:
    """Raise `UnsafeContentError` for the first finding in `text`."""
    finding = scan(text)
    if finding is not None:
        raise UnsafeContentError(finding)
