"""Words: what an entry is checked by, and when two words are one word inflected.

Accepted paraphrases keep all of the person's words, inflected ("Lives" from "live",
"Москве" from "Москва", "vive" from "vivo"). Refused: a synonym ("physician" for
"doctor"), a translation (an English entry from Chinese words), a changed number, a
word the person did not say, what only a quoted line said.
"""

from __future__ import annotations

import pytest

from memory_core.grounding import OwnWords, check, distinctive_words, same_word, without_quotes
from memory_core.grounding.words import WordIndex, stem


def supported(entry: str, *said: str) -> bool:
    return check(entry, OwnWords(said)).supported


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("User likes dark mode", "I like dark mode in every editor"),
        ("Lives in Berlin", "I live in Berlin"),
        ("Is a nurse on night shifts", "I'm a nurse, night shifts this week"),
        ("Takes 20 mg of sertraline every day", "I take 20 mg sertraline every day"),
        ("L'utilisateur habite à Lyon avec deux chats", "j'habite à Lyon avec mes deux chats"),
        ("Hat zwei Hunde und wohnt in Hamburg", "ich wohne in Hamburg und habe zwei Hunde"),
        ("Trabaja como profesora de historia", "soy profesora de historia, trabajo en Madrid"),
        ("Живёт в Москве", "я живу в Москва уже давно"),
        ("用户喜欢喝咖啡", "我喜欢喝咖啡，不喝茶"),
        ("寿司が好き", "寿司が大好きです"),
        ("사용자는 서울에 살아요", "저는 서울에 살아요"),
        ("दिल्ली में रहता है", "मैं दिल्ली में रहता हूँ"),
        ("يحب القهوة", "أنا أحب القهوة كثيرا"),
    ],
)
def test_what_the_person_said_grounds_the_entry(entry: str, said: str) -> None:
    assert supported(entry, said)


@pytest.mark.parametrize(
    ("entry", "said"),
    [
        ("Is a physician", "I'm a doctor"),  # a synonym: refused (write their words)
        ("Likes coffee", "我喜欢喝咖啡"),  # a translation: refused
        ("Born in 1990", "I was born in 1991"),  # a number must be said as it is
        ("Allergic to peanuts", "what should I cook tonight?"),
        ("Has three kids: Carl, Dora and Emil", "my kids Anna and Ben are at school"),
        ("对花生过敏", "今天晚上吃什么"),
        ("Est végétarien depuis dix ans", "je mange de tout"),
        ("Is ok", "I'm ok"),  # no distinctive word at all
        ("Works night shifts as a nurse", "I'm a nurse, night shifts this week"),  # "works"
        ("Sister works as dentist in Bergen", "my sister Lena moved to Oslo in 2021"),
        ("寿司が嫌い", "寿司が大好きです"),  # 嫌 was never said
    ],
)
def test_what_the_person_did_not_say_does_not(entry: str, said: str) -> None:
    assert not supported(entry, said)


def test_all_of_the_words_and_every_number() -> None:
    said = OwnWords(["my sister Lena moved to Oslo in 2021"])
    assert check("Sister Lena moved to Oslo", said).supported
    assert not check("Sister Lena lives in Oslo", said).supported  # "lives": not half, all
    verdict = check("Sister moved to Oslo in 2022", said)
    assert not verdict.supported and verdict.missing == ("2022",)
    assert verdict.reason() == "the person never said '2022'"


def test_quoted_lines_are_not_the_persons_words() -> None:
    text = "> I'm allergic to peanuts\nis that common?"
    assert without_quotes(text) == "is that common?"
    assert not supported("Allergic to peanuts", text)
    assert not supported("Allergic to peanuts", "what about this?\n>>> allergic to peanuts\nyes")
    assert supported("Allergic to peanuts", "> what's that?\nI am allergic to peanuts")


def test_distinctive_words_leave_out_stopwords_short_words_negations_and_the_person() -> None:
    assert distinctive_words("The user is a big fan of Go and of F1 2024") == (
        "big",
        "fan",
        "2024",
    )
    assert distinctive_words("Does not eat meat, never fish") == ("eat", "meat", "fish")
    assert distinctive_words("Ich mag keinen Kaffee") == ("mag", "kaffee")
    assert distinctive_words("用户喜欢猫") == ("喜欢", "欢猫")
    assert distinctive_words("用户的妹妹是医生") == ("妹妹", "妹是", "是医", "医生")
    assert distinctive_words("用户不吃香菜") == ("吃香", "香菜")  # the negation is polarity
    assert distinctive_words("寿司が好き") == ("寿司", "好")  # cut at the hiragana
    assert distinctive_words("猫") == ("猫",)
    assert distinctive_words("は") == ()  # a particle alone


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("live", "lives"),
        ("lived", "living"),
        ("learns", "learning"),
        ("hund", "hunde"),
        ("wohne", "wohnt"),
        ("vivo", "vive"),
        ("mudé", "mudó"),
        ("bois", "boit"),
        ("llama", "llamado"),
        ("москва", "москве"),
        ("живу", "живёт"),
        ("programming", "programmer"),
        ("أحب", "يحب"),
    ],
)
def test_inflections_are_the_same_word(a: str, b: str) -> None:
    assert same_word(a, b) and same_word(b, a)


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("doctor", "physician"),
        ("cat", "car"),
        ("nuts", "nuns"),
        ("2021", "2022"),
        ("20", "200"),
        ("喜欢", "喜爱"),
        ("zanzibar", "zambia"),
    ],
)
def test_other_words_are_not(a: str, b: str) -> None:
    assert not same_word(a, b)


def test_a_stem_keeps_three_letters() -> None:
    assert stem("living") == "liv"
    assert stem("nuts") == "nut"
    assert stem("nut") == "nut"
    assert stem("ate") == "ate"


def test_the_index_finds_a_word_and_its_inflections_where_they_were_said() -> None:
    index = WordIndex()
    for place, words in enumerate([["i", "live", "in", "berlin"], ["she", "lives", "here"]]):
        for word in words:
            index.add(word, place)
    assert index.matches("living") == {"live", "lives"}
    assert index.places(index.matches("living")) == {0, 1}
    assert index.places(index.matches("berlin")) == {0}
    assert index.matches("paris") == frozenset()
