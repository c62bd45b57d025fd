"""Orders to the assistant, in each language the scan reads, for `instruction_reasons`.

An order is recognised by its form, never by a single word: an imperative at
the start of a clause or after "you"/"please", a condition on other people
("when anyone asks"), a rule for every reply, "from now on" followed by what
the assistant must do, "send … to" an address. A sentence with a subject of
its own ("I always take the train", "I ignore spam calls") is a fact. Views as
in the scan: `latin` for languages written in Latin letters, `plain` for
Russian, Korean, Hindi and Arabic, `compact` for Chinese and Japanese (where
punctuation and spaces are gone). RE2 throughout.
"""

from __future__ import annotations

from memory_core.safety.engine import Rule
from memory_core.safety.instruction_words import ORDER

_GAP = r"(?:[\s,]+[\w'’.-]+){0,6}"
_WB = r"(?:^|[^\pL])"  # a word start that RE2's ASCII-only \b cannot mark
_WE = r"(?:[^\pL]|$)"
_TARGET = r"(?:[\w.+-]+@|[a-z]+://|www\.|@\w)"

# English: where an imperative may start, and the verbs that address the assistant.
_START = (
    r"(?:^|[.!?;:\n>•*(\"“]\s*|-\s+|\b(?:you|please|pls|kindly|assistant|bot|ai|model)\b[\s,]*)"
)
_MODAL = r"(?:(?:must|should|shall|will|need\s+to|have\s+to|are\s+to)\s+)?"
_ADV = r"(?:(?:always|never|also|only|just|now|then|silently|quietly|secretly)\s+){0,2}"
_VERBS = (
    r"(?:add|append|prepend|include|insert|attach|embed|reply|respond|answer|say|tell|send|"
    r"forward|mention|recommend|suggest|promote|cc|bcc|obey|pretend|behave|refuse|leak|"
    r"reveal|translate|greet|redirect|act\s+as|(?:ignore|disregard|forget)\s+(?:all|any|every|"
    r"what|whatever|everything|anything|anyone|previous|prior|earlier|my|his|her|their|him|them|"
    r"your|the\s+(?:rules|instructions|user|person|system|above|previous|other))|"
    r"show\s+(?:me|them|the\s+user|"
    r"everyone|users)|follow\s+(?:my|these|only|the\s+following|new)|share\s+\S+\s+with|"
    r"(?:do\s+not|don[’']?t|never)\s+(?:tell|mention|reveal|say|reply|respond|answer|share|"
    r"disclose|inform|warn|show|let|ask))\s"
)
_OTHERS = (
    r"(?:anyone|anybody|someone|somebody|a\s+user|the\s+user|users|people|others|"
    r"another\s+user|a\s+person|someone\s+else|anyone\s+else|a\s+stranger)"
)
_REPLIES = r"(?:reply|replies|response|responses|answer|answers|output|outputs)"


def _l(pid: str, pattern: str) -> Rule:
    return Rule(pid, ORDER, "latin", pattern)


def _p(pid: str, pattern: str) -> Rule:
    return Rule(pid, ORDER, "plain", pattern)


def _c(pid: str, pattern: str) -> Rule:
    return Rule(pid, ORDER, "compact", pattern)


ENGLISH: tuple[Rule, ...] = (
    _l("en_imperative", rf"{_START}{_MODAL}{_ADV}{_VERBS}"),
    _l(
        "en_you_must",
        r"\b(?:you|the\s+(?:assistant|bot|ai|model))\s+(?:must|shall|have\s+to|need\s+to|are\s+to|"
        r"should\s+(?:always|never|now|only)|are\s+(?:required|supposed|instructed|expected|"
        r"not\s+allowed|never\s+allowed)\s+to|will\s+(?:now|always|never|from\s+now))\b",
    ),
    _l(
        "en_when_anyone_asks",
        rf"\b(?:when|whenever|if|once|each\s+time|every\s+time|any\s*time)\s+{_OTHERS}\s+"
        r"(?:\w+\s+){0,2}?(?:asks?|mentions?|says?|types?|writes?|requests?|wants?|brings?\s+up|"
        r"talks?|messages?|inquires?|enquires?)\b|\b(?:when(?:ever)?|if)\s+asked\b",
    ),
    _l(
        "en_from_now_on",
        r"\b(?:from\s+now\s+on|from\s+this\s+point(?:\s+on)?|going\s+forward|henceforth|"
        r"starting\s+(?:now|today)|in\s+future\s+(?:replies|answers|responses|conversations))\b"
        r"[\s,:]*(?:you|always|never|only|please|reply|respond|answer|add|include|say|send|tell|"
        r"ignore|do\s+not|don[’']?t|the\s+assistant|the\s+bot|every|all|each|treat|use|call|"
        r"speak|write|talk|end|start|begin|sign|obey)\b",
    ),
    _l(
        "en_every_reply",
        r"\b(?:in|to|into|at\s+the\s+(?:end|start|bottom|top|beginning)\s+of|under|below|after|"
        rf"before|with)\s+(?:every|each|all|any)\s+(?:(?:of\s+)?(?:your|the|future)\s+)?{_REPLIES}\b|"
        rf"\b(?:every|each|all)\s+(?:of\s+your\s+)?{_REPLIES}\s+(?:must|should|has\s+to|have\s+to|"
        r"needs?\s+to|will)\b|\b(?:send|forward|copy|cc|bcc|e-?mail|mail|relay)\b(?:\s+\w+){0,3}?"
        r"\s+(?:every|each|all|any)\s+(?:of\s+(?:your|the|my)\s+)?(?:reply|replies|response|"
        r"responses|answer|answers|conversation|conversations|chat|chats|message\s+you)\b",
    ),
    _l(
        "en_send_to_address",
        rf"\b(?:send|forward|e-?mail|mail|post|upload|copy|cc|bcc|relay|transmit|leak|report)\b"
        rf"{_GAP}\s+(?:to|with)\s+(?:{_TARGET}|this\s+(?:address|number|link|url|site|email|"
        r"e-mail|webhook)|the\s+(?:following|address|webhook|url|link|endpoint)\b|\+?\d[\d\s-]{6,})",
    ),
    _l(
        "en_obey",
        r"\bobey\s+(?:only|me|my|the\s+user|these|this|him|her|them)\b|"
        r"\b(?:only|exclusively)\s+(?:obey|follow|listen\s+to)\b|\bfollow\s+(?:only\s+)?(?:my|these|"
        r"the\s+following|new)\s+(?:instructions|orders|commands|rules)\b",
    ),
    _l(
        "en_reply_only",
        r"\b(?:reply|respond|answer|speak|talk)\s+(?:to\s+(?:me|everyone|everybody|all|users?)\s+)?"
        r"(?:only|exclusively|solely)\s+(?:in|with|using)\b",
    ),
)

ROMANCE_AND_GERMAN: tuple[Rule, ...] = (
    _l(
        "es_order",
        r"\b(?:cuando|si|cada\s+vez\s+que|siempre\s+que)\s+(?:alguien|cualquiera|cualquier\s+persona|"
        r"otra\s+persona|un\s+usuario|el\s+usuario|la\s+gente)\s+(?:te\s+)?(?:pregunte|pregunta|pida|"
        r"pide|mencione|menciona|diga|escriba|hable)\b|\bsiempre\s+(?:anade|agrega|incluye|responde|"
        r"contesta|di|menciona|termina|envia|manda|adjunta|recomienda)\b|"
        r"\b(?:a\s+partir\s+de\s+ahora|de\s+ahora\s+en\s+adelante|desde\s+ahora)\b[\s,]*(?:tu\s+|"
        r"siempre\s+|solo\s+|nunca\s+|no\s+)?(?:debes|responde|contesta|anade|agrega|incluye|di|envia|"
        r"manda|ignora|eres|vas\s+a|tienes\s+que|obedece)\b|"
        r"\b(?:responde|contesta|habla|escribe)(?:me)?\s+(?:solo|solamente|unicamente|exclusivamente)\b|"
        rf"\b(?:envia|manda|reenvia|envie|mande|reenvie)\b{_GAP}\s+a\s+(?:{_TARGET}|esta\s+direccion|"
        r"este\s+correo)|\b(?:debes|tienes\s+que)\s+(?:siempre\s+)?(?:responder|contestar|anadir|"
        r"agregar|incluir|decir|enviar|mandar|ignorar|obedecer|mencionar)\b|"
        r"(?:^|[.!?;:\n]\s*)(?:envia|manda|reenvia|anade|agrega|incluye|obedece)\s|"
        r"(?:^|[.!?;:\n]\s*)(?:ignora|olvida)\s+(?:todo|todas|todos|tus|lo\s+anterior|"
        r"las\s+(?:instrucciones|reglas|normas)|cualquier|lo\s+que|a\s)",
    ),
    _l(
        "it_order",
        r"\b(?:quando|se|ogni\s+volta\s+che)\s+(?:qualcuno|chiunque|un\s+utente|l['’]utente|"
        r"la\s+gente|altri)\s+(?:ti\s+)?(?:chiede|chieda|domanda|domandi|menziona|dice|scrive|parla)\b|"
        r"\bsempre\s+(?:aggiungi|includi|rispondi|menziona|invia|manda|allega|consiglia)\b|"
        r"\b(?:aggiungi|includi|rispondi|menziona|invia|manda|inoltra|allega)\s+sempre\b|"
        r"\b(?:d['’]\s*ora\s+in\s+(?:poi|avanti)|da\s+ora\s+in\s+poi|da\s+adesso(?:\s+in\s+poi)?|"
        r"a\s+partire\s+da\s+ora)\b[\s,]*(?:tu\s+|sempre\s+|solo\s+|non\s+)?(?:devi|rispondi|aggiungi|"
        r"includi|di|invia|manda|ignora|sei|obbedisci|scrivi)\b|"
        r"\b(?:rispondi|parla|scrivi)(?:mi)?\s+(?:solo|soltanto|unicamente|esclusivamente)\b|"
        rf"\b(?:invia|manda|inoltra|inviare|mandare|inoltrare)\b{_GAP}\s+a\s+(?:{_TARGET}|"
        r"questo\s+indirizzo)|\b(?:devi|dovrai)\s+(?:sempre\s+)?(?:rispondere|aggiungere|includere|"
        r"dire|inviare|mandare|ignorare|obbedire)\b|\bobbedisci\b|"
        r"(?:^|[.!?;:\n]\s*)(?:ignora|dimentica)\s+(?:tutte?|tutto|le|i|gli|ogni|qualsiasi)\b",
    ),
    _l(
        "pt_order",
        r"\b(?:quando|se|sempre\s+que|toda\s+vez\s+que)\s+(?:alguem|qualquer\s+pessoa|um\s+usuario|"
        r"o\s+usuario|um\s+utilizador|o\s+utilizador|as\s+pessoas|outra\s+pessoa)\s+(?:te\s+|lhe\s+)?"
        r"(?:perguntar|pergunta|pedir|pede|mencionar|menciona|disser|escrever|falar)\b|"
        r"\bsempre\s+(?:adicione|acrescente|inclua|responda|diga|mencione|envie|mande|anexe|"
        r"recomende)\b|\b(?:a\s+partir\s+de\s+agora|de\s+agora\s+em\s+diante|daqui\s+(?:em|para)\s+"
        r"(?:diante|frente))\b[\s,]*(?:voce\s+|tu\s+|sempre\s+|so\s+|nunca\s+|nao\s+)?(?:deve|"
        r"responda|adicione|inclua|diga|envie|mande|ignore|ignora|sera|vai|tem\s+que|obedeca)\b|"
        r"\b(?:responda|fale|escreva)\s+(?:apenas|somente|so|exclusivamente)\b|"
        rf"\b(?:envie|mande|encaminhe|envia|manda|encaminha)\b{_GAP}\s+(?:para|a)\s+(?:{_TARGET}|"
        r"este\s+endereco|este\s+e-?mail)|\b(?:voce|tu)\s+(?:deve|precisa|tem\s+que|devera)\s+"
        r"(?:sempre\s+)?(?:responder|adicionar|incluir|dizer|enviar|mandar|ignorar|obedecer)\b|"
        r"\bobedeca\b|(?:^|[.!?;:\n]\s*)(?:ignore|esqueca|esquece)\s+(?:todas?|todos?|tudo|as|os|"
        r"suas|tuas|qualquer|o\s+que)\b",
    ),
    _l(
        "fr_order",
        r"\b(?:quand|si|lorsque|lorsqu['’]|chaque\s+fois\s+que|des\s+que)\s*(?:quelqu['’]un|"
        r"qui\s+que\s+ce\s+soit|un\s+utilisateur|l['’]utilisateur|les\s+gens)\s+(?:te\s+|vous\s+)?"
        r"(?:demande|pose|parle|mentionne|dit|ecrit|evoque)\b|"
        r"\b(?:ajoute|ajoutez|inclus|incluez|reponds|repondez|dis|dites|mentionne|mentionnez|envoie|"
        r"envoyez|termine|terminez|signe|signez|recommande|recommandez)\s+toujours\b|"
        r"\b(?:a\s+partir\s+de\s+maintenant|desormais|dorenavant|a\s+l['’]avenir|des\s+maintenant)\b"
        r"[\s,]*(?:tu\s+|vous\s+)?(?:dois|devez|reponds|repondez|ajoute|ajoutez|inclus|dis|envoie|"
        r"ignore|ignorez|es|seras|vas|obeis|obeissez|ne\s+reponds)\b|"
        r"\b(?:reponds|repondez|parle|parlez|ecris|ecrivez)(?:[\s-]*moi)?\s+(?:uniquement|"
        r"seulement|exclusivement)\b|\bne\s+(?:reponds|repondez|parle|parlez)\s+qu['’]|"
        rf"\b(?:envoie|envoyez|transfere|transferez|transmets|transmettez)\b{_GAP}\s+(?:a|au|vers|"
        rf"sur)\s+(?:{_TARGET}|cette\s+adresse|ce\s+courriel)|\b(?:tu\s+dois|vous\s+devez)\s+"
        r"(?:toujours\s+|desormais\s+)?(?:repondre|ajouter|inclure|dire|envoyer|ignorer|obeir|"
        r"mentionner)\b|\b(?:obeis|obeissez)\b|"
        r"(?:^|[.!?;:\n]\s*)(?:ignore|ignorez|oublie|oubliez)\s+(?:tout|toutes|tous|les|tes|vos|ce|"
        r"cette|ces)\b",
    ),
    _l(
        "de_order",
        r"\b(?:wenn|falls|sobald|immer\s+wenn|jedes\s+mal\s+wenn)\s+(?:jemand|irgendjemand|"
        r"irgendwer|ein\s+nutzer|ein\s+benutzer|der\s+nutzer|der\s+benutzer|andere|leute)\s+"
        r"(?:\w+\s+){0,3}?(?:fragt|erwahnt|sagt|schreibt|wissen\s+will|anspricht)\b|"
        r"(?:^|[.!?;:\n]\s*|\bbitte\s+)(?:fuge|fug|antworte|sage|sag|nenne|erwahne|schicke|schick|"
        r"sende|empfiehl|hange|unterschreibe|ignoriere|vergiss|missachte|gehorche)\s|"
        r"\b(?:ab\s+jetzt|von\s+nun\s+an|ab\s+sofort|kunftig|zukunftig|ab\s+heute)\b[\s,]*"
        r"(?:musst\s+du|sollst\s+du|wirst\s+du|du\s+(?:musst|sollst|wirst)|antworte|fuge|sage|sag|"
        r"schicke|sende|ignoriere|immer|nur|gehorche|bist\s+du)\b|"
        r"\b(?:antworte|antwortet|sprich|schreib|schreibe)\s+(?:mir\s+)?(?:\w+\s+)?(?:nur|"
        r"ausschlie\S{1,2}lich)\b|"
        rf"\b(?:schicke|schick|sende|leite|senden|schicken)\b{_GAP}\s+(?:an|zu)\s+(?:{_TARGET}|"
        r"diese\s+adresse|folgende\s+adresse)|\bdu\s+(?:musst|sollst|hast\s+zu)\b|\bgehorche\b",
    ),
)

_RU_OTHERS = r"(?:кто-нибудь|кто-то|кто-либо|любой|пользователь|кто\s+угодно|люди|другие)"
_RU_SEND = r"(?:отправляй|отправь|перешли|пересылай|отправляйте|пришли|присылай)"
OTHER_SCRIPTS: tuple[Rule, ...] = (
    _p(
        "ru_order",
        rf"{_WB}(?:когда|если|каждый\s+раз\s+когда)\s+{_RU_OTHERS}\s+(?:\pL+\s+){{0,2}}?"
        r"(?:спросит|спрашивает|попросит|упомянет|скажет|напишет|заговорит)|"
        rf"{_WB}всегда\s+(?:добавляй|добавляйте|отвечай|отвечайте|пиши|пишите|включай|упоминай|"
        rf"прикрепляй|отправляй|говори|советуй|рекомендуй){_WE}|"
        rf"{_WB}(?:с\s+этого\s+момента|отныне|впредь|с\s+сегодняшнего\s+дня|теперь)[\s,]*"
        r"(?:ты\s+)?(?:должен|должна|будешь|отвечай|добавляй|пиши|говори|игнорируй|всегда\s+"
        rf"(?:отвечай|добавляй|пиши)|подчиняйся){_WE}|"
        rf"{_WB}(?:игнорируй|игнорируйте|проигнорируй|не\s+обращай\s+внимания|забудь|забудьте){_WE}|"
        rf"{_WB}(?:отвечай|отвечайте|пиши|говори)\s+(?:мне\s+)?только{_WE}|{_WB}{_RU_SEND}{_WE}|"
        rf"{_WB}(?:ты|вы)\s+(?:должен|должна|должны|обязан|обязана){_WE}|"
        rf"{_WB}(?:подчиняйся|слушайся\s+только|слушай\s+только){_WE}",
    ),
    _p(
        "ko_order",
        r"(?:누가|누군가|사용자가|다른\s*사람이|아무나)\s*(?:\S+\s+){0,2}?\S*(?:물어보면|물으면|"
        r"질문하면|묻는다면|요청하면|말하면)|(?:항상|언제나|반드시|매번|무조건)\s*(?:\S+\s+){0,3}?"
        r"\S*(?:세요|십시오|하라|해라|어라|아라|줘)(?:[^\pL]|$)|(?:지금부터|이제부터|앞으로는?|"
        r"오늘부터)\s*(?:너는|당신은|넌|항상|반드시|모든|무조건|오직)|(?:무시해|무시하세요|"
        r"무시하십시오|무시하라|잊어버려|잊어라|잊으세요)|(?:로만|으로만)\s*(?:답해|답하세요|대답해|"
        r"대답하세요|답변해|답변하세요|응답해|응답하세요)|(?:보내|전송해|전달해)(?:세요|줘|라|주세요|"
        r"십시오)|(?:너는|당신은|넌)\s*(?:\S+\s+){0,2}?\S*해야\s*(?:한다|합니다|해)|나만\s*따르|"
        r"내\s*말만\s*들어|나에게만\s*복종",
    ),
    _p(
        "hi_order",
        r"(?:जब|अगर|यदि)\s+(?:कोई|किसी\s+ने|उपयोगकर्ता|यूज़र|यूजर|दूसरे\s+लोग)\s+(?:\S+\s+){0,3}?"
        r"(?:पूछे|पूछता|पूछती|पूछेगा|पूछें|कहे|माँगे|मांगे)|(?:हमेशा|सदा|हर\s+बार)\s+(?:\S+\s+){0,4}?"
        r"(?:जोड़ो|जोड़ें|लिखो|लिखें|भेजो|भेजें|कहो|कहें|बताओ|बताएं|बताएँ|जवाब\s+दो|जवाब\s+दें|"
        r"उत्तर\s+दो|उत्तर\s+दें|शामिल\s+करो|शामिल\s+करें)|(?:अब\s+से|आज\s+से|आगे\s+से)\s+"
        r"(?:तुम|आप|हमेशा|सिर्फ़|सिर्फ|केवल|हर)|(?:अनदेखा|नज़रअंदाज़|नजरअंदाज|अनसुना)\s+"
        r"(?:करो|करें|कर\s+दो|कर\s+दें)|भूल\s+(?:जाओ|जाएं|जाइए)|(?:सिर्फ़|सिर्फ|केवल)\s+"
        r"(?:\S+\s+){0,3}?(?:जवाब|उत्तर)\s+(?:दो|दें|देना)|(?:को|पर)\s+(?:\S+\s+){0,2}?(?:भेजो|"
        r"भेजें|भेज\s+दो|भेज\s+दें|फॉरवर्ड\s+करो|फॉरवर्ड\s+करें)|(?:तुम्हें|आपको|तुमको)\s+"
        r"(?:\S+\s+){0,4}?(?:होगा|चाहिए|पड़ेगा)|(?:सिर्फ़|सिर्फ|केवल)\s+(?:मेरी|मेरा|मेरे)\s+"
        r"(?:बात|आदेश|हुक्म)",
    ),
    _p(
        "ar_order",
        r"(?:عندما|إذا|اذا|كلما|لو)\s+(?:\S+\s+){0,2}?(?:أحد|شخص|مستخدم|المستخدم|أي\s+شخص)\s+"
        r"(?:يسأل|سأل|يطلب|طلب|يذكر|ذكر)|(?:عندما|إذا|اذا|كلما|لو)\s+(?:سأل|يسأل|سألك|يسألك|طلب|"
        r"يطلب)\s+(?:أي\s+)?(?:أحد|شخص|مستخدم|المستخدم)|(?:دائما|دوما|في\s+كل\s+مرة)\s+"
        r"(?:\S+\s+){0,2}?(?:أضف|أرسل|أجب|رد|قل|اذكر|أرفق|ضع|اكتب|أدرج)(?:[^\pL]|$)|"
        r"(?:^|[^\pL])(?:أضف|أرسل|أجب|رد|قل|اذكر)\s+(?:\S+\s+){0,3}?دائما|(?:من\s+الآن(?:\s+فصاعدا)?|"
        r"بدءا\s+من\s+الآن|اعتبارا\s+من\s+الآن)[\s،,]*(?:أنت|يجب|عليك|دائما|أجب|رد|لا|أضف|أرسل|"
        r"فقط|تجاهل)|(?:^|[^\pL])(?:تجاهل|تجاهلي|تجاهلوا|انس|انسى)(?:[^\pL]|$)|(?:^|[^\pL])(?:أجب|"
        r"رد|تكلم|تحدث)\s+(?:\S+\s+){0,2}?(?:فقط|حصرا)|(?:^|[^\pL])(?:أرسل|حول|وجه)\s+(?:\S+\s+)"
        r"{0,4}?(?:إلى|الى)|يجب\s+عليك|عليك\s+أن|(?:أطعني|أطع\s+أوامري|لا\s+تطع\s+إلا|نفذ\s+أوامري)",
    ),
    _c(
        "zh_order",
        r"(?:当|如果|每当|若|只要|无论|要是)(?:有人|任何人|别人|其他人|用户|谁)\pL{0,4}?(?:问|询问|"
        r"提到|说起|提起|要求)|(?:^|你|请)(?:总是|始终|永远|一律|务必|每次都|一定要)要?(?:在(?:每|"
        r"所有|任何|回复|回答|结尾|末尾|开头)|添加|加上|附上|附加|回复|回答|提到|推荐|发送|告诉|包含|"
        r"加入|写上|转发)|(?:从现在起|从现在开始|从今以后|从此以后|从今天起)\pL{0,2}?(?:你|请|"
        r"必须|总是|始终|只|每次|一律|所有|每条|忽略|回复|回答|不要|永远|都要)|(?:今后|以后)(?:你|"
        r"请你|必须|一律|每次回复|所有回复)|(?:忽略|无视|不要理会|不理会|忘记|忘掉)掉?(?:所有|一切|"
        r"以上|之前|以前|上面|其他|别的|任何|系统|原来|原有|你的|前面)|(?:^|你|请)(?:只|"
        r"仅|只能)(?:用\pL{1,4})?(?:回复|回答|答复)|(?:把|将)(?:所有|每|全部|你的|这些|用户|"
        r"我们的)?\pL{0,6}?(?:回复|回答|对话|聊天|消息|记录|内容|信息|数据|密码)\pL{0,10}?(?:发送|"
        r"发|转发|抄送|传|上传)(?:到|给|至)|你(?:必须|应该|需要|一定要|得|只能)|(?:只|仅)(?:听|"
        r"服从|遵守)我|服从我|听我的命令",
    ),
    _c(
        "ja_order",
        r"(?:誰か|だれか|ユーザー|他の人|誰)(?:が|から|に)?\pL{0,8}?(?:聞いたら|尋ねたら|質問したら|"
        r"言ったら|頼んだら)|(?:聞かれたら|尋ねられたら|質問されたら)|(?:常に|いつも|必ず|毎回|"
        r"絶対)\pL{0,16}?(?:てください|て下さい|てくれ|なさい|すること|しろ|せよ)|(?:今後|"
        r"これから|今から|以後|この先)は?(?:あなた|常に|必ず|すべて|全て|毎回|返信|回答|無視)|"
        r"無視(?:して(?:ください|下さい)|しろ|せよ|しなさい)|(?:指示|ルール|命令|以前|上記|すべて|"
        r"全て)\pL{0,4}?無視|(?:だけ|のみ)で?(?:返信|回答|返答|答え)(?:して|しろ|せよ|すること|"
        r"なさい)|(?:に|へ)(?:送|送信し|転送し|メールし)(?:て(?:ください|下さい|くれ)|なさい|ろ)|"
        r"あなたは\pL{0,12}?(?:なければならない|なければなりません|なくてはならない|べき)|"
        r"(?:私|僕|俺)(?:だけ|のみ)(?:に|の)(?:従|命令)",
    ),
)

ORDER_RULES: tuple[Rule, ...] = (*ENGLISH, *ROMANCE_AND_GERMAN, *OTHER_SCRIPTS)
