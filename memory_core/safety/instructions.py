"""Why an entry reads as an instruction, not a fact, and must wait for the person's approval.

The scan (`scanner`) refuses what is plainly hostile. What is left can still be
a way in: a memory entry is read back into every prompt, so an entry that
carries a link, an e-mail address, a command or an order to the assistant can
steer the bot, or carry data out, even when it reads as harmless. Such an
entry is not written directly; it is staged, and the person sees the reasons
`instruction_reasons` gives. A person's own link or address is staged too: the
person approves it with one tap, and nothing planted gets in unseen.

The rules read the scan's views (see `normalise`): links, addresses, code and
the English, Spanish, German, French, Italian and Portuguese orders read
`latin`; Russian, Korean, Hindi and Arabic read `plain`; Chinese and Japanese
read `compact`. Every pattern is RE2, linear in the length of the text; base64
runs are decoded (bounded, as for the scan) and read again.

An order is told apart from a fact by its form: an imperative at the start of
a clause or after "you"/"please" ("Always add…", "you must…"), a condition on
other people ("when anyone asks…"), or a rule for every reply. "I always take
the train" and "I ignore spam calls" have a subject of their own and are facts.
"""

from __future__ import annotations

import functools

import memory_core.safety.decode as decode
from memory_core.safety.engine import Rule, View, compiled
from memory_core.safety.instruction_orders import ORDER_RULES
from memory_core.safety.instruction_words import CODE, EMAIL, LINK, ORDER
from memory_core.safety.normalise import views

_LABEL = r"[a-z0-9](?:[a-z0-9-]*[a-z0-9])?"
# Top-level domains a bare "name.tld" is read as a link for; ambiguous words
# ("in", "it", "no", "me", "to", "is") are left out so a missing space after a
# full stop is not a link. A name followed by a path ("evil.example/x") is a
# link whatever its ending.
_TLDS = (
    r"(?:com|net|org|io|ai|co|dev|app|xyz|info|biz|ly|gg|tv|cc|ws|site|online|top|link|"
    r"click|live|store|shop|tech|cloud|page|example|test|invalid|onion|ru|cn|uk|de|fr|es|"
    r"jp|kr|br|pt|nl|eu|ca|au|ch|se|pl|tk|ml|su|ir|tr|vn|ua|gov|edu|mil|int)"
)


def _r(pid: str, reason: str, pattern: str, view: View = "latin", case: bool = False) -> Rule:
    return Rule(pid, reason, view, pattern, case)


_LINK_RULES: tuple[Rule, ...] = (
    _r("url_scheme", LINK, r"\b[a-z][a-z0-9+.-]{0,30}://[^\s]"),
    _r("url_opaque_scheme", LINK, r"\b(?:mailto|javascript|data|file|tel|sms|magnet|ipfs):[^\s]"),
    _r("url_www", LINK, rf"\bwww\.{_LABEL}\."),
    _r("markdown_link", LINK, r"\]\s*\(\s*[^\s)]"),
    _r("markdown_reference", LINK, r"(?m)^\s*\[[^\]\n]{1,200}\]:\s*\S"),
    _r("domain_with_path", LINK, rf"\b{_LABEL}(?:\.{_LABEL})*\.[a-z]{{2,24}}(?::\d{{1,5}})?/"),
    _r(
        "bare_domain",
        LINK,
        rf"(?:^|[^@\w.-])(?i:{_LABEL}(?:\.{_LABEL})*)\.{_TLDS}\b(?:[^.\w]|\.\W|\.?$)",
        case=True,
    ),
    _r("ip_address", LINK, r"\b\d{1,3}(?:\.\d{1,3}){3}(?::\d{1,5}|/)"),
)

_EMAIL_RULES: tuple[Rule, ...] = (
    _r("email_address", EMAIL, r"[a-z0-9._%+-]+@[a-z0-9-]+(?:\.[a-z0-9-]+)*\.[a-z]{2,}"),
    _r(
        "email_spelled_out",
        EMAIL,
        r"\b[a-z0-9._-]+\s*[\[({<]\s*(?:at|@)\s*[\])}>]\s*[a-z0-9-]+\s*"
        r"(?:[\[({<]\s*dot\s*[\])}>]|\.)\s*[a-z]{2,}|"
        rf"\b[a-z0-9._-]+\s+at\s+[a-z0-9-]+\s+dot\s+{_TLDS}\b",
    ),
)

_SHELLS = r"(?:ba|z|k|c|tc|da|fi|a)?sh|python[0-9.]*|perl|ruby|node|php|iex|pwsh|powershell"
_CODE_RULES: tuple[Rule, ...] = (
    _r("fenced_code", CODE, r"```|~~~"),
    _r("inline_code", CODE, r"`[^`\n]+`"),
    _r("pipe_to_shell", CODE, rf"\|\s*(?:sudo\s+)?(?:/\S*/)?(?:{_SHELLS})\b"),
    _r(
        "download_command",
        CODE,
        r"\bwget\b|\bcurl\s+(?:-{1,2}[a-z]|['\"]?[a-z]+://|\S+\.[a-z]{2,}|\$|\S+/)",
    ),
    _r(
        "destructive_command",
        CODE,
        r"\brm\s+-[a-z]*[rf]|\bchmod\s+(?:[ugoa]*[+-][rwxs]+|[0-7]{3,4})\b|\bdd\s+if=|"
        r"\bmkfs\b|/dev/tcp/|\bnc\s+-[a-z]*[elv]|\bbase64\s+(?:-d|--decode)\b|"
        r":\(\)\s*\{|/bin/(?:ba|z)?sh\b|>\s*/dev/null|\bsudo\s+(?:-\S+\s+)*[a-z]+\s+-|"
        r"\bsudo\s+(?:apt|apt-get|rm|chmod|chown|bash|sh|su|curl|wget|systemctl|docker|"
        r"pip|npm|tee|kill|reboot|shutdown|mv|cp)\b|"
        r"(?:&&|;|\|\|)\s*(?:rm|curl|wget|bash|sh|sudo|chmod|python[0-9.]*|nc)\b|"
        r"\$\(\s*[a-z]|(?m)^\s*[$#]\s+[a-z][\w.-]*\s",
    ),
    _r(
        "powershell",
        CODE,
        r"\b(?:powershell|pwsh)(?:\.exe)?\b|\b(?:invoke-expression|invoke-webrequest|"
        r"invoke-restmethod|start-process|set-executionpolicy|downloadstring|downloadfile)\b|"
        r"\bnew-object\s+(?:system\.)?net\.webclient\b|-encodedcommand\b|\biex\s*\(",
    ),
    _r(
        "program_code",
        CODE,
        r"<\s*script\b|\b(?:eval|exec|system|popen|spawn)\s*\(|\bos\.(?:system|popen)\b|"
        r"\bsubprocess\.\w|__import__|\bimport\s+(?:os|sys|subprocess|socket|requests)\b|"
        r"\bfrom\s+[\w.]+\s+import\s+\w|\bdef\s+\w+\s*\(|\bfunction\s*\w*\s*\([^)]*\)\s*\{|"
        r"=>\s*\{|\bconsole\.log\s*\(|\bdocument\.(?:cookie|location|write)\b|"
        r"\bwindow\.location\b|\bfetch\s*\(\s*['\"`]|\bprint\s*\(|"
        r"(?-i:\b(?:SELECT\s+.{1,80}\s+FROM|DROP\s+TABLE|INSERT\s+INTO|DELETE\s+FROM)\b)",
    ),
)

_GROUPS: tuple[tuple[str, tuple[Rule, ...]], ...] = (
    (LINK, _LINK_RULES),
    (EMAIL, _EMAIL_RULES),
    (CODE, _CODE_RULES),
    (ORDER, ORDER_RULES),
)
_MAX_DEPTH = 1  # base64 inside base64 is for the scan; one decoding is enough here


def all_instruction_rules() -> tuple[Rule, ...]:
    """Every pattern `instruction_reasons` runs (for tests and benchmarks)."""
    return tuple(rule for _, rules in _GROUPS for rule in rules)


@functools.cache
def _reason_order() -> dict[str, int]:
    return {reason: i for i, (reason, _) in enumerate(_GROUPS)}


def _reasons(text: str, depth: int) -> set[str]:
    forms = views(text)
    found: set[str] = set()
    for reason, rules in _GROUPS:
        if any(compiled(rule).search(getattr(forms, rule.view)) for rule in rules):
            found.add(reason)
    if depth < _MAX_DEPTH and len(found) < len(_GROUPS):
        for hidden in decode.base64_texts(forms.text):
            found |= _reasons(hidden, depth + 1)
    return found


def instruction_reasons(text: str) -> tuple[str, ...]:
    """Why `text` must be staged for the person's approval; empty for a plain fact.

    Each reason is a short phrase for the person ("it contains a link"), at
    most one per kind, in a fixed order: link, e-mail address, code, order.
    """
    if not text.strip():
        return ()
    return tuple(sorted(_reasons(text, 0), key=_reason_order().__getitem__))
