"""The system prompt's identity: the default or the operator's persona, always the memory rules."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from gateway.agent.prompt import DEFAULT_PERSONA, MEMORY_RULES, build_system_prompt, identity
from gateway.app import MAX_PERSONA_BYTES, open_services, read_persona
from gateway.cli import main
from gateway.config import load_config
from gateway.errors import ConfigError
from gateway.messages import InboundMessage
from memory_core import MemorySnapshot
from tests.fakes.openai import FakeOpenAI
from tests.gateway.serving import serving
from tests.gateway.sinks import ListSink

SKILLS = Path(__file__).resolve().parents[3] / "skills"
PIRATE = "You are Captain Mnemo, a pirate who answers in sea shanties."


def prompt(persona: str | None) -> str:
    snapshot = MemorySnapshot(memory_block="", user_block="")
    return build_system_prompt(snapshot, "", "", "telegram", persona=persona)


def test_without_a_persona_the_prompt_starts_with_the_default_identity() -> None:
    assert prompt(None).startswith(
        "You are Mnemo, a helpful chat assistant that remembers the people you talk to.\n"
        "Memory rules: save durable facts"
    )
    assert identity() == f"{DEFAULT_PERSONA}\n{MEMORY_RULES}"


def test_a_persona_replaces_the_identity_and_keeps_the_memory_rules() -> None:
    text = prompt(PIRATE)
    assert text.startswith(PIRATE + "\n" + MEMORY_RULES)
    assert DEFAULT_PERSONA not in text
    assert "You are talking on telegram." in text


def write(path: Path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


@pytest.mark.parametrize(
    ("data", "problem"),
    [
        (None, "cannot read"),
        (b"x" * (MAX_PERSONA_BYTES + 1), "larger than 16 KiB"),
        (b"caf\xe9", "not UTF-8"),
        (b"  \n\n", "is empty"),
    ],
)
def test_a_bad_persona_file_is_one_config_error_line(
    tmp_path: Path, data: bytes | None, problem: str
) -> None:
    path = tmp_path / "persona.md"
    if data is not None:
        write(path, data)
    with pytest.raises(ConfigError) as caught:
        read_persona(path)
    message = str(caught.value)
    assert message.startswith("config error: persona_file: ") and problem in message
    assert "\n" not in message and len(message) < 200


def test_a_persona_file_is_read_whole_and_trimmed(tmp_path: Path) -> None:
    path = write(tmp_path / "p.md", f"\n{PIRATE}\n\nSpeak briefly.\n".encode())
    assert read_persona(path) == f"{PIRATE}\n\nSpeak briefly."
    assert read_persona(None) is None


async def test_the_persona_file_shapes_every_sessions_prompt(tmp_path: Path) -> None:
    persona = write(tmp_path / "persona.md", PIRATE.encode())
    config_file = tmp_path / "mnemo.yaml"
    config_file.write_text(f"persona_file: {persona}\n", encoding="utf-8")
    async with FakeOpenAI() as fake:
        env = {
            "OPENAI_BASE_URL": fake.url + "/v1",
            "MNEMO_HOME": str(tmp_path / "data"),
            "MNEMO_SKILLS_DIR": str(SKILLS),
        }
        fake.say("Arr.")
        async with open_services(load_config(config_file, environ=env)) as services:
            message = InboundMessage(
                platform="telegram", chat_id="5", chat_type="private", user_id="5", text="hi"
            )
            await serving(services).handle(message, ListSink())
        system = fake.requests[0].body["messages"][0]
    assert system["role"] == "system"
    assert system["content"].startswith(PIRATE + "\n" + MEMORY_RULES)
    assert DEFAULT_PERSONA not in system["content"]


def test_a_missing_persona_file_stops_start_up_with_one_line(tmp_path: Path) -> None:
    config_file = tmp_path / "mnemo.yaml"
    config_file.write_text(f"persona_file: {tmp_path / 'nope.md'}\n", encoding="utf-8")
    result = CliRunner().invoke(
        main, ["--config", str(config_file), "chat"], env={"MNEMO_HOME": str(tmp_path / "d")}
    )
    assert result.exit_code == 2
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and "persona_file" in lines[0] and "nope.md" in lines[0]
