"""Planted-fact recall: a second check of session search, independent of LoCoMo.

A generated corpus (deterministic for a given `--seed`) of many people's chats,
one corpus in English and one in Chinese. Each person has `--sessions`
conversations of 10-30 turns. Every conversation is about one of eight
everyday topics (birthdays, a failed deploy, a trip, a doctor's visit, bills,
a new colleague, an appointment, a child's class) and states one fact of that
topic with its own details (who, names, numbers, places); the person's other
conversations on the same topic state the same kind of fact about someone or
something else, and every conversation carries topic chatter and small talk
that mentions the people, places and names of other facts. A question asks
for one fact, in other words than the text: other word forms, words that are
not in the text, another order; Chinese questions rarely have their words
adjacent in the text (the text says 我女儿的生日是…, the question 女儿生日是哪天).

Each question is asked through `search_sessions`, scoped to its person; it
counts at k when the session holding the fact is among the k sessions ranked
highest. Beside our ranking, in the same run:

- baseline: FTS5 `MATCH` of the question's words joined with OR over a plain
  `unicode61` index of the same messages, ranked by `bm25`, sessions ordered by
  their best message (as `bench/locomo_recall.py`); a Chinese question's runs
  are whole tokens there, as plain `unicode61` makes them;
- for Chinese also a bigram baseline: the same, over an index holding each CJK
  run as its overlapping bigrams, asked with the question's bigrams.

Last, the hand-written set of tests/memory_core/sessions/test_cjk_search.py
(26 natural Chinese, Japanese and Korean queries whose words are not adjacent
in the text, among the same person's sessions on the same topics): how many
find their session in the top 3, with the same rankings.

The generator was written without looking at our ranking's figures; no
constant of the ranking is to be tuned on it (it is a held-out check).

    python bench/planted_recall.py [--seed 1] [--people 50] [--sessions 40] [--questions 10]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import random
import re
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from machine import describe  # noqa: E402

from memory_core import make_user_key  # noqa: E402
from memory_core.sessions import SearchOptions, SearchScope, SessionDB, search_sessions  # noqa: E402
from tests.memory_core.sessions import test_cjk_search as handwritten  # noqa: E402

KS = (1, 3, 5, 10)
DAY = 86400.0


@dataclass(frozen=True)
class Topic:
    """One kind of fact: how it is stated, chatted about and asked, with its slot values."""

    facts: tuple[str, ...]
    chatter: tuple[str, ...]
    questions: tuple[str, ...]
    key: str  # the slot that tells this fact from the same topic's others
    slots: dict[str, tuple[str, ...]]


EN_TOPICS = (
    Topic(
        facts=(
            "My {rel}'s birthday is on {month} {day}, thinking of a dinner at {place}.",
            "Just remembered that my {rel} turns {age} on {month} {day}.",
            "We're celebrating my {rel}'s birthday on {month} {day} at {place}.",
        ),
        chatter=(
            "Birthday parties take so much planning.",
            "I never know what to buy as a birthday present.",
            "Need to order a cake for the party at some point.",
            "Last year's birthday dinner was way too loud.",
        ),
        questions=(
            "When is my {rel}'s birthday?",
            "what date does my {rel} celebrate their birthday",
            "gift ideas for {rel}, when was the birthday again",
            "{rel} birthday date",
        ),
        key="rel",
        slots={
            "rel": ("daughter", "son", "wife", "husband", "mom", "dad", "brother", "sister",
                    "grandma", "grandpa"),
            "month": ("January", "March", "May", "June", "August", "October", "November"),
            "day": tuple(str(d) for d in range(1, 29)),
            "place": ("Luigi's", "the Thai place", "home", "the rooftop bar", "the lake house"),
            "age": tuple(str(a) for a in (6, 9, 12, 30, 40, 65, 70)),
        },
    ),
    Topic(
        facts=(
            "Deployed the {svc} last night and the {fail} failed, so we rolled back.",
            "The {svc} release broke: the {fail} kept failing during the rollout.",
        ),
        chatter=(
            "Deploys on Fridays are always a bad idea.",
            "The CI pipeline is slow again today.",
            "We should add more monitoring before the next release.",
            "Rolling back took almost an hour.",
        ),
        questions=(
            "why did the {svc} deployment fail",
            "what broke when we rolled out the {svc}",
            "{svc} release failure cause",
            "what went wrong deploying {svc}?",
        ),
        key="svc",
        slots={
            "svc": ("billing service", "search API", "login page", "mobile app", "data pipeline",
                    "admin dashboard", "payment gateway", "notification worker",
                    "report generator", "profile service"),
            "fail": ("database migration", "health check", "certificate renewal",
                     "config reload", "cache warmup", "schema validation", "disk quota check"),
        },
    ),
    Topic(
        facts=(
            "Flying to {city} on the {day}th, booked a room at the {hotel}.",
            "For the {city} work trip we're staying at the {hotel}, checking in on the {day}th.",
        ),
        chatter=(
            "Packing is the worst part of travelling.",
            "I hope the flight isn't delayed this time.",
            "Business trips are tiring but the food is usually good.",
            "Need to check the baggage allowance.",
        ),
        questions=(
            "which hotel are we staying at in {city}",
            "where did I book for the {city} trip",
            "{city} travel accommodation",
            "hotel for the trip to {city}?",
        ),
        key="city",
        slots={
            "city": ("Lisbon", "Osaka", "Denver", "Nairobi", "Krakow", "Seattle", "Hanoi",
                     "Porto", "Calgary", "Tunis"),
            "hotel": ("Harbor View", "Grand Plaza", "Maple Inn", "Riverside Suites",
                      "Old Town Lodge", "Sunrise Hotel"),
            "day": tuple(str(d) for d in range(4, 29)),
        },
    ),
    Topic(
        facts=(
            "The doctor said my {part} is {finding} and I should {advice}.",
            "Saw the doctor about my {part}: {finding}, told me to {advice}.",
        ),
        chatter=(
            "Waiting rooms are always packed.",
            "I really need to exercise more.",
            "Health insurance paperwork is a nightmare.",
            "Trying to get to bed earlier this week.",
        ),
        questions=(
            "what did the doctor tell me about my {part}",
            "doctor's advice on {part}",
            "what should I do for my {part} according to the doctor",
            "{part} checkup results",
        ),
        key="part",
        slots={
            "part": ("knee", "back", "blood pressure", "cholesterol", "eyesight", "wrist",
                     "shoulder", "sleep", "stomach", "skin"),
            "finding": ("a bit high", "slightly inflamed", "not too bad", "getting worse"),
            "advice": ("cut down on salt", "do physiotherapy twice a week",
                       "stop running for a month", "take vitamin D", "come back in six weeks"),
        },
    ),
    Topic(
        facts=(
            "The {bill} is {amount} a month now, it went up in {month}.",
            "Paying {amount} monthly for the {bill} since {month}.",
        ),
        chatter=(
            "Everything is getting more expensive.",
            "I should make a proper budget spreadsheet.",
            "Saving money is harder than it looks.",
            "Checked the bank account, not great.",
        ),
        questions=(
            "how much do I pay for the {bill}",
            "monthly cost of {bill}",
            "{bill} price per month?",
            "what does the {bill} cost me",
        ),
        key="bill",
        slots={
            "bill": ("rent", "electricity bill", "internet plan", "gym membership", "phone plan",
                     "car insurance", "parking spot", "water bill", "streaming subscription",
                     "daycare"),
            "amount": tuple(f"${a}" for a in (35, 48, 60, 75, 120, 240, 890, 1450, 2100)),
            "month": ("January", "March", "May", "June", "August", "October", "November"),
        },
    ),
    Topic(
        facts=(
            "The new {role} on our team is called {name}, started on {weekday}.",
            "{name} joined us as the {role} this {weekday}.",
        ),
        chatter=(
            "The office is so noisy lately.",
            "Team meetings run way too long.",
            "We finally got new monitors at work.",
            "Lunch at the canteen was decent today.",
        ),
        questions=(
            "what's the name of the new {role}",
            "who joined as {role}",
            "new {role} colleague name",
            "who is our new {role}?",
        ),
        key="role",
        slots={
            "role": ("frontend developer", "designer", "accountant", "product manager",
                     "data analyst", "intern", "sales lead", "QA engineer", "recruiter",
                     "support agent"),
            "name": ("Priya", "Tomasz", "Chen Wei", "Fatima", "Lukas", "Aiko", "Mateo", "Olga",
                     "Kwame", "Sofia"),
            "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
        },
    ),
    Topic(
        facts=(
            "My {kind} appointment is on {weekday} at {time} at {place}.",
            "Booked the {kind} for {weekday}, {time}, over at {place}.",
        ),
        chatter=(
            "My calendar is a mess this month.",
            "I keep forgetting appointments.",
            "Need to set more reminders on my phone.",
            "Rescheduling things is so annoying.",
        ),
        questions=(
            "when is the {kind} appointment",
            "what time do I need to be at the {kind}",
            "{kind} booking time and place",
            "where is my {kind} appointment?",
        ),
        key="kind",
        slots={
            "kind": ("dentist", "haircut", "car service", "eye exam", "physiotherapy", "vet",
                     "tax advisor", "passport office", "bank", "piano lesson"),
            "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"),
            "time": ("9am", "10:30", "2pm", "4:15", "7pm"),
            "place": ("Main Street", "the mall", "near the station", "downtown",
                      "the clinic on Elm Road"),
        },
    ),
    Topic(
        facts=(
            "{child} started {cls} lessons with {teacher}, every {weekday} after school.",
            "The {cls} class is on {weekday}s now, {teacher} teaches it.",
        ),
        chatter=(
            "After-school activities are so expensive.",
            "Driving the kids around takes all afternoon.",
            "They want to quit everything after two weeks.",
            "The school newsletter came out today.",
        ),
        questions=(
            "which day is {cls}",
            "who teaches the {cls} lessons",
            "{cls} class schedule",
            "when are the {cls} classes?",
        ),
        key="cls",
        slots={
            "cls": ("guitar", "swimming", "pottery", "Spanish", "climbing", "chess", "painting",
                    "yoga", "coding club", "ballet"),
            "child": ("My son", "My daughter", "Our youngest", "My nephew"),
            "teacher": ("Ms. Rivera", "Mr. Okafor", "Mrs. Lindqvist", "Coach Brandt",
                        "Ms. Haddad"),
            "weekday": ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday"),
        },
    ),
)  # fmt: skip

EN_SMALL_TALK = (
    "haha yes",
    "ok sounds good",
    "I'm so tired today.",
    "Did you see the weather?",
    "Let me think about it.",
    "Thanks, that helps.",
    "Anyway, how are you?",
    "Coffee first, then work.",
    "My {rel} called me earlier.",
    "Thinking of visiting {city} someday.",
    "{name} sent me a funny video.",
    "Got it, I'll remember that.",
    "That sounds stressful, hope it works out.",
    "Noted. Anything else?",
    "Good idea to keep track of that.",
    "Let me know if you want a reminder.",
    "Took the {cls} gear out of the car finally.",
    "Walked past {place} on the way home.",
)

ZH_TOPICS = (
    Topic(
        facts=(
            "我{rel}的生日是{month}月{day}号，想在{place}吃顿饭。",
            "突然想起来{rel}{month}月{day}号过{age}岁生日。",
            "{month}月{day}号给我{rel}过生日，地点定在{place}。",
        ),
        chatter=("办生日派对真的太费心了。", "每次都不知道送什么生日礼物。",
                 "还得抽空订个蛋糕。", "去年的生日聚会太吵了。"),
        questions=("{rel}生日是哪天", "给{rel}买生日礼物，生日几号来着", "{rel}什么时候过生日",
                   "{rel}的生日日期"),
        key="rel",
        slots={
            "rel": ("女儿", "儿子", "老婆", "老公", "妈妈", "爸爸", "哥哥", "妹妹", "奶奶", "外公"),
            "month": tuple(str(m) for m in range(1, 13)),
            "day": tuple(str(d) for d in range(1, 29)),
            "place": ("海底捞", "家里", "楼下那家泰国菜", "江边的餐厅", "老地方"),
            "age": tuple(str(a) for a in (6, 9, 12, 30, 40, 65, 70)),
        },
    ),
    Topic(
        facts=("昨晚部署{svc}，结果{fail}失败了，只好回滚。",
               "{svc}上线出问题了，发布的时候{fail}一直失败。"),
        chatter=("周五发版真不是好主意。", "今天流水线又很慢。", "下次发布前得多加点监控。",
                 "回滚花了快一个小时。"),
        questions=("{svc}部署失败的原因", "部署{svc}出了什么问题", "{svc}发布为什么失败",
                   "{svc}上线哪里出错了"),
        key="svc",
        slots={
            "svc": ("支付服务", "搜索接口", "登录页面", "手机应用", "数据管道", "后台管理",
                    "网关", "消息推送", "报表系统", "用户中心"),
            "fail": ("数据库迁移", "健康检查", "证书更新", "配置加载", "缓存预热", "数据校验",
                     "磁盘配额检查"),
        },
    ),
    Topic(
        facts=("{day}号飞{city}，订了{hotel}的房间。", "去{city}出差住在{hotel}，{day}号入住。"),
        chatter=("收拾行李最烦了。", "希望这次航班别延误。", "出差很累，不过吃的一般不错。",
                 "得查一下行李额度。"),
        questions=("去{city}住哪个酒店", "{city}出差订的酒店", "{city}那次住哪里",
                   "到{city}的住宿"),
        key="city",
        slots={
            "city": ("杭州", "成都", "西安", "厦门", "青岛", "昆明", "大连", "苏州", "长沙",
                     "南京"),
            "hotel": ("海景酒店", "君悦酒店", "如家", "汉庭", "希尔顿", "全季酒店"),
            "day": tuple(str(d) for d in range(4, 29)),
        },
    ),
    Topic(
        facts=("医生说我的{part}{finding}，要{advice}。",
               "去看了{part}，医生说{finding}，让我{advice}。"),
        chatter=("医院候诊室总是人满为患。", "真得多锻炼了。", "医保报销手续太麻烦。",
                 "这周想早点睡。"),
        questions=("医生对我的{part}怎么说", "{part}检查结果", "医生让我{part}怎么办",
                   "{part}的医嘱"),
        key="part",
        slots={
            "part": ("膝盖", "腰", "血压", "胆固醇", "视力", "手腕", "肩膀", "睡眠", "胃", "皮肤"),
            "finding": ("有点高", "有点发炎", "问题不大", "越来越差"),
            "advice": ("少吃盐", "每周做两次理疗", "一个月别跑步", "补充维生素D", "六周后复查"),
        },
    ),
    Topic(
        facts=("{bill}现在每个月{amount}块，{month}月涨的。",
               "从{month}月开始{bill}每月交{amount}。"),
        chatter=("什么都在涨价。", "该好好做个预算表了。", "存钱比想象中难。",
                 "看了一下银行卡余额，不太乐观。"),
        questions=("{bill}一个月多少钱", "每月{bill}要交多少", "{bill}的费用", "我的{bill}多少钱"),
        key="bill",
        slots={
            "bill": ("房租", "电费", "宽带", "健身卡", "话费", "车险", "车位", "水费", "视频会员",
                     "托儿所"),
            "amount": tuple(str(a) for a in (35, 48, 60, 75, 120, 240, 890, 1450, 5200)),
            "month": tuple(str(m) for m in range(1, 13)),
        },
    ),
    Topic(
        facts=("我们组新来的{role}叫{name}，{weekday}入职的。",
               "{name}这{weekday}来我们组当{role}。"),
        chatter=("最近办公室好吵。", "组会开得太长了。", "公司终于换了新显示器。",
                 "今天食堂还不错。"),
        questions=("新来的{role}叫什么名字", "新{role}是谁", "组里新的{role}叫啥",
                   "哪个同事是新{role}"),
        key="role",
        slots={
            "role": ("前端", "设计师", "会计", "产品经理", "数据分析师", "实习生", "销售主管",
                     "测试工程师", "招聘专员", "客服"),
            "name": ("王磊", "李娜", "张伟", "刘洋", "陈静", "杨帆", "赵敏", "黄强", "周婷",
                     "吴昊"),
            "weekday": ("周一", "周二", "周三", "周四", "周五"),
        },
    ),
    Topic(
        facts=("{weekday}{time}约了{kind}，在{place}。",
               "{kind}预约在{weekday}{time}，地点是{place}。"),
        chatter=("这个月日程乱成一团。", "老是忘记预约。", "得在手机上多设几个提醒。",
                 "改时间太烦了。"),
        questions=("{kind}约的几点", "{kind}预约时间", "去{kind}是哪天", "{kind}在哪里"),
        key="kind",
        slots={
            "kind": ("牙医", "理发", "汽车保养", "眼科检查", "理疗", "宠物医院", "税务咨询",
                     "出入境", "银行", "钢琴课"),
            "weekday": ("周一", "周二", "周三", "周四", "周五", "周六"),
            "time": ("上午九点", "上午十点半", "下午两点", "下午四点", "晚上七点"),
            "place": ("人民路", "中山路", "火车站附近", "公司楼下", "市中心", "东门"),
        },
    ),
    Topic(
        facts=("{child}开始跟{teacher}学{cls}了，每{weekday}放学后上课。",
               "{cls}课改到{weekday}了，是{teacher}教。"),
        chatter=("课外班真贵。", "接送孩子一下午就没了。", "学了两周就想放弃。",
                 "今天学校发了通知。"),
        questions=("{cls}课是星期几", "谁教{cls}", "{cls}上课时间", "{cls}课哪天上"),
        key="cls",
        slots={
            "cls": ("吉他", "游泳", "陶艺", "西班牙语", "攀岩", "围棋", "画画", "瑜伽", "编程",
                    "芭蕾"),
            "child": ("儿子", "女儿", "小的那个", "外甥"),
            "teacher": ("刘老师", "陈老师", "王教练", "张老师", "孙老师"),
            "weekday": ("周一", "周二", "周三", "周四", "周五"),
        },
    ),
)  # fmt: skip

ZH_SMALL_TALK = (
    "哈哈是的",
    "好的没问题",
    "今天好累。",
    "你看天气预报了吗？",
    "我再想想。",
    "谢谢，有帮助。",
    "对了，你最近怎么样？",
    "先喝杯咖啡再干活。",
    "我{rel}刚才给我打电话了。",
    "以后想去{city}玩玩。",
    "{name}给我发了个搞笑视频。",
    "好的，我记住了。",
    "听起来压力挺大的，希望一切顺利。",
    "记下了，还有别的吗？",
    "记录一下是个好主意。",
    "需要的话我可以提醒你。",
    "终于把{cls}的东西从车里拿出来了。",
    "回家路上经过{place}。",
)


@dataclass(frozen=True)
class Question:
    user: str
    text: str
    session: str  # the external id of the session holding the answer


@dataclass(frozen=True)
class Language:
    name: str
    topics: tuple[Topic, ...]
    small_talk: tuple[str, ...]


LANGUAGES = (Language("en", EN_TOPICS, EN_SMALL_TALK), Language("zh", ZH_TOPICS, ZH_SMALL_TALK))


def slot_pools(topics: tuple[Topic, ...]) -> dict[str, tuple[str, ...]]:
    """Every value of every slot name across the topics (small talk draws from these)."""
    pools: dict[str, dict[str, None]] = {}
    for topic in topics:
        for name, values in topic.slots.items():
            pools.setdefault(name, {}).update(dict.fromkeys(values))
    return {name: tuple(values) for name, values in pools.items()}


class Generator:
    """One language's corpus: JSON Lines for the import, and the questions."""

    def __init__(self, language: Language, rng: random.Random, sessions: int) -> None:
        self.language = language
        self.rng = rng
        self.sessions = sessions
        self.pools = slot_pools(language.topics)
        self.lines: list[str] = []
        self.questions: list[Question] = []

    def person(self, number: int, asked: int) -> None:
        rng, topics = self.rng, self.language.topics
        user = make_user_key("planted", f"{self.language.name}{number}")
        order = [i % len(topics) for i in range(self.sessions)]
        rng.shuffle(order)
        keys = {
            t: rng.sample(topics[t].slots[topics[t].key], order.count(t))
            for t in sorted(set(order))
        }
        facts: list[tuple[Topic, dict[str, str]]] = []
        for session, t in enumerate(order):
            topic = topics[t]
            values = {name: rng.choice(pool) for name, pool in sorted(topic.slots.items())}
            values[topic.key] = keys[t].pop()
            self.session(user, session, topic, values)
            facts.append((topic, values))
        for session in sorted(rng.sample(range(self.sessions), asked)):
            topic, values = facts[session]
            text = rng.choice(topic.questions).format(**values)
            self.questions.append(Question(user, text, f"s{session}"))

    def session(self, user: str, number: int, topic: Topic, values: dict[str, str]) -> None:
        rng = self.rng
        turns = rng.randint(10, 30)
        fact_at = rng.randrange(0, turns, 2)  # a turn of the person's
        start = 1_700_000_000.0 + number * DAY + rng.randrange(8 * 3600, 20 * 3600)
        for turn in range(turns):
            if turn == fact_at:
                text = rng.choice(topic.facts).format(**values)
            elif rng.random() < 0.5:
                text = rng.choice(topic.chatter)
            else:
                text = rng.choice(self.language.small_talk)
                text = text.format(**{k: rng.choice(v) for k, v in sorted(self.pools.items())})
            record = {
                "session": f"s{number}", "user": user, "platform": "planted",
                "chat": f"{user}-chat", "chat_type": "private",
                "role": "user" if turn % 2 == 0 else "assistant",
                "content": text, "timestamp": start + 30 * turn,
            }  # fmt: skip
            self.lines.append(json.dumps(record, ensure_ascii=False, sort_keys=True))


def generate(language: Language, seed: int, people: int, sessions: int, asked: int) -> Generator:
    rng = random.Random(f"{seed}-{language.name}")
    generator = Generator(language, rng, sessions)
    for number in range(people):
        generator.person(number, asked)
    return generator


_CJK_RUN = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]+")


def bigrams(text: str) -> str:
    """Each CJK run as its overlapping bigrams (a one-character run as itself)."""
    return _CJK_RUN.sub(
        lambda m: " " + " ".join(m[0][i : i + 2] for i in range(max(1, len(m[0]) - 1))) + " ",
        text,
    )


def build_baselines(db: SessionDB) -> None:
    db.conn.create_function("bench_bigrams", 1, bigrams, deterministic=True)
    for table, value in (("baseline", "content"), ("bigrams", "bench_bigrams(content)")):
        db.conn.execute(
            f"CREATE VIRTUAL TABLE temp.{table} USING fts5(content, tokenize='unicode61')"
        )
        db.conn.execute(
            f"INSERT INTO temp.{table}(rowid, content) SELECT id, {value} FROM messages"
        )


def baseline_ranking(db: SessionDB, table: str, words: list[str], user: str) -> list[str]:
    """Sessions by their best message, plain FTS5 OR of `words` ranked by bm25."""
    if not words:
        return []
    expression = " OR ".join('"' + w.replace('"', '""') + '"' for w in dict.fromkeys(words))
    rows = db.conn.execute(
        f"SELECT s.external_id FROM temp.{table} b JOIN messages m ON m.id = b.rowid "
        "JOIN sessions s ON s.id = m.session_id "
        f"WHERE {table} MATCH ? AND s.user_key = ? ORDER BY bm25({table})",
        (expression, user),
    )
    ranked: list[str] = []
    for (external_id,) in rows:
        if external_id not in ranked:
            ranked.append(external_id)
            if len(ranked) >= max(KS):
                break
    return ranked


def our_ranking(db: SessionDB, question: Question) -> list[str]:
    options = SearchOptions(limit=max(KS))
    hits = search_sessions(db.conn, question.text, SearchScope(question.user), options)
    return [str(h.external_id) for h in hits]


Ranker = Callable[[SessionDB, Question], list[str]]


def rankers(language: str) -> dict[str, Ranker]:
    """Name -> function(db, question) -> ranked external ids."""

    def plain(db: SessionDB, q: Question) -> list[str]:
        return baseline_ranking(db, "baseline", re.findall(r"\w+", q.text), q.user)

    def bigram(db: SessionDB, q: Question) -> list[str]:
        return baseline_ranking(db, "bigrams", bigrams(q.text).split(), q.user)

    out: dict[str, Ranker] = {"ours": our_ranking, "baseline": plain}
    if language == "zh":
        out["baseline-bigrams"] = bigram
    return out


def recall(db: SessionDB, questions: list[Question], rank: Ranker) -> tuple[list[float], float]:
    """Recall at each of KS, and milliseconds per question."""
    found = [0] * len(KS)
    began = time.perf_counter()
    for question in questions:
        ranked = rank(db, question)
        for i, k in enumerate(KS):
            found[i] += question.session in ranked[:k]
    elapsed = (time.perf_counter() - began) * 1000 / max(1, len(questions))
    return [f / max(1, len(questions)) for f in found], elapsed


def handwritten_set() -> None:
    """The hand-written CJK set of tests/memory_core/sessions/test_cjk_search.py: top-3 share."""
    texts = [text for text, _ in handwritten.PLANTED] + handwritten.DISTRACTORS
    user = handwritten.ME.user_key
    questions = [Question(user, ask, f"s{i}") for i, (_, ask) in enumerate(handwritten.PLANTED)]
    with tempfile.TemporaryDirectory() as folder, SessionDB(Path(folder) / "state.db") as db:
        db.import_lines([line for i, t in enumerate(texts) for line in handwritten._jsonl(i, t)])
        build_baselines(db)
        for name, rank in rankers("zh").items():
            figures, _ = recall(db, questions, rank)
            share = figures[KS.index(3)]
            found = round(share * len(questions))
            print(f"  {name:17s} {found}/{len(questions)} in the top 3 ({share:.0%})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--people", type=int, default=50)
    parser.add_argument("--sessions", type=int, default=40, help="per person, at most 80")
    parser.add_argument("--questions", type=int, default=10, help="per person")
    args = parser.parse_args()
    if not 1 <= args.sessions <= 80 or not 1 <= args.questions <= args.sessions:
        parser.error("--sessions must be 1..80 and --questions 1..sessions")
    print(describe())
    digest = hashlib.sha256()
    print(f"seed {args.seed}: {args.people} people x {args.sessions} sessions of 10-30 turns, "
          f"{args.questions} questions per person, per language")  # fmt: skip
    print(f"{'lang':5s} {'ranking':17s} " + " ".join(f"{'@' + str(k):>6s}" for k in KS) + "  ms/q")
    for language in LANGUAGES:
        corpus = generate(language, args.seed, args.people, args.sessions, args.questions)
        digest.update("\n".join(corpus.lines).encode())
        digest.update(
            "\n".join(f"{q.user}\t{q.text}\t{q.session}" for q in corpus.questions).encode()
        )
        with tempfile.TemporaryDirectory() as folder, SessionDB(Path(folder) / "state.db") as db:
            db.import_lines(corpus.lines)
            build_baselines(db)
            for name, rank in rankers(language.name).items():
                figures, ms = recall(db, corpus.questions, rank)
                cells = " ".join(f"{f:6.3f}" for f in figures)
                print(f"{language.name:5s} {name:17s} {cells}  {ms:4.1f}", flush=True)
    print(f"corpus sha256 {digest.hexdigest()[:16]} (the same seed gives the same corpus)")
    print("hand-written natural CJK queries, words not adjacent in the text (zh, ja, ko):")
    handwritten_set()


if __name__ == "__main__":
    main()
