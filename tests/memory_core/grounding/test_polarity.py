"""Polarity and mood: a clause that negates, asks, or speaks of someone else does not
ground an entry about the person; the plain statement does.

The property test builds statements from generated words in each language and checks
that every negated or questioned form of them (negation or question before or after)
never grounds the entry the plain statement grounds.
"""

from __future__ import annotations

import string

import pytest
from hypothesis import assume, given
from hypothesis import strategies as st

from memory_core.grounding import OwnWords, check
from memory_core.grounding.clauses import clauses
from memory_core.grounding.polarity import (
    ASKING,
    COMPANION,
    NEGATION,
    NEGATION_PHRASES,
    PRONOUNS,
    SUPPOSING,
    THIRD_PARTY,
)
from memory_core.grounding.words import IGNORED

# (plain statement, its entry, negated forms, questioned forms); {x} is the generated word.
FORMS: dict[str, tuple[str, str, tuple[str, ...], tuple[str, ...]]] = {
    "en": (
        "I live in {x}",
        "Lives in {x}",
        ("I do not live in {x}", "I don't live in {x}", "I never lived in {x}",
         "I live in {x}, not really", "I live in {x}? no way", "me? living in {x}? never"),
        ("do I live in {x}?", "I live in {x}?", "guess if I live in {x}",
         "guess which city I live in: {x}, maybe?", "if I lived in {x} I'd be happy"),
    ),
    "es": (
        "vivo en {x}",
        "Vive en {x}",
        ("no vivo en {x}", "nunca he vivido en {x}", "jamás viví en {x}",
         "¿vivo en {x}? para nada"),
        ("¿vivo en {x}?", "adivina si vivo en {x}", "vivo en {x}?"),
    ),
    "fr": (
        "j'habite à {x}",
        "Habite à {x}",
        ("je n'habite pas à {x}", "je n'ai jamais habité à {x}", "j'habite à {x}? pas du tout"),
        ("est-ce que j'habite à {x} ?", "devine si j'habite à {x}", "j'habite à {x} ?"),
    ),
    "de": (
        "ich wohne in {x}",
        "Wohnt in {x}",
        ("ich wohne nicht in {x}", "ich wohne nie in {x}", "in {x} wohne ich nicht",
         "ich wohne in {x}? auf keinen Fall"),
        ("wohne ich in {x}?", "rate mal, ob ich in {x} wohne", "ich wohne in {x}?"),
    ),
    "zh": (
        "我喜欢{x}",
        "用户喜欢{x}",
        ("我不喜欢{x}", "我从来没喜欢过{x}", "我喜欢{x}？才不", "我才不喜欢{x}呢"),
        ("我喜欢{x}吗？", "猜猜我喜不喜欢{x}", "我是不是喜欢{x}", "如果我喜欢{x}就好了"),
    ),
    "ja": (
        "私は{x}が好きです",
        "{x}が好き",
        ("私は{x}が好きじゃない", "{x}は好きではない", "{x}が好きではありません"),
        ("私は{x}が好きですか", "{x}が好き？", "もし{x}が好きなら"),
    ),
}  # fmt: skip

SAFE_HAN = "咖啡茶猫狗书画山海河花鸟鱼车船桥灯雪雨风云石木竹琴歌舞球剑药糖盐米面汤酒"
LATIN = st.text(string.ascii_lowercase, min_size=4, max_size=9).map(str.capitalize)
HAN = st.text(SAFE_HAN, min_size=2, max_size=3)


def grounds(entry: str, *said: str) -> bool:
    return check(entry, OwnWords(["hello there", *said])).supported


def _plain_word(x: str) -> bool:
    listed = {w for lists in (NEGATION, ASKING, SUPPOSING, THIRD_PARTY, PRONOUNS) for ws in
              lists.values() for w in ws}  # fmt: skip
    return x.casefold() not in IGNORED | listed


@pytest.mark.parametrize("lang", sorted(FORMS))
@given(data=st.data())
def test_a_negated_or_questioned_statement_never_grounds_the_entry(
    lang: str, data: st.DataObject
) -> None:
    plain, entry, negated, questioned = FORMS[lang]
    x = data.draw(HAN if lang in ("zh", "ja") else LATIN)
    assume(_plain_word(x))
    assert grounds(entry.format(x=x), plain.format(x=x))
    for form in (*negated, *questioned):
        support = check(entry.format(x=x), OwnWords(["hello there", form.format(x=x)]))
        assert not support.supported, form
        assert support.verdict in ("opposite", "asked", "not_said"), (form, support.verdict)


@given(x=LATIN, lang=st.sampled_from(["en", "es", "fr", "de"]))
def test_a_negated_entry_is_grounded_by_the_negation_and_refused_by_the_statement(
    x: str, lang: str
) -> None:
    assume(_plain_word(x))
    said = {
        "en": ("I don't live in {x}", "Does not live in {x}", "I live in {x}"),
        "es": ("no vivo en {x}", "No vive en {x}", "vivo en {x}"),
        "fr": ("je n'habite pas à {x}", "N'habite pas à {x}", "j'habite à {x}"),
        "de": ("ich wohne nicht in {x}", "Wohnt nicht in {x}", "ich wohne in {x}"),
    }[lang]
    negation, entry, statement = (s.format(x=x) for s in said)
    assert grounds(entry, negation)
    assert check(entry, OwnWords([statement])).verdict == "opposite"


@pytest.mark.parametrize(
    ("said", "entry"),
    [
        ("my sister is allergic to nuts", "Is allergic to nuts"),
        ("mi hermana es alérgica a las nueces", "Es alérgica a las nueces"),
        ("ma sœur est allergique aux noix", "Est allergique aux noix"),
        ("meine Schwester ist allergisch gegen Nüsse", "Ist allergisch gegen Nüsse"),
        ("我妹妹对坚果过敏", "用户对坚果过敏"),
        ("she works as a surgeon", "Works as a surgeon"),
        ("él trabaja de cirujano", "Trabaja de cirujano"),
        ("他是外科医生", "用户是外科医生"),
        ("моя сестра живёт в Москве", "Живёт в Москве"),
    ],
)
def test_what_is_said_of_someone_else_is_not_said_of_the_person(said: str, entry: str) -> None:
    assert check(entry, OwnWords([said])).verdict == "someone_else"


@pytest.mark.parametrize(
    ("said", "entry"),
    [
        ("I live with my sister in Leeds", "Lives in Leeds"),
        ("vivo con mi hermana en Sevilla", "Vive en Sevilla"),
        ("j'habite avec ma sœur à Lyon", "Habite à Lyon"),
        ("ich wohne mit meiner Schwester in Bonn", "Wohnt in Bonn"),
        ("我和妹妹住在成都", "用户住在成都"),
    ],
)
def test_a_third_party_as_company_leaves_the_person_the_subject(said: str, entry: str) -> None:
    assert grounds(entry, said)


@pytest.mark.parametrize(
    "said",
    [
        "I live with my sister, who is a nurse",
        "I live with my sister who is a nurse",
        "my friend, who is a nurse, lives here",
        "vivo con mi hermana, quien es enfermera",
    ],
)
def test_a_relative_clause_is_about_the_third_party_before_it(said: str) -> None:
    entry = "Es enfermera" if "enfermera" in said else "Is a nurse"
    assert check(entry, OwnWords([said])).verdict == "someone_else"


def test_a_bare_negation_negates_a_question_or_its_own_sentence_not_the_one_before() -> None:
    assert check("Has diabetes", OwnWords(["diabetes? no way"])).verdict == "opposite"
    assert check("Lives in Berlin", OwnWords(["I live in Berlin, nope"])).verdict == "opposite"
    assert grounds("Lives in Sevilla", "I live in Sevilla. No, not Madrid")


def test_compounds_and_a_not_a_questions_are_not_negations() -> None:
    assert grounds("用户觉得北京不错", "我觉得北京不错")
    [clause] = clauses("你是不是喜欢咖啡")
    assert clause.mood.negated_from is None and clause.mood.asks


def test_a_question_opened_by_an_asking_word_runs_to_the_end_of_its_sentence() -> None:
    guess, named, rest = clauses("guess which city I live in: Zanzibar, Lima or Oslo?")
    assert guess.mood.asks and named.mood.asks and rest.mood.asks
    statement, question = clauses("I live in Lisbon, do you?")
    assert not statement.mood.asks and question.mood.asks


def test_every_language_has_its_lists() -> None:
    for lang in ("en", "es", "fr", "de", "it", "pt", "ru"):
        assert NEGATION[lang] and THIRD_PARTY[lang] and COMPANION[lang], lang
    for lang in ("en", "es", "fr", "de", "it", "pt", "ru", "zh"):
        assert ASKING[lang], lang
    assert set(NEGATION_PHRASES) >= {"en", "es", "fr", "de"}
