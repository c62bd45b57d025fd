"""The English rules: injection, role hijack, fake markup, exfiltration, host footholds.

Patterns are RE2 (no look-around, no back-references) and run case-insensitively
on the `latin` view, where look-alike letters are already plain ASCII; the
`compact_*` rules run on the `compact` view, where spaced-out letters have been
joined. Rules for other languages are in `languages`, secrets in `secrets`.
"""

from __future__ import annotations

from memory_core.safety.engine import Rule, rules_on
from memory_core.safety.finding import (
    CREDENTIAL_FILES,
    EXFILTRATION,
    FAKE_MARKUP,
    PERSISTENCE,
    PROMPT_INJECTION,
    ROLE_HIJACK,
)

# A gap of up to `n` filler words between trigger words. Words are separated by
# spaces and light punctuation only, so a match never runs across a sentence.
_SEP = r"[\s,:;\"'“”‘’()*_`~-]+"
_WORD = r"[\pL\pN'’/-]+(?:\.[\pL\pN'’/-]+)*"  # a dot only inside a word, never at its end


def _gap(n: int) -> str:
    return rf"{_SEP}(?:{_WORD}{_SEP}){{0,{n}}}"


_G3, _G4, _G6, _G8, _G16 = _gap(3), _gap(4), _gap(6), _gap(8), _gap(16)

_OVERRIDE_VERBS = (
    r"(?:ignore|disregard|forget|override|overrule|bypass|circumvent|skip|drop|abandon|"
    r"neglect|discard|dismiss|overlook|set\s+aside|put\s+aside|throw\s+out|"
    r"pay\s+no\s+attention\s+to|do\s+not\s+follow|don[’']?t\s+follow|stop\s+following)"
)
_QUALIFIERS = (
    r"(?:previous|prior|above|earlier|preceding|all|your|any|every|safety|system|"
    r"original|initial|developer|existing|given|old|current|default|configured)"
)
_RULE_NOUNS = (
    r"(?:instructions?|directives?|guidelines?|rules|prompts?|constraints|guardrails|"
    r"programming|policies|restrictions|orders|commands|safeguards|filters|training)"
)
_LIMITS = (
    r"(?:restrictions|limitations|limits|filters?|filtering|rules|guidelines|censorship|guardrails)"
)
_TOLD = r"(?:told|taught|instructed|given|programmed|configured|trained)"
_YOU_WERE = rf"you\s+(?:were|have\s+been|[’']ve\s+been|got)\s+{_TOLD}"
_SECRET_VAR = r"\$\{?\w*(?:KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASS|CREDENTIALS?|AUTH)\w*\}?"
_CRED_FILE = (
    r"(?:\.env(?:\.\w+)?|\.netrc|\.pgpass|\.npmrc|\.pypirc|\.git-credentials|"
    r"\.aws/credentials|\.docker/config\.json|credentials(?:\.json|\.ya?ml)?|"
    r"secrets?\.(?:json|ya?ml|toml)|id_(?:rsa|ed25519|ecdsa|dsa)|/etc/shadow)"
)
_READ_VERBS = (
    r"(?:cat|less|more|head|tail|bat|strings|base64|xxd|od|grep|cp|scp|rsync|"
    r"read|print|dump|upload|exfiltrate|open|source|type|show|display|output|send|paste|"
    r"envia|manda|muestra|lee|imprime|envoie|affiche|montre|lis|sende|schick|zeig|zeige|"
    r"lies)"
)
_REVEAL_VERBS = (
    r"(?:output|print|reveal|show|repeat|leak|dump|display|share|recite|tell|give|list|"
    r"paste|copy|disclose|expose|read\s+me|write\s+out|type\s+out|spell\s+out|"
    r"what\s+(?:is|are|were))"
)
_PROMPT_NOUNS = (
    r"(?:system\s+(?:prompt|message)|(?:initial|hidden|original|secret)\s+(?:instructions|prompt|rules)|"
    r"pre-?prompt|developer\s+(?:message|instructions)|your\s+(?:instructions|rules|guidelines)|"
    rf"the\s+(?:rules|instructions|guidelines)\s+{_YOU_WERE}|the\s+instructions\s+(?:verbatim|above))"
)
_ENV = r"(?:environment\s+variables?|env\s+vars?|(?:the\s+)?environment\s+(?:values|secrets))"
_TO_ME = r"(?:(?:in|into|with)\s+(?:your|the|this)\s+(?:reply|response|answer|chat|message)|to\s+me|me\b|https?://)"
_ENV_TOOLS = r"(?:printenv|os\.environ|process\.env|/proc/self/environ|\$env:|env\s*\|)"
_MODES = r"(?:developer|dev|god|jailbreak|jailbroken|dan|unrestricted|unfiltered|evil|sudo)"


_r = rules_on("latin")


INJECTION: tuple[Rule, ...] = (
    _r(
        "ignore_instructions",
        PROMPT_INJECTION,
        rf"\b{_OVERRIDE_VERBS}\b{_G16}{_QUALIFIERS}\b{_G4}{_RULE_NOUNS}\b",
    ),
    _r(
        "ignore_given_rules",
        PROMPT_INJECTION,
        rf"\b{_OVERRIDE_VERBS}\b{_G3}(?:the\s+)?(?:rules|instructions|guidelines|directives)"
        rf"\s+(?:that\s+)?(?:{_YOU_WERE}|you\s+were\s+configured\s+with)",
    ),
    _r(
        "forget_what_you_were_told",
        PROMPT_INJECTION,
        rf"\b(?:forget|ignore|disregard|discard)\b{_G4}(?:what|everything|anything|all(?:\s+that)?)"
        rf"\s+(?:{_YOU_WERE}|(?:that\s+)?(?:was|has\s+been)\s+said)",
    ),
    _r(
        "new_instructions",
        PROMPT_INJECTION,
        r"\b(?:new|updated|revised|real|actual|true)\s+(?:system\s+)?(?:instructions|directives|"
        r"orders|rules)\s*(?::|for\s+(?:the\s+|this\s+)?(?:assistant|ai|model|bot|llm))|"
        r"\b(?:these|here|following)\s+are\s+your\s+(?:new|real|updated)\s+(?:instructions|"
        r"directives|orders|rules)\b|\byour\s+new\s+(?:instructions|directives|orders|rules)\s+"
        r"(?:are|is)\b",
    ),
    _r(
        "disable_safety",
        PROMPT_INJECTION,
        r"\b(?:bypass|circumvent|disable|turn\s+off|switch\s+off|deactivate|evade|get\s+around)"
        rf"\b{_G3}(?:content\s+polic(?:y|ies)|safety\s+(?:filters?|guidelines|rules|polic(?:y|ies)|"
        r"measures|settings)|guardrails|moderation|censorship|content\s+filters?)\b",
    ),
    _r(
        "system_prompt_override",
        PROMPT_INJECTION,
        r"\b(?:system\s+prompt\s+(?:override|overwrite|replacement)|"
        r"(?:override|overwrite|replace)\s+(?:the\s+|your\s+)?system\s+prompt|"
        r"new\s+system\s+prompt)\b",
    ),
    _r(
        "no_restrictions",
        PROMPT_INJECTION,
        rf"\b(?:act|behave|operate|proceed)\b{_G8}(?:no|without|zero)\s+(?:any\s+)?{_LIMITS}\b",
    ),
    _r(
        "conceal_from_user",
        PROMPT_INJECTION,
        r"\b(?:do\s+not|don[’']?t|never|without)\s+(?:tell|telling|inform|informing|"
        r"notify|notifying|alert|alerting|mention\s+(?:this|it)\s+to|reveal\s+(?:this|it)\s+to)"
        r"\s+(?:the\s+)?user\b",
    ),
    _r(
        "from_now_on",
        PROMPT_INJECTION,
        rf"\bfrom\s+now\s+on\b{_G3}you\s+(?:must|will|shall|should|have\s+to)\b",
    ),
    _r("hidden_html_comment", PROMPT_INJECTION, r"<!--"),
    _r(
        "hidden_html_style",
        PROMPT_INJECTION,
        r"<[^<>]{0,200}\bstyle\s*=\s*[\"']?[^<>]{0,200}(?:display\s*:\s*none|"
        r"visibility\s*:\s*hidden|font-size\s*:\s*0|opacity\s*:\s*0+(?:\.0*)?(?:[^.\d]|$))",
    ),
)

ROLE: tuple[Rule, ...] = (
    _r("you_are_now", ROLE_HIJACK, r"\byou\s*(?:are|[’']re)\s+(?:now|no\s+longer)\b"),
    _r(
        "pretend_to_be",
        ROLE_HIJACK,
        r"\b(?:pretend|imagine|roleplay|role-play)\s+(?:that\s+)?you\s*(?:are|[’']re)\b|"
        r"\b(?:act|roleplay|role-play)\s+as\s+(?:an?\s+)?(?:unrestricted|unfiltered|"
        r"uncensored|jailbroken|evil|DAN)\b|\b(?:jailbreak|DAN)\s+mode\b|\bdo\s+anything\s+now\b|"
        r"\bact\s+as\s+my\s+(?:deceased|late|dead)\s+grand(?:mother|ma|father|pa)\b",
    ),
    _r(
        "developer_mode",
        ROLE_HIJACK,
        r"\b(?:enable|activate|enter|switch\s+(?:in)?to|turn\s+on|start|go\s+into|"
        rf"(?:you\s+are|you[’']re|you\s+will\s+be)(?:\s+now)?\s+in|now\s+in)\b{_G3}{_MODES}\s+mode\b|"
        rf"\b{_MODES}\s+mode\b{_G8}(?:ignores?|bypass(?:es)?|no\s+(?:rules|restrictions|limits|"
        r"filters)|without\s+(?:any\s+)?(?:rules|restrictions|limits|filters)|can\s+do\s+anything|"
        r"unrestricted)\b",
    ),
    _r(
        "reveal_system_prompt",
        ROLE_HIJACK,
        rf"\b{_REVEAL_VERBS}\b{_G4}(?:(?:your|the|my)\s+)?{_PROMPT_NOUNS}\b",
    ),
    _r(
        "repeat_text_above",
        ROLE_HIJACK,
        rf"\b(?:repeat|print|output|recite|copy|reproduce)\b{_G4}(?:text|words|everything|"
        r"messages?|content)\s+(?:above|before\s+this|preceding)\b|"
        r"\bstarting\s+with\s+[\"'“‘]?you\s+are\b",
    ),
    _r(
        "unfiltered_response",
        ROLE_HIJACK,
        rf"\b(?:respond|answer|reply|talk|speak|write|output)\b{_G3}"
        rf"(?:without|with\s+no)\s+(?:any\s+)?{_LIMITS}\b",
    ),
)

MARKUP: tuple[Rule, ...] = (
    _r("memory_context_tag", FAKE_MARKUP, r"<\s*/?\s*memory[-_\s]*context\b"),
    _r(
        "fake_system_note",
        FAKE_MARKUP,
        r"\[\s*(?:system|admin|administrator|developer|assistant|operator)\s+"
        r"(?:note|message|instruction|prompt|override|notice)s?\s*:",
    ),
    _r(
        "chat_template_token",
        FAKE_MARKUP,
        r"<\|\s*(?:im_start|im_end|im_sep|system|user|assistant|endoftext|begin_of_text|"
        r"start_header_id|end_header_id|eot_id)\s*\|>|\[/?INST\]|<<\s*/?SYS\s*>>|"
        r"<\s*/?\s*(?:system|developer)(?:[-_]?(?:prompt|message|instructions?))?\s*>",
    ),
    _r(
        "role_label_line",
        FAKE_MARKUP,
        r"(?m)^[\s>#*-]*(?:system|developer)(?:\s+(?:prompt|message|note|instructions?))?\s*:",
    ),
)

EXFIL: tuple[Rule, ...] = (
    _r(
        "curl_with_secret",
        EXFILTRATION,
        rf"\b(?:curl|wget|http|httpie|invoke-webrequest|iwr|nc|netcat)\b[^\n]{{0,300}}{_SECRET_VAR}",
    ),
    _r(
        "send_to_url",
        EXFILTRATION,
        rf"\b(?:send|post|upload|forward|transmit|exfiltrate|leak|beacon)\b{_G8}"
        r"to\s+(?:https?|ftp)://",
    ),
    _r(
        "dump_conversation",
        EXFILTRATION,
        r"\b(?:output|print|send|dump|reveal|repeat|share|forward|leak|copy|post|upload)\b"
        rf"{_G3}(?:conversation|chat|message)\s+(?:history|logs?|transcripts?)\b",
    ),
    _r(
        "environment_exfiltration",
        EXFILTRATION,
        rf"\b(?:print|show|list|dump|output|send|reveal|display|give|tell|echo|leak|paste|"
        rf"include|share|return)\b{_G4}(?:(?:all|every|each|the)\s+)?(?:(?:of\s+)?(?:the|your|"
        rf"my)\s+)?{_ENV}\b{_G8}{_TO_ME}|\b(?:send|give|tell|show)\s+me\b{_G4}{_ENV}\b|"
        rf"{_ENV_TOOLS}{_G8}(?:send|show|give|paste|post|include|reveal)\b{_G4}"
        r"(?:me|them|it|output|to)\b",
    ),
    _r(
        "secret_variable_request",
        EXFILTRATION,
        r"\b(?:send|echo|print|show|tell|reveal|give|leak|post|paste|output|include|dump)\b"
        rf"{_G6}(?:the\s+value\s+of\s+)?\$?\{{?(?-i:[A-Z][A-Z0-9_]*(?:KEY|TOKEN|SECRET|PASSWORD|"
        r"PASSWD|CREDENTIALS?))\b",
    ),
)

HOST: tuple[Rule, ...] = (
    _r(
        "read_credential_file",
        CREDENTIAL_FILES,
        rf"\b{_READ_VERBS}\b{_G6}(?:-\S{{1,40}}\s+){{0,6}}[~\w./$-]{{0,200}}{_CRED_FILE}\b",
    ),
    _r(
        "credential_path",
        CREDENTIAL_FILES,
        r"(?:~|\$HOME|/root|/home/[\w.-]+)/(?:\.netrc|\.pgpass|\.git-credentials|"
        r"\.aws/credentials|\.docker/config\.json|\.config/gh/hosts\.ya?ml|"
        r"\.ssh/id_\w+)\b|/etc/(?:shadow|sudoers)\b",
    ),
    _r("ssh_authorized_keys", PERSISTENCE, r"\bauthorized_keys2?\b"),
    _r("ssh_dir", PERSISTENCE, r"(?:~|\$HOME|/root|/home/[\w.-]+)/\.ssh\b"),
    _r("ssh_public_key", PERSISTENCE, r"\bssh-(?:rsa|ed25519|dss)\s+AAAA[0-9A-Za-z+/]{20,}"),
    _r(
        "agent_config_edit",
        PERSISTENCE,
        rf"\b(?:edit|modify|write|append|overwrite|change|update|add|insert)\b{_G3}"
        r"(?:[\w./~-]*/)?(?:AGENTS\.md|CLAUDE\.md|\.cursorrules|SOUL\.md|SKILL\.md|"
        r"mnemo\.ya?ml|\.mnemo/)",
    ),
)

# Phrases that still read as one after spaced-out letters are joined up.
COMPACT: tuple[Rule, ...] = (
    Rule(
        "compact_ignore_instructions",
        PROMPT_INJECTION,
        "compact",
        r"(?:ignore|disregard|forget|bypass|override|neglect)(?:all|the|your|any|every|of)*"
        r"(?:previous|prior|above|earlier|preceding|original|initial|system|safety)"
        r"(?:instructions?|directives?|guidelines?|rules|prompts?|commands)|"
        r"(?:ignore|disregard|forget|bypass)your(?:rules|instructions|guidelines|programming)",
    ),
    Rule(
        "compact_role_hijack",
        ROLE_HIJACK,
        "compact",
        r"youarenow(?:dan|unrestricted|unfiltered|jailbroken|indevelopermode)|"
        r"(?:reveal|print|show|output|leak|dump)(?:me)?(?:your|the)systemprompt|"
        r"developermodeenabled|jailbreakmode|danmode",
    ),
)
