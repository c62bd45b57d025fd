"""Rules for injections written in Chinese, Japanese, Russian, Spanish, German and French.

Chinese and Japanese rules read the `compact` view (punctuation and spaces
gone, so "忽 略" is "忽略"); Russian reads `plain` (Cyrillic kept, accents
and "ё" folded); Spanish, German and French read `latin`, where accents are
gone, so the patterns are written without them ("precedentes", "ubersprin…").
RE2's `\\b` only knows ASCII words, so the Russian rules mark word starts with
`(?:^|[^\\pL])` instead.
"""

from __future__ import annotations

from memory_core.safety.engine import Rule, rules_on
from memory_core.safety.finding import EXFILTRATION, PROMPT_INJECTION, ROLE_HIJACK

_W = r"[\pL\pN'’-]+"
_S = r"[\s,:;\"'“”«»()-]+"


def _gap(n: int) -> str:
    return rf"{_S}(?:{_W}{_S}){{0,{n}}}"


_G3, _G6 = _gap(3), _gap(6)

_ZH_IGNORE = (
    r"(?:忽略|无视|無視|忽视|忽視|不要理会|不要理會|不理会|别管|跳过|抛开|拋開|放弃|"
    r"忘记|忘記|忘掉)"
)
_ZH_BEFORE = r"(?:之前|以前|先前|上面|以上|前面|此前|原来|原來|原有|所有|全部|一切|你的|的)"
_ZH_RULES = r"(?:指令|指示|规则|規則|说明|說明|提示|命令|设定|設定|要求|限制)"
_ZH_PROMPT = (
    r"(?:系统提示词|系统提示语|系统提示|系統提示|系统指令|系統指令|系统消息|"
    r"初始指令|隐藏指令|提示词)"
)
_ZH_SHOW = r"(?:输出|輸出|显示|顯示|告诉我|告訴我|打印|展示|透露|泄露|给我看|重复|说出|发给我)"
_JA_RULES = r"(?:指示|命令|ルール|指令|設定|プロンプト|制約)"
_JA_MODE = r"(?:開発者|デベロッパー|脱獄|ジェイルブレイク)モード"

_RU_START = r"(?:^|[^\pL])"
_RU_IGNORE = (
    r"(?:игнорируй|игнорируйте|проигнорируй|проигнорируйте|забудь|забудьте|отбрось|"
    r"пропусти|отмени|не\s+слушай|не\s+следуй|не\s+обращай(?:те)?\s+внимания\s+на)"
)
_RU_BEFORE = r"(?:предыдущ\pL*|прежн\pL*|ранее|вышеуказанн\pL*|все|вс\pL|свои|твои|системн\pL*)"
_RU_RULES = r"(?:инструкци\pL*|указани\pL*|правил\pL*|команд\pL*|директив\pL*|ограничени\pL*)"

_ES_VERBS = (
    r"(?:ignora|ignore|ignoren|olvida|olvide|olviden|descarta|omite|"
    r"haz\s+caso\s+omiso\s+(?:de|a)|no\s+hagas\s+caso\s+(?:de|a))"
)
_ES_RULES = r"(?:instrucciones|reglas|indicaciones|directrices|ordenes|normas)"
_ES_QUAL = (
    r"(?:anteriores|previas|previos|originales|iniciales|del\s+sistema|"
    r"que\s+te\s+(?:dieron|han\s+dado|di))"
)
_DE_VERBS = (
    r"(?:ignoriere|ignorier|ignorieren\s+sie|vergiss|vergessen\s+sie|missachte|"
    r"missachten\s+sie|uberspringe|verwirf|verwerfen\s+sie)"
)
_DE_QUAL = r"(?:vorherigen|bisherigen|fruheren|vorigen|obigen|alten|ursprunglichen|gegebenen)"
_DE_RULES = r"(?:anweisungen|regeln|instruktionen|befehle|vorgaben|richtlinien|anordnungen)"
_FR_VERBS = (
    r"(?:ignore|ignorez|oublie|oubliez|ne\s+tiens\s+pas\s+compte\s+des|"
    r"ne\s+tenez\s+pas\s+compte\s+des|fais\s+abstraction\s+des|neglige|negligez)"
)
_FR_RULES = r"(?:instructions|consignes|regles|directives|ordres)"
_FR_QUAL = r"(?:precedentes|anterieures|initiales|d['’]origine|du\s+systeme)"


_c = rules_on("compact")
_l = rules_on("latin")
_p = rules_on("plain")


RULES: tuple[Rule, ...] = (
    _c(
        "zh_ignore_instructions",
        PROMPT_INJECTION,
        rf"{_ZH_IGNORE}掉?你?{_ZH_BEFORE}+(?:所有|全部|一切)?的?{_ZH_RULES}|"
        r"(?:忘记|忘記|忘掉|忽略)你?(?:之前|以前)?(?:被告知|被告诉|听到|收到|告诉你)的?"
        r"(?:一切|所有|内容|指令|东西)",
    ),
    _c(
        "zh_reveal_system_prompt",
        ROLE_HIJACK,
        rf"{_ZH_SHOW}(?:一下)?你?的?(?:完整的?)?{_ZH_PROMPT}|"
        rf"{_ZH_PROMPT}(?:完整地?|全部|原文|内容)?(?:地)?{_ZH_SHOW}",
    ),
    _c(
        "zh_developer_mode",
        ROLE_HIJACK,
        r"(?:你现在|你現在|你是|进入|進入|开启|開啟|启用|切换到|处于|現在是|现在是).{0,6}"
        r"(?:开发者|開發者|开发人员|越狱|越獄|无限制)模式|你(?:现在|現在)?没有任何(?:限制|规则|约束)",
    ),
    _c(
        "ja_ignore_instructions",
        PROMPT_INJECTION,
        rf"(?:以前|前|これまで|今まで|上記|先ほど|前述|すべて|全て)の{_JA_RULES}"
        r"(?:は|を|も)?(?:すべて|全て|全部)?(?:無視|忘れ)",
    ),
    _c(
        "ja_reveal_system_prompt",
        ROLE_HIJACK,
        r"(?:システムプロンプト|初期指示|隠された指示|システムメッセージ)(?:の内容)?(?:を|は)?"
        r"(?:全部|すべて)?(?:表示|見せ|教え|出力|開示)",
    ),
    _c(
        "ja_developer_mode",
        ROLE_HIJACK,
        rf"(?:あなたは|今から|これから).{{0,12}}{_JA_MODE}|{_JA_MODE}(?:に|を)(?:切り替え|有効|入)",
    ),
    _p(
        "ru_ignore_instructions",
        PROMPT_INJECTION,
        rf"{_RU_START}{_RU_IGNORE}{_G3}{_RU_BEFORE}{_S}(?:{_W}{_S}){{0,2}}{_RU_RULES}|"
        rf"{_RU_START}(?:забудь|забудьте)\s+вс\pL*{_S}что\s+(?:тебе|вам)\s+(?:говорили|сказали|велели)",
    ),
    _p(
        "ru_reveal_system_prompt",
        ROLE_HIJACK,
        r"(?:^|[^\pL])(?:покажи|выведи|раскрой|напиши|расскажи|дай|отправь|повтори)(?:те)?"
        rf"{_G3}(?:системн\pL*\s+(?:промпт|подсказк|инструкци|сообщени)\pL*|"
        r"сво\pL*\s+(?:инструкци|правил|промпт)\pL*)",
    ),
    _p(
        "ru_developer_mode",
        ROLE_HIJACK,
        r"(?:^|[^\pL])(?:ты|вы)\s+(?:теперь\s+|сейчас\s+)?в\s+режиме\s+(?:разработчика|бога|"
        r"джейлбрейка|без\s+ограничений)|(?:включи|активируй|перейди\s+в)\s+режим\s+"
        r"(?:разработчика|бога|без\s+ограничений)",
    ),
    _l(
        "es_ignore_instructions",
        PROMPT_INJECTION,
        rf"\b{_ES_VERBS}{_G3}(?:todas\s+|todos\s+)?(?:las|los|tus|sus)\s+{_ES_RULES}\s+{_ES_QUAL}|"
        rf"\b{_ES_VERBS}\s+(?:todas\s+)?(?:tus|sus)\s+{_ES_RULES}\b|"
        r"\bolvida(?:\s+todo)?\s+lo\s+que\s+te\s+(?:dijeron|han\s+dicho|dije|ensenaron)",
    ),
    _l(
        "es_reveal_system_prompt",
        ROLE_HIJACK,
        rf"\b(?:muestrame|muestra|revela|dime|imprime|ensename|repite|escribe|dame)\b{_G3}"
        r"(?:tu|el|su)\s+(?:prompt|mensaje|instrucciones?)\s+(?:del\s+sistema|de\s+sistema|"
        r"iniciales|ocultas)",
    ),
    _l(
        "de_ignore_instructions",
        PROMPT_INJECTION,
        rf"\b{_DE_VERBS}{_G3}(?:(?:alle|deine|ihre|die|samtliche)\s+)?(?:{_W}\s+)?{_DE_QUAL}\s+"
        rf"{_DE_RULES}|\b(?:vergiss|vergessen\s+sie)\s+alles{_S}was\s+(?:dir|ihnen|man\s+dir)"
        rf"{_G3}(?:gesagt|befohlen|beigebracht|aufgetragen)",
    ),
    _l(
        "de_reveal_system_prompt",
        ROLE_HIJACK,
        rf"\b(?:zeig|zeige|gib|nenne|verrate|offenbare|drucke|wiederhole|schreib)\b{_G3}"
        r"(?:(?:deinen|deine|ihren|ihre)\s+(?:system-?prompt|systemanweisungen|system-?nachricht|"
        r"anweisungen|instruktionen)|den\s+system-?prompt)\b",
    ),
    _l(
        "fr_ignore_instructions",
        PROMPT_INJECTION,
        rf"\b{_FR_VERBS}\s+(?:toutes\s+)?(?:les|tes|vos)\s+{_FR_RULES}\s+{_FR_QUAL}|"
        r"\b(?:oublie|oubliez)\s+tout\s+ce\s+qu['’]?(?:on|ils?|elles?)\s+(?:t['’]a|vous\s+a)\s+dit",
    ),
    _l(
        "fr_reveal_system_prompt",
        ROLE_HIJACK,
        r"\b(?:affiche|montre|revele|donne|dis|imprime|repete|ecris)(?:[\s-]*moi)?\b"
        rf"{_G3}(?:ton|votre|le)\s+(?:prompt\s+(?:systeme|du\s+systeme|initial)|message\s+systeme|"
        r"instructions\s+(?:initiales|cachees|systeme))",
    ),
    _l(
        "send_env_file",
        EXFILTRATION,
        r"\b(?:envia|manda|muestra|envoie|affiche|montre|sende|schick|zeig|zeige)\b"
        r"[^\n]{0,60}\.env\b",
    ),
)
