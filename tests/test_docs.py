"""The documentation: the generated configuration reference is current and complete, and
the README stays a first screen whose links lead somewhere. (`mkdocs build --strict`, with
its link and anchor checks, runs in .ci/run.)"""

from __future__ import annotations

import re
from pathlib import Path

from gateway.config import Config
from gateway.config_reference import (
    COMMAND,
    EXAMPLE,
    PAGE,
    environment_keys,
    example_notes,
    model_keys,
    render,
)

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
README_MAX_LINES = 150


def test_the_configuration_page_is_current() -> None:
    assert PAGE.read_text(encoding="utf-8") == render(), (
        f"docs/configuration.md is stale: {COMMAND}"
    )


def test_every_key_of_the_model_is_in_the_page() -> None:
    page = PAGE.read_text(encoding="utf-8")
    keys = list(model_keys())
    assert len(keys) > 50  # the walk reaches the nested sections
    assert "telegram.webhook.port" in keys and "media.transcription.model" in keys
    missing = [key for key in keys if f"| `{key}` |" not in page]
    assert not missing, f"not in docs/configuration.md: {missing}; run {COMMAND}"


def test_every_key_is_described() -> None:
    """A key without a comment in config/mnemo.example.yaml (or, for a secret, a line in
    its header) would have an empty description in the reference."""
    notes, var_notes = example_notes(EXAMPLE.read_text(encoding="utf-8"))
    env = environment_keys()
    secrets = {key for key in model_keys() if _field(key).exclude}
    undescribed = [key for key in model_keys() if key not in secrets and not notes.get(key)]
    assert not undescribed, f"give these keys a comment in {EXAMPLE.name}: {undescribed}"
    assert secrets and all(var_notes.get(env.get(key, "")) for key in secrets)


def test_the_environment_variables_are_read_from_the_loader() -> None:
    env = environment_keys()
    assert env["storage.url"] == "MNEMO_DATABASE_URL"
    assert env["telegram.webhook.url"] == "TELEGRAM_WEBHOOK_URL"
    assert env["llm.api_key"] == "OPENAI_API_KEY"
    assert "llm.model" not in env
    _, var_notes = example_notes(EXAMPLE.read_text(encoding="utf-8"))
    assert set(var_notes) == set(env.values()), (
        f"the header of {EXAMPLE.name} lists other variables than the loader reads"
    )


def test_the_example_comments_are_read_per_key() -> None:
    text = (
        "# Above the key.\n"
        "home: data   # after it\n"
        "              # and under it\n"
        "\n"
        "llm:\n"
        "  model: x   # the model\n"
        "  webhook:   # a section\n"
        "    port: 1\n"
        "  timeout: 2  # back a level\n"
    )
    notes, _ = example_notes(text)
    assert notes["home"] == "Above the key. after it and under it"
    assert notes["llm.model"] == "the model"
    assert notes["llm.webhook"] == "a section"
    assert "llm.webhook.port" not in notes
    assert notes["llm.timeout"] == "back a level"


def test_the_readme_is_a_first_screen() -> None:
    lines = README.read_text(encoding="utf-8").count("\n")
    assert lines < README_MAX_LINES, f"README.md has {lines} lines; move the rest to docs/"


def test_the_readmes_links_resolve() -> None:
    text = README.read_text(encoding="utf-8")
    links = [
        link.partition("#")[0]
        for link in re.findall(r"\]\(([^)\s]+)\)", text)
        if not link.startswith(("http://", "https://", "#"))
    ]
    assert links, "the README links to the docs"
    missing = [link for link in links if not (ROOT / link).exists()]
    assert not missing, f"README.md links to missing files: {missing}"


def _field(key: str) -> object:
    model: type = Config
    *sections, name = key.split(".")
    for section in sections:
        model = model.model_fields[section].annotation
    return model.model_fields[name]
