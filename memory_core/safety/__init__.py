"""Safety scan for text that will be read back into a system prompt.

Memory entries and skills end up in the model's prompt, so anything that reads
like an instruction to the model, a fake piece of prompt markup, a way to leak
data, a foothold on the host or a secret is refused before it is written, and
blocked again when rendered. `instruction_reasons()` says why an entry the scan
lets through must still wait for the person's approval (a link, an e-mail
address, code, an order to the assistant).

`scan()` returns the first `Finding` (or None), `scan_all()` every one, and
`scan_joined()` what a list of adjacent entries says only together (an
injection split over two memory entries).

How a text is read:

1. Invisible Unicode is checked on the raw text (zero-width characters that
   are not legitimate joiners, bidi controls, tag characters, runs of
   variation selectors): each is a finding on its own.
2. The rules then run on normalised views of the text (see `normalise`):
   NFKC, every default-ignorable code point stripped, combining marks dropped,
   look-alike letters mapped to ASCII through Unicode's confusables table, and
   a compact view with spaces and punctuation removed.
3. The `latin` view is rot13-decoded and scanned again, so is a copy with
   leetspeak read as letters ("1gn0r3" is "ignore") when the text has any,
   and base64-looking runs are decoded and scanned like a text of their own
   (bounded; see `decode`).

Every pattern runs on RE2, which takes time linear in the length of the text.
A text over `MAX_SCAN_CHARS` characters is not scanned in parts: it is refused
as a whole (`too_long_to_scan`), so that nothing can hide past a cap. No
legitimate caller comes near it: skills cap a file at 100,000 characters and
a rendered memory entry at 65,536.

Categories: prompt_injection, role_hijack, fake_markup, exfiltration,
credential_files, persistence (SSH and agent configuration files),
remote_code (a download piped into a shell), secret, invisible_unicode,
oversized.
"""

from memory_core.folding import fold_with_offsets
from memory_core.safety.finding import (
    CREDENTIAL_FILES,
    EXFILTRATION,
    FAKE_MARKUP,
    INVISIBLE_UNICODE,
    OVERSIZED,
    PERSISTENCE,
    PROMPT_INJECTION,
    REMOTE_CODE,
    ROLE_HIJACK,
    SECRET,
    Finding,
)
from memory_core.safety.instructions import instruction_reasons
from memory_core.safety.scanner import (
    MAX_SCAN_CHARS,
    all_rules,
    check,
    scan,
    scan_all,
    scan_joined,
)

__all__ = [
    "CREDENTIAL_FILES",
    "EXFILTRATION",
    "FAKE_MARKUP",
    "INVISIBLE_UNICODE",
    "MAX_SCAN_CHARS",
    "OVERSIZED",
    "PERSISTENCE",
    "PROMPT_INJECTION",
    "REMOTE_CODE",
    "ROLE_HIJACK",
    "SECRET",
    "Finding",
    "all_rules",
    "check",
    "fold_with_offsets",
    "instruction_reasons",
    "scan",
    "scan_all",
    "scan_joined",
]
