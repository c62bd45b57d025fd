"""Secrets: detect-secrets' rule set, run through RE2, plus a few rules of ours.

The token formats come from the `detect-secrets` package (Yelp): every
regex-based plugin's deny-list (AWS, GitHub, GitLab, Slack, Stripe, JWT,
private keys, basic-auth URLs, Telegram, Discord, SendGrid…), so new formats
arrive with its updates. Its patterns are compiled with RE2 like ours; the
few that use look-around are rewritten to RE2 form first, and a pattern RE2
still refuses is skipped. Its public-IP plugin is left out (an address is not
a secret), and so is its keyword plugin, whose backtracking patterns are
written for source code: `password_statement` covers "the admin password is
hunter2!" in prose, in seven languages.

The high-entropy check is detect-secrets' Base64 one (its charset and its 4.5
bit limit) on runs of 24 or more characters that mix lower case, upper case
and digits, so ordinary words, hex hashes and UUIDs pass.
"""

from __future__ import annotations

import functools
import math
import re
from collections import Counter
from collections.abc import Iterator, Mapping

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.high_entropy_strings import Base64HighEntropyString

from memory_core.safety.engine import Match, Rule, compiled, compiles
from memory_core.safety.finding import SECRET
from memory_core.safety.normalise import Views

_SKIPPED_PLUGINS = frozenset({"IPPublicDetector"})
# (detect-secrets' form, RE2's form) for look-around RE2 lacks.
_REWRITES: tuple[tuple[str, str], ...] = (
    ("(?:(?<=\\W)|(?<=^))", "(?:^|\\W)"),
    ("(?!\\w)", "(?:\\W|$)"),
    (",1024}", ",1000}"),
)
_IGNORECASE = 2

_KEYWORDS = (
    r"(?:password|passwort|passcode|passphrase|pass\s*word|pwd|pw|pin(?:\s+code)?|"
    r"contrasena|clave|mot\s+de\s+passe|mdp|kennwort|senha|пароль|"
    r"root\s+password|admin\s+password)"
)
_OF = r"(?:\s+(?:for|of|to|on|at|du|de|del|de\s+la|fur|von|zum|zur|от|для|к)\s+[\pL\pN.@_-]+){0,3}"
_IS = r"(?:is|was|=|:|:=|ist|lautet|es|est|era|-|—)"
_CJK_KEYWORDS = r"(?:密码|密碼|口令|パスワード|暗証番号|비밀번호)"
_TOKEN = r"[\"'“‘«]?([^\s\"'”’»。、]{4,64})"
_ASCII_TOKEN = r"[\"'“‘«]?([\x21-\x7e]{4,64})"
# Things that follow "password is" but are not passwords.
_NOT_SECRETS = frozenset({"1password", "bitwarden", "keepass", "keepassxc", "lastpass"})

OWN: tuple[Rule, ...] = (
    Rule(
        "password_statement",
        SECRET,
        "latin",
        rf"(?:^|[^\pL\pN_]){_KEYWORDS}{_OF}\s*{_IS}\s*{_TOKEN}|"
        rf"{_CJK_KEYWORDS}\s*(?:是|为|為|:|：|は|=|는|은)\s*{_ASCII_TOKEN}",
    ),
    Rule(
        "hardcoded_secret",
        SECRET,
        "text",
        r"\b(?:api[_-]?key|apikey|access[_-]?key|secret(?:[_-]?key)?|auth[_-]?token|"
        r"token|password|passwd|client[_-]?secret)\b\s*[:=]\s*[\"']?[A-Za-z0-9_\-+/=.]{20,}",
    ),
    Rule(
        "known_secret_format",
        SECRET,
        "text",
        r"\b(?:sk-(?:proj-|ant-)?[A-Za-z0-9_-]{20,}|ghp_[A-Za-z0-9]{30,}|"
        r"github_pat_\w{22,}|xox[baprs]-[A-Za-z0-9-]{10,}|AKIA[0-9A-Z]{16}|"
        r"AIza[0-9A-Za-z_\-]{35}|glpat-[\w-]{20,}|\d{8,10}:AA[A-Za-z0-9_-]{33})\b|"
        r"-----BEGIN (?:RSA |EC |DSA |OPENSSH |ENCRYPTED )?PRIVATE KEY-----",
        case_sensitive=True,
    ),
)
_ENTROPY_RUN = Rule("high_entropy_string", SECRET, "text", r"[A-Za-z0-9+/=_-]{24,}")


@functools.cache
def detect_secrets_rules() -> tuple[Rule, ...]:
    """detect-secrets' regex plugins as RE2 rules, `detect_secrets_<plugin>` ids."""
    rules: list[Rule] = []
    plugins: Mapping[str, type[object]] = get_mapping_from_secret_type_to_class()
    for plugin in plugins.values():
        if not issubclass(plugin, RegexBasedDetector) or plugin.__name__ in _SKIPPED_PLUGINS:
            continue
        name = plugin.__name__.removesuffix("Detector").lower()
        denylist: tuple[re.Pattern[str], ...] = tuple(getattr(plugin, "denylist", ()))
        for regex in denylist:
            pattern = regex.pattern
            for before, after in _REWRITES:
                pattern = pattern.replace(before, after)
            if compiles(pattern):
                sensitive = not regex.flags & _IGNORECASE
                rules.append(Rule(f"detect_secrets_{name}", SECRET, "text", pattern, sensitive))
    return tuple(rules)


def _password_match(rule: Rule, forms: Views) -> Match | None:
    for found in compiled(rule).finditer(forms.latin):
        token = found.group(1) or found.group(2) or ""
        if _looks_like_password(token):
            return Match(rule, found.group(0))
    return None


def _looks_like_password(token: str) -> bool:
    """A word with a digit or a symbol in it, and not the name of a password manager."""
    cleaned = token.rstrip(".,;!?)")
    if cleaned.lower() in _NOT_SECRETS or len(cleaned) < 4:
        return False
    return any(not ch.isalpha() for ch in cleaned) or any(ch.isupper() for ch in cleaned[1:])


@functools.cache
def _entropy_limits() -> tuple[frozenset[str], float]:
    plugin = Base64HighEntropyString()
    return frozenset(plugin.charset), float(plugin.entropy_limit)


def _entropy(data: str) -> float:
    counts = Counter(data)
    return -sum(n / len(data) * math.log2(n / len(data)) for n in counts.values())


def _high_entropy(forms: Views) -> Match | None:
    charset, limit = _entropy_limits()
    for found in compiled(_ENTROPY_RUN).finditer(forms.text):
        run = found.group(0)
        mixed = any(c.islower() for c in run) and any(c.isupper() for c in run)
        varied = mixed and any(c.isdigit() for c in run)
        if varied and set(run) <= charset | {"_", "-"} and _entropy(run) > limit:
            return Match(_ENTROPY_RUN, run)
    return None


def secret_matches(forms: Views) -> Iterator[Match]:
    """Each secret rule that matches `forms`, ours first, then detect-secrets', then entropy."""
    for rule in OWN:
        if rule.pattern_id == "password_statement":
            match = _password_match(rule, forms)
        else:
            found = compiled(rule).search(getattr(forms, rule.view))
            match = Match(rule, found.group(0)) if found else None
        if match is not None:
            yield match
    for rule in detect_secrets_rules():
        found = compiled(rule).search(forms.text)
        if found is not None:
            yield Match(rule, found.group(0))
    entropy = _high_entropy(forms)
    if entropy is not None:
        yield entropy
