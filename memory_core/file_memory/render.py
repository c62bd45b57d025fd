"""How file memory looks in a system prompt, and the frozen `MemorySnapshot`.

A block is a 46-character `═` rule, a header with the usage, another rule and
the entries joined by the `§` delimiter. An entry that fails the safety scan
(someone edited the file by hand) is shown as a placeholder naming the pattern
and a handle (`blocked:<hash>`) that the memory tool accepts as `old_text`, so
the entry can be removed without the text ever reaching the model. A file far
over its budget is cut to its head and tail.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

from memory_core.file_memory.entries import join_entries, usage
from memory_core.safety import scan

RULE = "═" * 46
MEMORY_TITLE = "MEMORY (shared notes)"
USER_TITLE = "USER PROFILE (who this user is)"
OVER_BUDGET_MARK = " ⚠ OVER BUDGET"
MAX_RENDERED_ENTRY = 65_536  # longer entries are blocked outright, unscanned
_HEAD_SHARE, _TAIL_SHARE = 0.7, 0.2
HANDLE_PREFIX = "blocked:"


@dataclass(frozen=True)
class MemorySnapshot:
    """The prompt blocks of one session, rendered once and never changed.

    `problems` lists files that could not be read (shown as a notice in their
    block), for the caller to log.
    """

    memory_block: str
    user_block: str
    problems: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        """Both blocks, non-empty ones only, separated by a blank line."""
        return "\n\n".join(block for block in (self.memory_block, self.user_block) if block)


def usage_label(chars: int, limit: int) -> str:
    """`67% — 1,474/2,200 chars`: percent floored and capped at 100."""
    percent = min(100, chars * 100 // limit) if limit > 0 else 100
    return f"{percent}% — {chars:,}/{limit:,} chars"


def header(title: str, chars: int, limit: int) -> str:
    mark = OVER_BUDGET_MARK if chars > limit else ""
    return f"{title} [{usage_label(chars, limit)}]{mark}"


def entry_handle(entry: str) -> str:
    """A short stable name for an entry, usable as `old_text` for a blocked one."""
    digest = hashlib.sha256(entry.encode("utf-8", "surrogatepass")).hexdigest()
    return HANDLE_PREFIX + digest[:10]


def blocked_reason(entry: str) -> str | None:
    """The pattern id that keeps `entry` out of a prompt, or None when it may be shown."""
    if len(entry) > MAX_RENDERED_ENTRY:
        return "oversized_entry"
    finding = scan(entry)
    return finding.pattern_id if finding else None


def safe_view(entry: str) -> str:
    """The entry itself, or a placeholder when it must not reach the model."""
    reason = blocked_reason(entry)
    if reason is None:
        return entry
    return (
        f"[BLOCKED: entry failed safety scan ({reason}); "
        f'remove it with the memory tool, old_text "{entry_handle(entry)}"]'
    )


def render_block(title: str, entries: Sequence[str], limit: int) -> str:
    """The prompt block for one file; empty when it has no entries."""
    if not entries:
        return ""
    body = _truncate(join_entries(safe_view(e) for e in entries), limit)
    return "\n".join((RULE, header(title, usage(entries), limit), RULE, body))


def render_unreadable(title: str, problem: str) -> str:
    """The block for a file that could not be read: a notice, never its bytes."""
    notice = f"[UNREADABLE: {problem}]"
    return "\n".join((RULE, f"{title} [unreadable]", RULE, notice))


def _truncate(body: str, limit: int) -> str:
    # Only a hand-edited file gets this large: the tool refuses growth past the
    # budget. Keep the head and tail so the block stays a bounded size.
    cap = max(2 * limit, 4000)
    if len(body) <= cap:
        return body
    head = body[: int(cap * _HEAD_SHARE)]
    tail = body[len(body) - int(cap * _TAIL_SHARE) :]
    cut = len(body) - len(head) - len(tail)
    return f"{head}\n[… {cut:,} chars truncated — memory over budget …]\n{tail}"
