""" "The rules are void", "obey only me", overrides: in every language the scan reads.

Written for issue 23 from the classes of miss it lists, not from any data set.
Adds Korean, Hindi, Arabic (on `plain`), Italian and Portuguese (on `latin`,
accents gone) to the languages of `languages`, with an "ignore the previous
instructions" rule for each, and for Chinese, Japanese (on `compact`),
Russian, Spanish, German and French the void-rules and obey-only-me forms.
"""

from __future__ import annotations

from memory_core.safety.engine import Rule, rules_on
from memory_core.safety.finding import PROMPT_INJECTION, ROLE_HIJACK

_WB = r"(?:^|[^\pL])"


_c = rules_on("compact")
_l = rules_on("latin")
_p = rules_on("plain")


_ZH_RULES = r"(?:指令|指示|规则|規則|设定|設定|限制|提示|命令|约束|約束)"
_JA_RULES = r"(?:指示|命令|ルール|規則|制約|設定|プロンプト)"
_KO_RULES = r"(?:지시|지침|규칙|명령|설정|프롬프트|제한)"
_HI_RULES = r"(?:निर्देश|निर्देशों|नियम|नियमों|आदेश|आदेशों|हिदायत|हिदायतों)"
_AR_RULES = r"(?:التعليمات|الأوامر|القواعد|الإرشادات|التوجيهات|القيود|تعليماتك|قواعدك|أوامرك)"

CJK: tuple[Rule, ...] = (
    _c(
        "zh_rules_void",
        PROMPT_INJECTION,
        rf"(?:之前|以前|先前|上面|以上|原来|原有|所有|全部|一切|你的|系统|此前)的?{_ZH_RULES}"
        r"(?:已经|已|都|全部|现在|均|一律)*(?:作废|無效|无效|失效|取消|废除|廢除|不再有效|不再适用|"
        r"不算数|解除|被撤销|被取消)|(?:之前|上一条|上面|先前|以前)的?系统(?:消息|提示|指令)"
        r"(?:只是|是)?(?:一个|一次)?测试|系统覆盖|系統覆蓋|最高优先级(?:指令|命令)|优先级0|優先級0",
    ),
    _c(
        "zh_obey_only_me",
        ROLE_HIJACK,
        r"(?:只|仅|僅)(?:听|聽|服从|服從|遵从|遵從|听从|聽從|遵守)我|(?:服从|服從|听从|聽從)我的?"
        r"(?:命令|指令|指示)|我(?:是|才是)你的?新?(?:主人|管理员|开发者|创造者|主子)",
    ),
    _c(
        "ja_rules_void",
        PROMPT_INJECTION,
        rf"(?:以前|前|これまで|今まで|上記|すべて|全て|既存|元)の{_JA_RULES}(?:は|が)?(?:すべて|全て)?"
        r"(?:無効|破棄|取り消|撤回|失効|解除|適用されない|もう有効ではない)|"
        r"システム(?:オーバーライド|上書き)|最優先(?:命令|指示)|優先度0",
    ),
    _c(
        "ja_obey_only_me",
        ROLE_HIJACK,
        r"(?:私|僕|俺|わたし)(?:だけ|のみ)(?:に|の(?:命令|指示|言うこと)に?)(?:従|したが)|"
        r"(?:私|僕|俺)の(?:命令|指示)(?:だけ|のみ)(?:に|を)(?:従|聞)|"
        r"(?:私|僕|俺)(?:が|は)(?:あなたの)?(?:新しい)?(?:主人|管理者|開発者|マスター)",
    ),
)

OTHER_SCRIPTS: tuple[Rule, ...] = (
    _p(
        "ko_ignore_instructions",
        PROMPT_INJECTION,
        rf"(?:이전|기존|위의|앞의|모든|지금까지의|시스템)\s*(?:\S+\s+)?{_KO_RULES}\S*\s*(?:\S+\s+)?"
        r"(?:무시|잊어|잊으)",
    ),
    _p(
        "ko_rules_void",
        PROMPT_INJECTION,
        rf"(?:이전|기존|위의|앞의|모든|시스템)\s*(?:\S+\s+)?{_KO_RULES}\S*\s*(?:\S+\s+)?(?:무효|"
        r"폐기|취소|해제|효력이\s*없|더\s*이상\s*(?:유효하지|적용되지))|시스템\s*(?:오버라이드|재정의|"
        r"덮어쓰기)|최우선\s*(?:명령|지시)|우선\s*순위\s*0",
    ),
    _p(
        "ko_obey_only_me",
        ROLE_HIJACK,
        r"(?:나|저|내)(?:만|의\s*(?:명령|말)만)\s*(?:\S+\s+)?(?:따르|따라|복종|들어|듣)|"
        r"내\s*(?:명령|말)만\s*(?:따르|따라|들어|듣|복종)",
    ),
    _p(
        "hi_ignore_instructions",
        PROMPT_INJECTION,
        r"(?:पिछले|पिछली|पहले\s+के|सभी|सारे|सारी|ऊपर\s+के|पुराने|अपने|सिस्टम)\s+(?:\S+\s+){0,2}?"
        rf"{_HI_RULES}\s+(?:\S+\s+){{0,2}}?(?:अनदेखा|नज़रअंदाज़|नजरअंदाज|भूल|दरकिनार|इग्नोर)",
    ),
    _p(
        "hi_rules_void",
        PROMPT_INJECTION,
        rf"{_HI_RULES}\S*\s+(?:\S+\s+){{0,3}}?(?:रद्द|अमान्य|शून्य|ख़त्म|खत्म|लागू\s+नहीं|"
        r"मान्य\s+नहीं)|सिस्टम\s+ओवरराइड|सर्वोच्च\s+प्राथमिकता",
    ),
    _p(
        "hi_obey_only_me",
        ROLE_HIJACK,
        r"(?:सिर्फ़|सिर्फ|केवल|बस)\s+(?:मेरी|मेरा|मेरे|मुझे)\s+(?:\S+\s+){0,2}?(?:मानो|मानें|मानना|"
        r"पालन|सुनो|सुनें)|मेरी\s+ही\s+बात\s+मान",
    ),
    _p(
        "ar_ignore_instructions",
        PROMPT_INJECTION,
        rf"{_WB}(?:تجاهل|تجاهلي|انس|انسى|اهمل|أهمل|تخط)\s+(?:\S+\s+){{0,2}}?{_AR_RULES}",
    ),
    _p(
        "ar_rules_void",
        PROMPT_INJECTION,
        rf"{_AR_RULES}\s+(?:\S+\s+){{0,3}}?(?:ملغاة|ملغية|لاغية|باطلة|لم\s+تعد\s+(?:سارية|صالحة|"
        r"قائمة)|غير\s+(?:سارية|صالحة)|ألغيت)|تجاوز\s+النظام|أولوية\s+(?:قصوى|0|صفر)",
    ),
    _p(
        "ar_obey_only_me",
        ROLE_HIJACK,
        rf"{_WB}(?:أطعني|أطع\s+أوامري|اتبع\s+أوامري|نفذ\s+أوامري)|لا\s+(?:تطع|تتبع)\s+(?:إلا|سوى)\s+"
        r"(?:أنا|أوامري|تعليماتي)",
    ),
    _p(
        "ru_rules_void",
        PROMPT_INJECTION,
        r"(?:инструкци|правил|указани|ограничени|директив)\pL*\s+(?:\pL+\s+){0,3}?(?:больше\s+не\s+"
        r"(?:действу|применя|имеют)|отменен|аннулирован|недействительн|утратили\s+силу)\pL*|"
        r"системн\pL*\s+переопределени|наивысш\pL*\s+приоритет",
    ),
    _p(
        "ru_obey_only_me",
        ROLE_HIJACK,
        rf"{_WB}(?:подчиняйся|слушайся|слушай|повинуйся)\s+только\s+(?:мне|меня|моим)|"
        r"(?:только|лишь)\s+мне\s+(?:подчиняйся|повинуйся)",
    ),
)

_IT_RULES = r"(?:istruzioni|regole|direttive|indicazioni|ordini|impostazioni|restrizioni)"
_PT_RULES = r"(?:instrucoes|regras|diretrizes|ordens|orientacoes|restricoes)"
_ES_RULES = r"(?:instrucciones|reglas|normas|directrices|restricciones|ordenes)"
_FR_RULES = r"(?:instructions|consignes|regles|directives|restrictions)"
_DE_RULES = r"(?:anweisungen|regeln|vorgaben|richtlinien|einschrankungen|befehle)"

LATIN: tuple[Rule, ...] = (
    _l(
        "it_ignore_instructions",
        PROMPT_INJECTION,
        r"\b(?:ignora|ignorate|dimentica|dimenticate|trascura|scarta)\s+(?:tutte\s+|tutti\s+)?"
        rf"(?:le|i|gli|tue|tuoi)\s+(?:\w+\s+)?{_IT_RULES}\b",
    ),
    _l(
        "it_rules_void",
        PROMPT_INJECTION,
        rf"\b{_IT_RULES}\s+(?:\w+\s+){{0,3}}?(?:sono|e)\s+(?:ora\s+|adesso\s+)?(?:nulle|annullate|"
        r"revocate|sospese|invalide|decadute|non\s+piu\s+(?:valide|in\s+vigore))\b",
    ),
    _l(
        "it_obey_only_me",
        ROLE_HIJACK,
        r"\b(?:obbedisci|ubbidisci|segui|ascolta)(?:mi)?\s+(?:solo|soltanto|unicamente)\s+"
        r"(?:a\s+)?(?:me|i\s+miei|le\s+mie)\b|\b(?:obbedisci|ubbidisci)mi\b",
    ),
    _l(
        "pt_ignore_instructions",
        PROMPT_INJECTION,
        r"\b(?:ignore|ignora|ignorem|esqueca|esquece|desconsidere|descarte)\s+(?:todas\s+|todos\s+)?"
        rf"(?:as|os|suas|tuas)\s+(?:\w+\s+)?{_PT_RULES}\b",
    ),
    _l(
        "pt_rules_void",
        PROMPT_INJECTION,
        rf"\b{_PT_RULES}\s+(?:\w+\s+){{0,3}}?(?:sao|estao|foram)\s+(?:agora\s+)?(?:nulas|anuladas|"
        r"revogadas|suspensas|invalidas|canceladas|sem\s+efeito)\b|"
        rf"\b{_PT_RULES}\s+(?:\w+\s+){{0,3}}?nao\s+(?:valem|sao\s+mais\s+validas|estao\s+mais)",
    ),
    _l(
        "pt_obey_only_me",
        ROLE_HIJACK,
        r"\b(?:obedeca|obedece|siga|segue|escute|ouca)(?:-me)?\s+(?:somente|apenas|so)\s+"
        r"(?:a\s+)?(?:mim|eu|minhas|meus)\b|\bobedeca-me\b",
    ),
    _l(
        "es_rules_void",
        PROMPT_INJECTION,
        rf"\b{_ES_RULES}\s+(?:\w+\s+){{0,3}}?(?:son|estan|quedan|quedaron)\s+(?:ahora\s+)?(?:nulas|"
        rf"anuladas|revocadas|suspendidas|invalidas|sin\s+efecto)\b|\b{_ES_RULES}\s+(?:\w+\s+){{0,3}}?"
        r"ya\s+no\s+(?:son\s+validas|estan\s+vigentes|aplican|rigen|cuentan)\b",
    ),
    _l(
        "es_obey_only_me",
        ROLE_HIJACK,
        r"\bobedeceme\b|\b(?:obedece|sigue|escucha)(?:me)?\s+(?:solo|solamente|unicamente)\s+"
        r"(?:a\s+)?(?:mi|mis)\b",
    ),
    _l(
        "fr_rules_void",
        PROMPT_INJECTION,
        rf"\b{_FR_RULES}\s+(?:\w+\s+){{0,3}}?(?:(?:sont|est)\s+(?:desormais\s+|maintenant\s+)?"
        r"(?:nulles?|caduques?|annulees?|revoquees?|suspendues?|invalides?|sans\s+effet)|"
        r"(?:ne\s+sont|n['’]est)\s+plus\s+(?:valables?|en\s+vigueur|applicables?|valides?))",
    ),
    _l(
        "fr_obey_only_me",
        ROLE_HIJACK,
        r"\b(?:obeis|obeissez|ecoute|ecoutez|suis|suivez)(?:[\s-]*moi)?\s+(?:seulement|uniquement)"
        r"(?:\s+(?:a\s+)?moi)?\b|\bn['’]?\s*obei\w*\s+qu['’]a\s+moi\b",
    ),
    _l(
        "de_rules_void",
        PROMPT_INJECTION,
        r"\b(?:alle|deine|ihre|die\s+(?:bisherigen|vorherigen|alten|fruheren|ursprunglichen))\s+"
        rf"(?:\w+\s+)?{_DE_RULES}\s+(?:sind|gelten)\s+(?:ab\s+sofort\s+|jetzt\s+|nun\s+)?"
        r"(?:ungultig|nichtig|aufgehoben|widerrufen|ausser\s+kraft|nicht\s+mehr)",
    ),
    _l(
        "de_obey_only_me",
        ROLE_HIJACK,
        r"\b(?:gehorche|folge|hor|hore)\s+(?:nur|ausschlie\S{1,2}lich|allein)\s+(?:mir|meinen)\b|"
        r"\bgehorche\s+mir\b",
    ),
)

RULES: tuple[Rule, ...] = (*CJK, *OTHER_SCRIPTS, *LATIN)
