"""SKILL.md parsing and the shared rules: names, sizes, support paths, patches."""

from __future__ import annotations

import string

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from memory_core.errors import (
    MemoryCoreError,
    SkillError,
    SkillFormatError,
    SkillPatchError,
    SkillPathError,
    SkillSizeError,
)
from memory_core.skills.format import (
    MAX_DESCRIPTION_CHARS,
    MAX_NAME_CHARS,
    MAX_SKILL_CHARS,
    SUPPORT_DIRS,
    apply_patch,
    parse_skill,
    support_path,
    validate_name,
)


def skill_text(front: str, body: str = "# Steps\n1. Do it.\n") -> str:
    return f"---\n{front}\n---\n{body}"


GOOD = skill_text(
    'name: deploy-checks\ndescription: Checks before a deploy.\ntags: [ops, deploy]\nversion: "1.2"'
)


def test_parses_a_valid_skill() -> None:
    doc = parse_skill(GOOD, "deploy-checks")
    assert doc.name == "deploy-checks"
    assert doc.description == "Checks before a deploy."
    assert doc.tags == ("ops", "deploy")
    assert doc.version == "1.2"
    assert doc.body == "# Steps\n1. Do it.\n"


def test_optional_fields_default_and_unknown_keys_are_ignored() -> None:
    text = skill_text("name: a\ndescription: d\nlicense: MIT\nmetadata: {x: 1}")
    doc = parse_skill(text)
    assert (doc.tags, doc.version) == ((), None)


def test_crlf_and_bom_are_accepted() -> None:
    text = "\ufeff" + GOOD.replace("\n", "\r\n")
    assert parse_skill(text, "deploy-checks").description == "Checks before a deploy."


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("# no front matter\n", "must start with a line '---'"),
        ("---\nname: a\ndescription: d\n# body\n", "not closed"),
        (skill_text("name: a\ndescription: [unclosed"), "front matter at line"),
        (skill_text("- just\n- a list"), "must be a YAML mapping"),
        (skill_text("description: d"), "name must be a string"),
        (skill_text("name: Deploy\ndescription: d"), "'Deploy' is invalid"),
        (skill_text("name: -x\ndescription: d"), "is invalid"),
        (skill_text(f"name: {'a' * (MAX_NAME_CHARS + 1)}\ndescription: d"), "limit is 64"),
        (skill_text("name: a"), "description is missing"),
        (skill_text("name: a\ndescription: '   '"), "description is empty"),
        (skill_text("name: a\ndescription: 5"), "description must be a string"),
        (
            skill_text(f"name: a\ndescription: {'x' * (MAX_DESCRIPTION_CHARS + 1)}"),
            "limit is 1,024",
        ),
        (skill_text("name: a\ndescription: d\ntags: ops"), "tags must be a list"),
        (skill_text("name: a\ndescription: d\ntags: [1, 2]"), "tags must be a list"),
        (skill_text("name: a\ndescription: d\nversion: 1.10"), 'version: "1.1"'),
        (skill_text("name: a\ndescription: d", body="\n  \n"), "body after the front matter"),
    ],
)
def test_invalid_skills_name_the_problem(text: str, fragment: str) -> None:
    with pytest.raises(SkillFormatError) as info:
        parse_skill(text)
    assert fragment in str(info.value)


def test_yaml_error_reports_the_file_line() -> None:
    # line 1 is the opening '---'; the stray colon is on line 3 of the file
    text = skill_text("name: a\ndescription: ok: not quoted\ntags: [x]")
    with pytest.raises(SkillFormatError, match="front matter at line 3"):
        parse_skill(text)


def test_name_must_match_the_folder() -> None:
    with pytest.raises(SkillFormatError, match="does not match its folder name 'other'"):
        parse_skill(GOOD, "other")


def test_oversized_skill_is_refused() -> None:
    text = skill_text("name: a\ndescription: d", body="x" * MAX_SKILL_CHARS)
    with pytest.raises(SkillSizeError, match="limit is 100,000"):
        parse_skill(text)
    just_fits = skill_text("name: a\ndescription: d", body="")
    just_fits += "x" * (MAX_SKILL_CHARS - len(just_fits))
    assert len(parse_skill(just_fits).body) > 0


def test_errors_share_the_package_root() -> None:
    assert issubclass(SkillFormatError, SkillError)
    assert issubclass(SkillPathError, SkillFormatError)
    assert issubclass(SkillError, MemoryCoreError)


@pytest.mark.parametrize("name", ["a", "0", "deploy-checks", "v1.2_x", "a" * MAX_NAME_CHARS])
def test_valid_names(name: str) -> None:
    assert validate_name(name) == name


@pytest.mark.parametrize("name", ["", "A", ".hidden", "_x", "a b", "a/b", "..", "é", None, 3])
def test_invalid_names(name: object) -> None:
    with pytest.raises(SkillFormatError):
        validate_name(name)


@pytest.mark.parametrize(
    "path",
    [
        "references/../SKILL.md",
        "../x/references/a.md",
        "references/../../etc/passwd",
        "/etc/passwd",
        "/references/a.md",
        "C:/x/references/a.md",
        "references\\a.md",
        "references/./a.md",
        "references//a.md",
        "references/",
        "references",
        "SKILL.md",
        "notes/a.md",
        "references/a\x00.md",
        "references/.env",
        "scripts/.git/config",
        "",
        "   ",
    ],
)
def test_support_paths_refused(path: str) -> None:
    with pytest.raises(SkillPathError):
        support_path(path)


@pytest.mark.parametrize(
    "path", ["references/api.md", "templates/reply.txt", "scripts/a/b/run.py", "assets/x.png"]
)
def test_support_paths_allowed(path: str) -> None:
    assert support_path(path).as_posix() == path


_PATH_ALPHABET = string.ascii_lowercase + "./\\_-" + "\x00"


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=_PATH_ALPHABET, max_size=30) | st.sampled_from(SUPPORT_DIRS).map(str))
def test_any_accepted_path_stays_inside_a_support_dir(path: str) -> None:
    try:
        pure = support_path(path)
    except SkillPathError:
        return
    assert pure.parts[0] in SUPPORT_DIRS and len(pure.parts) >= 2
    assert ".." not in pure.parts and not pure.is_absolute()


def test_apply_patch_unique_match() -> None:
    assert apply_patch("a b c", "b", "X", False, "f") == ("a X c", 1)


def test_apply_patch_refuses_missing_ambiguous_and_empty() -> None:
    with pytest.raises(SkillPatchError, match="not found"):
        apply_patch("abc", "z", "y", False, "f")
    with pytest.raises(SkillPatchError, match="matches 2 places"):
        apply_patch("a a", "a", "b", False, "f")
    with pytest.raises(SkillPatchError, match="empty"):
        apply_patch("a", "", "b", False, "f")


def test_apply_patch_replace_all_counts() -> None:
    assert apply_patch("a-a-a", "a", "bb", True, "f") == ("bb-bb-bb", 3)


_names = st.from_regex(r"[a-z0-9][a-z0-9._-]{0,20}", fullmatch=True)
_line = st.text(
    alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cc", "Zl", "Zp")),
    min_size=1,
    max_size=80,
).filter(lambda s: s.strip())


@settings(max_examples=150, deadline=None)
@given(
    name=_names,
    description=_line,
    tags=st.lists(_line, max_size=3),
    body=_line,
)
def test_round_trip_of_generated_skills(
    name: str, description: str, tags: list[str], body: str
) -> None:
    front = yaml.safe_dump(
        {"name": name, "description": description, "tags": tags, "version": "1"},
        allow_unicode=True,
    )
    doc = parse_skill(f"---\n{front}---\n{body}\n", name)
    assert doc.name == name
    assert doc.description == description.strip()
    assert doc.tags == tuple(t.strip() for t in tags)
    assert doc.body.strip() == body.strip()


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=300))
def test_arbitrary_text_only_raises_skill_errors(text: str) -> None:
    for candidate in (text, "---\n" + text, "---\n" + text + "\n---\nbody"):
        try:
            doc = parse_skill(candidate)
        except SkillError as exc:
            assert str(exc)  # always a message to show the operator
        else:
            assert doc.body.strip() and validate_name(doc.name) == doc.name
