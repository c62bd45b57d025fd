"""Chinese and Japanese are searched by words: natural queries whose words are not adjacent.

A hand-written set: each question's answer is one session of a person who also
talked about the same topics elsewhere. The query words are rarely adjacent in
the text, and some are not in it at all (礼物 in 女儿生日礼物), as people ask.
Loaded both through the live write path (triggers) and through a bulk import.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from memory_core.scopes import SearchScope
from memory_core.sessions.db import SessionDB
from tests.memory_core.sessions.helpers import message, origin

ME = SearchScope("telegram-7")
REPLY = "好的，我记下了。"

# (what the person wrote, what they ask later)
PLANTED = [
    ("我女儿的生日是十月三号，想给她办个小派对", "女儿生日礼物"),
    ("昨天晚上部署新版本，数据库迁移失败了，只好回滚", "部署失败"),
    ("我们下周三去杭州出差，住在西湖边的酒店", "杭州出差住哪"),
    ("医生说我血压有点高，让我少吃盐多运动", "医生怎么说血压"),
    ("我的护照下个月就过期了，得去出入境办理换发", "护照过期"),
    ("猫最近不爱吃饭，今天带它去看了兽医", "猫生病看兽医"),
    ("面试安排在周五下午两点，在他们公司三楼会议室", "面试几点"),
    ("房租每个月五千二，房东说明年还要涨", "房租涨价"),
    ("我在学弹吉他，老师每周六上午上课", "吉他课哪天"),
    ("老婆怀孕了，预产期是明年三月", "预产期"),
    ("服务器的磁盘快满了，日志占了八十个G", "磁盘日志太大"),
    ("周末和朋友去爬了黄山，风景特别好", "黄山爬山"),
    ("我对花生过敏，吃了会起疹子", "花生过敏"),
    ("车子的保险下周到期，要记得续保", "车保险到期"),
    ("孩子的数学成绩退步了，想给他找个家教", "数学家教"),
    ("我们公司年会定在一月十八号，在酒店宴会厅", "年会日期"),
    ("我的笔记本电脑屏幕坏了，送去维修要一周", "电脑屏幕维修"),
    ("妈妈下个月要做白内障手术，我请了三天假", "妈妈手术请假"),
    ("新来的同事叫王磊，负责前端开发", "前端新同事叫什么"),
    ("这周的跑步计划：周二跑五公里，周四跑十公里", "跑步计划几公里"),
    ("签证材料里还缺半年的银行流水", "签证缺什么材料"),
    ("搬家公司约在二十号上午，三个工人加一辆货车", "搬家那天"),
    ("来週の月曜日に歯医者の予約を入れました", "歯医者の予約"),
    ("娘の誕生日は十月三日です", "娘の誕生日プレゼント"),
    ("新しいサーバーへのデータ移行が失敗しました", "サーバー移行失敗"),
    ("딸 생일이 시월 삼일이에요", "딸 생일 선물"),
]

# The same person on the same topics, in other conversations.
DISTRACTORS = [
    "我儿子的生日在五月，还没想好送什么礼物",
    "上周部署很顺利，没有出问题",
    "数据库备份失败了一次，后来手动补上了",
    "下个月去上海出差，住在公司附近",
    "体检报告说血糖正常，医生让我继续保持",
    "我的身份证丢了，要去派出所补办",
    "狗狗今天打了疫苗，有点没精神",
    "周五下午有个客户会议，在三楼",
    "水电费每个月三百左右，房东不管",
    "女儿在学钢琴，每周日上课",
    "服务器的CPU占用很高，查了半天",
    "去年和家人去过泰山，人特别多",
    "对海鲜过敏的人其实不少",
    "房子的保险已经买好了",
    "孩子英语考了九十分，进步很大",
    "部门聚餐定在周四晚上",
    "手机屏幕摔碎了，换了一块新的",
    "爸爸下周去医院复查",
    "新来的实习生叫李娜，做测试",
    "游泳计划：每周去两次",
    "护照照片要白底的",
    "公司年假有十五天",
    "来週の金曜日に美容院を予約した",
    "息子の誕生日は五月です",
    "サーバーの再起動は成功しました",
    "아들 생일은 오월이에요",
]


def _jsonl(index: int, text: str) -> list[str]:
    base = {"session": f"s{index}", "user": ME.user_key, "platform": "telegram", "chat": "c7",
            "chat_type": "private"}  # fmt: skip
    return [
        json.dumps({**base, "role": "user", "content": text, "timestamp": 1000 + index * 10}),
        json.dumps({**base, "role": "assistant", "content": REPLY, "timestamp": 1001 + index * 10}),
    ]


@pytest.fixture(scope="module", params=["live", "import"])
def loaded(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[SessionDB, dict[str, int]]]:
    """The person's history, written message by message or imported in bulk."""
    texts = [text for text, _ in PLANTED] + DISTRACTORS
    with SessionDB(tmp_path_factory.mktemp(request.param) / "state.db") as db:
        if request.param == "import":
            db.import_lines([line for i, text in enumerate(texts) for line in _jsonl(i, text)])
        else:
            for i, text in enumerate(texts):
                where = origin(ME.user_key, "c7", key=f"k{i}")
                first = db.append_message(origin=where, message=message(text, 1000.0 + i * 10))
                db.append_message(
                    origin=where, message=message(REPLY, 1001.0 + i * 10, "assistant")
                )
                db.end_session(first.session_id, "test")
        found = db.conn.execute(
            "SELECT m.content, s.root_id FROM messages m JOIN sessions s ON s.id = m.session_id "
            "WHERE m.role = 'user'"
        )
        yield db, dict(found.fetchall())


def test_every_natural_query_finds_its_session_in_the_top_3(
    loaded: tuple[SessionDB, dict[str, int]],
) -> None:
    db, session_of = loaded
    missed = []
    for text, query in PLANTED:
        top = [hit.session_id for hit in db.search(query, ME)[:3]]
        if session_of[text] not in top:
            missed.append(query)
    assert missed == []


@pytest.mark.parametrize(
    ("query", "text"),
    [
        ("猫", "猫最近不爱吃饭，今天带它去看了兽医"),
        ("兽医", "猫最近不爱吃饭，今天带它去看了兽医"),
        ("娘", "娘の誕生日は十月三日です"),
        ("딸", "딸 생일이 시월 삼일이에요"),
        ("预产", "老婆怀孕了，预产期是明年三月"),
        ("期", "老婆怀孕了，预产期是明年三月"),  # the last character of a bigram
    ],
)
def test_one_and_two_character_queries_find_their_messages(
    loaded: tuple[SessionDB, dict[str, int]], query: str, text: str
) -> None:
    db, session_of = loaded
    assert session_of[text] in [hit.session_id for hit in db.search(query, ME)]


def test_a_quoted_run_must_be_contiguous(loaded: tuple[SessionDB, dict[str, int]]) -> None:
    db, session_of = loaded
    assert db.search('"部署失败"', ME) == []  # the words are there, but apart
    hits = db.search('"迁移失败"', ME)
    assert [h.session_id for h in hits] == [session_of[PLANTED[1][0]]]
