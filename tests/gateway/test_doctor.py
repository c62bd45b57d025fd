"""`mnemo doctor`, `--version`, `--help` and configuration errors, through the real CLI.

Doctor calls `asyncio.run`, so these are plain sync tests: the fake OpenAI
server runs on its own event loop in a background thread, and a few tests run
the installed `mnemo` console script as a real subprocess.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from gateway.cli import main
from tests.fakes.base import serving_in_thread
from tests.fakes.discord import FakeDiscord
from tests.fakes.openai import FakeOpenAI, Fault
from tests.fakes.telegram import FakeTelegram
from tests.timing import scaled

MNEMO = Path(sys.executable).parent / "mnemo"


@pytest.fixture(autouse=True)
def in_tmp_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """No ./mnemo.yaml from the developer's working directory is picked up."""
    monkeypatch.chdir(tmp_path)


@pytest.fixture
def fake() -> Iterator[FakeOpenAI]:
    with serving_in_thread(FakeOpenAI(echo_when_idle=True)) as server:
        yield server


def closed_port() -> int:
    """A loopback port that nothing listens on (bound, noted, closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def doctor(base_url: str, home: Path, *args: str, **env: str) -> Result:
    """`mnemo [args] doctor` with a skills folder beside `home` (MNEMO_SKILLS_DIR in `env`
    replaces it); arguments after ``--`` in `args` go to doctor."""
    skills = Path(env.get("MNEMO_SKILLS_DIR") or home.parent / "skills")
    if "MNEMO_SKILLS_DIR" not in env:
        skills.mkdir(parents=True, exist_ok=True)
    environment = {
        "OPENAI_BASE_URL": base_url,
        "MNEMO_HOME": str(home),
        "MNEMO_SKILLS_DIR": str(skills),
        "OPENAI_API_KEY": "",  # not the developer's own
        "TELEGRAM_BOT_TOKEN": "",
        "DISCORD_BOT_TOKEN": "",
        **env,
    }
    cut = args.index("--") if "--" in args else len(args)
    command = [*args[:cut], "doctor", "--timeout", "2", *args[cut + 1 :]]
    return CliRunner().invoke(main, command, env=environment)


def lines(text: str) -> list[str]:
    return text.strip().splitlines()


def test_doctor_passes_against_the_fake(fake: FakeOpenAI, tmp_path: Path) -> None:
    result = doctor(fake.url + "/v1", tmp_path / "data")
    assert result.exit_code == 0, result.output
    model_line = next(line for line in lines(result.stdout) if "model:" in line)
    assert model_line == (
        f"ok   model: {fake.url}/v1: model 'gpt-4o-mini' answered a one-token chat completion"
    )
    assert all(line.startswith("ok ") for line in lines(result.stdout))
    (request,) = fake.requests  # a turn's call, as small as it gets
    assert (request.method, request.path) == ("POST", "/v1/chat/completions")
    assert request.body["model"] == "gpt-4o-mini" and request.body["max_tokens"] == 1
    assert (tmp_path / "data").is_dir()


def test_doctor_with_no_spend_only_lists_the_models(fake: FakeOpenAI, tmp_path: Path) -> None:
    result = doctor(fake.url + "/v1", tmp_path / "data", "--", "--no-spend")
    assert result.exit_code == 0, result.output
    assert (
        f"ok   model: {fake.url}/v1: answers with the key; model 'gpt-4o-mini' is listed"
        in lines(result.stdout)
    )
    assert [(r.method, r.path) for r in fake.requests] == [("GET", "/v1/models")]


def test_doctor_fails_when_the_endpoint_is_a_closed_port(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{closed_port()}/v1"
    result = doctor(url, tmp_path / "data")
    assert result.exit_code == 1
    assert f"FAIL model: {url}: unreachable" in result.stdout
    assert "ok   storage" in result.stdout  # the other checks still ran and reported


def test_doctor_fails_when_the_key_is_rejected(tmp_path: Path) -> None:
    with serving_in_thread(FakeOpenAI(api_key="sk-right")) as fake:
        result = doctor(fake.url + "/v1", tmp_path / "data", OPENAI_API_KEY="sk-wrong")
        seen = fake.requests[0].authorization
    assert result.exit_code == 1
    assert "FAIL model:" in result.stdout
    assert "rejected the API key (HTTP 401)" in result.stdout
    assert seen == "Bearer sk-wrong"  # the key comes from the environment


def test_doctor_fails_when_the_endpoint_stalls(fake: FakeOpenAI, tmp_path: Path) -> None:
    fake.fail_next(Fault.stall())
    result = doctor(fake.url + "/v1", tmp_path / "data", "--", "--timeout", "0.3")
    assert result.exit_code == 1
    assert "FAIL model:" in result.stdout and "(timed out)" in result.stdout


@pytest.mark.slow  # a real mnemo process, start to exit
def test_doctor_as_a_subprocess(fake: FakeOpenAI, tmp_path: Path) -> None:
    (tmp_path / "skills").mkdir()
    env = {
        "OPENAI_BASE_URL": fake.url + "/v1",
        "MNEMO_HOME": str(tmp_path / "data"),
        "MNEMO_SKILLS_DIR": str(tmp_path / "skills"),
    }
    proc = run_mnemo(["doctor"], tmp_path, env)
    assert proc.returncode == 0, proc.stderr
    assert "ok   model: " + fake.url + "/v1" in proc.stdout
    assert proc.stderr == ""


def test_version_prints_the_package_version() -> None:
    result = CliRunner().invoke(main, ["--version"])
    assert result.exit_code == 0
    assert result.stdout.strip() == f"mnemo, version {version('mnemo-gateway')}"


@pytest.mark.parametrize("command", ["", "run", "chat", "doctor", "memory", "sessions", "skills"])
def test_help_exits_zero(command: str) -> None:
    result = CliRunner().invoke(main, [*command.split(), "--help"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Usage: main {command}".rstrip() + " [OPTIONS]")


CONFIG_ERRORS = [
    ("llm:\n  modle: x\n", "llm.modle: unknown key"),
    ("llm:\n  timeout: abc\n", "llm.timeout:"),
    ("llm:\n  api_key: sk-in-the-file\n", "llm.api_key:"),
]


@pytest.mark.parametrize(("yaml_text", "named"), CONFIG_ERRORS, ids=["typo", "type", "secret"])
def test_bad_config_file_is_one_line_and_exit_2(tmp_path: Path, yaml_text: str, named: str) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text(yaml_text, encoding="utf-8")
    result = CliRunner().invoke(main, ["--config", str(config), "doctor"])
    assert result.exit_code == 2
    assert result.stdout == ""  # refused before any check ran
    (line,) = lines(result.stderr)
    assert line.startswith("mnemo: ") and named in line
    assert "Traceback" not in result.stderr


def test_secret_in_file_names_the_environment_variable(tmp_path: Path) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text("llm:\n  api_key: sk-in-the-file\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["--config", str(config), "doctor"])
    assert "OPENAI_API_KEY" in result.stderr
    assert "sk-in-the-file" not in result.stderr  # the secret is not echoed back


def test_bad_config_file_in_a_subprocess_has_no_traceback(tmp_path: Path) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text("llm:\n  timeout: abc\n", encoding="utf-8")
    proc = run_mnemo(["--config", str(config), "doctor"], tmp_path, {})
    assert proc.returncode == 2
    (line,) = lines(proc.stderr)
    assert "llm.timeout" in line and "abc" in line


def test_mnemo_home_overrides_home_from_the_file(fake: FakeOpenAI, tmp_path: Path) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text(f"home: {tmp_path / 'from-file'}\n", encoding="utf-8")
    result = doctor(fake.url + "/v1", tmp_path / "from-env", "--config", str(config))
    assert result.exit_code == 0, result.output
    assert f"ok   data dir: {tmp_path / 'from-env'} is writable" in result.stdout
    assert (tmp_path / "from-env").is_dir()
    assert not (tmp_path / "from-file").exists()


@pytest.mark.parametrize(
    "url", ["http://[::1/v1", "http://127.0.0.1:99999/v1", "ftp://127.0.0.1/v1", "127.0.0.1:8080"]
)
def test_malformed_base_url_is_a_config_error(tmp_path: Path, url: str) -> None:
    result = doctor(url, tmp_path / "data")
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2
    assert result.stderr.startswith("mnemo: config error: llm.base_url:")
    assert result.stderr.count("\n") == 1


def run_mnemo(args: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The installed console script, with only the variables a test gives (plus PATH)."""
    base = {"PATH": str(MNEMO.parent), "NO_PROXY": "127.0.0.1,localhost"}
    return subprocess.run(
        [str(MNEMO), *args],
        cwd=cwd,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=scaled(30),
    )


BILLION_LAUGHS = "a: &a [lol, lol, lol, lol, lol, lol, lol, lol, lol]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefgh", "bcdefghi", strict=True)
)


@pytest.mark.parametrize("command", ["doctor", "run"])
@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (BILLION_LAUGHS.encode(), "at line 2: aliases (*name) are not allowed"),
        (b"llm:\n  model: \xff\xfe\n", "is not UTF-8: invalid byte 0xff at offset 14"),
        (b"llm: " + b"[" * 3000 + b"]" * 3000 + b"\n", "at line 1: nesting deeper than 32 levels"),
    ],
    ids=["alias-bomb", "not-utf8", "deep"],
)
def test_hostile_config_file_is_one_line_and_exit_2(
    tmp_path: Path, command: str, content: bytes, expected: str
) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_bytes(content)
    result = CliRunner().invoke(main, ["--config", str(config), command])
    assert isinstance(result.exception, SystemExit), result.exception
    assert result.exit_code == 2
    assert result.stderr == f"mnemo: config file {config} {expected}\n"


@pytest.mark.slow
def test_hostile_config_file_in_a_subprocess_has_no_traceback(tmp_path: Path) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text(BILLION_LAUGHS, encoding="utf-8")
    proc = run_mnemo(["--config", str(config), "run"], tmp_path, {})
    assert proc.returncode == 2
    assert (
        proc.stderr == f"mnemo: config file {config} at line 2: aliases (*name) are not allowed\n"
    )
    config.write_bytes(b"home: caf\xe9\n")
    proc = run_mnemo(["--config", str(config), "doctor"], tmp_path, {})
    assert proc.returncode == 2
    assert (
        proc.stderr == f"mnemo: config file {config} is not UTF-8: invalid byte 0xe9 at offset 9\n"
    )


def test_url_credentials_in_the_file_are_refused_without_echo(tmp_path: Path) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text("llm:\n  base_url: https://user:sk-abc123@host/v1\n", encoding="utf-8")
    result = CliRunner().invoke(main, ["--config", str(config), "doctor"])
    assert result.exit_code == 2
    (line,) = lines(result.stderr)
    assert line.startswith("mnemo: config error: llm.base_url: credentials in a URL")
    assert "OPENAI_API_KEY" in line and "sk-abc123" not in line


def test_doctor_never_prints_url_credentials_from_the_environment(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    host = fake.url.removeprefix("http://")
    result = doctor(f"http://user:sk-abc123@{host}/v1", tmp_path / "data")
    assert "sk-abc123" not in result.output
    assert f"model: http://***@{host}/v1: " in result.stdout


def test_doctor_never_prints_url_credentials_of_an_unreachable_endpoint(tmp_path: Path) -> None:
    url = f"http://user:sk-abc123@127.0.0.1:{closed_port()}/v1"
    result = doctor(url, tmp_path / "data")
    assert result.exit_code == 1
    assert "sk-abc123" not in result.output
    assert "FAIL model: http://***@127.0.0.1:" in result.stdout


def test_doctor_never_prints_url_credentials_of_a_malformed_url(tmp_path: Path) -> None:
    result = doctor("http://user:sk-abc123@127.0.0.1:99999/v1", tmp_path / "data")
    assert result.exit_code == 2
    assert "sk-abc123" not in result.output
    assert result.stderr.startswith("mnemo: config error: llm.base_url:")


# ----- each broken set-up gives its line (issue 24 item 1) ------------------------------


def failed(result: Result) -> list[str]:
    return [line for line in lines(result.stdout) if line.startswith("FAIL")]


@pytest.mark.parametrize("spend", [True, False], ids=["completion", "no-spend"])
def test_a_base_url_without_v1_names_the_url_and_suggests_v1(
    fake: FakeOpenAI, tmp_path: Path, spend: bool
) -> None:
    flags = () if spend else ("--", "--no-spend")
    result = doctor(fake.url, tmp_path / "data", *flags)
    assert result.exit_code == 1
    path = "/chat/completions" if spend else "/models"
    assert failed(result) == [
        f"FAIL model: {fake.url}: HTTP 404 from {fake.url}{path}: "
        f"most endpoints need /v1: try {fake.url}/v1"
    ]


def test_a_wrong_key_is_refused_in_one_line_that_does_not_repeat_it(tmp_path: Path) -> None:
    with serving_in_thread(FakeOpenAI(api_key="sk-right-key")) as fake:
        result = doctor(fake.url + "/v1", tmp_path / "data", OPENAI_API_KEY="sk-wrong-key")
    assert result.exit_code == 1
    assert failed(result) == [
        f"FAIL model: {fake.url}/v1: rejected the API key (HTTP 401): check OPENAI_API_KEY"
    ]
    assert "sk-wrong-key" not in result.output


def test_a_missing_key_says_to_set_one(tmp_path: Path) -> None:
    with serving_in_thread(FakeOpenAI(api_key="sk-right-key")) as fake:
        result = doctor(fake.url + "/v1", tmp_path / "data", "--", "--no-spend")
    assert result.exit_code == 1
    assert failed(result) == [
        f"FAIL model: {fake.url}/v1: wants an API key (HTTP 401) and none is set: "
        "set OPENAI_API_KEY"
    ]


def test_a_model_not_served_lists_what_is(tmp_path: Path) -> None:
    served = FakeOpenAI(model_ids=("llama3.1:8b", "qwen2.5"), listed_only=True)
    with serving_in_thread(served) as fake:
        result = doctor(fake.url + "/v1", tmp_path / "data")
    assert result.exit_code == 1
    assert failed(result) == [
        f"FAIL model: {fake.url}/v1: model 'gpt-4o-mini' is not served; "
        "it serves llama3.1:8b, qwen2.5 (llm.model)"
    ]


@pytest.mark.parametrize("listed_only", [True, False], ids=["refuses", "answers-anyway"])
def test_no_spend_warns_of_an_unlisted_model_and_passes(tmp_path: Path, listed_only: bool) -> None:
    """Many compatible servers answer a model they do not list, and then `doctor` passes:
    `--no-spend` cannot tell the two apart without a completion, so it warns and passes."""
    served = FakeOpenAI(
        model_ids=("llama3.1:8b", "qwen2.5"), listed_only=listed_only, echo_when_idle=True
    )
    with serving_in_thread(served) as fake:
        spent = doctor(fake.url + "/v1", tmp_path / "data")
        listed = doctor(fake.url + "/v1", tmp_path / "data", "--", "--no-spend")
    assert spent.exit_code == (1 if listed_only else 0), spent.output
    assert listed.exit_code == 0, listed.output
    assert (
        f"warn model: {fake.url}/v1: answers with the key, but 'gpt-4o-mini' is not served; "
        "it serves llama3.1:8b, qwen2.5 (llm.model); some servers answer models they do not "
        "list: `mnemo doctor` without --no-spend asks for one token"
    ) in lines(listed.stdout)


def test_the_auxiliary_model_is_checked_when_configured_apart(tmp_path: Path) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text("auxiliary:\n  model: gpt-4.1-nano\n", encoding="utf-8")
    with serving_in_thread(FakeOpenAI(echo_when_idle=True, listed_only=True)) as fake:
        result = doctor(fake.url + "/v1", tmp_path / "data", "--config", str(config))
    assert result.exit_code == 1
    assert f"ok   model: {fake.url}/v1: model 'gpt-4o-mini' answered" in result.stdout
    assert failed(result) == [
        f"FAIL auxiliary model: {fake.url}/v1: model 'gpt-4.1-nano' is not served; "
        "it serves gpt-4o-mini, gpt-4o (llm.model)"
    ]


def test_one_model_line_when_the_auxiliary_model_is_the_main_one(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    result = doctor(fake.url + "/v1", tmp_path / "data")
    assert result.exit_code == 0, result.output
    assert [line.split(":")[0] for line in lines(result.stdout)] == [
        "ok   config", "ok   data dir", "ok   skills", "ok   storage", "ok   model",
        "ok   telegram", "ok   discord",
    ]  # fmt: skip
    assert len(fake.requests) == 1


def platform_config(tmp_path: Path, telegram: FakeTelegram, discord: FakeDiscord) -> Path:
    config = tmp_path / "mnemo.yaml"
    config.write_text(
        f"telegram:\n  base_url: {telegram.url}/bot\n  base_file_url: {telegram.url}/file/bot\n"
        f"discord:\n  api_base: {discord.api_base}\n",
        encoding="utf-8",
    )
    return config


@pytest.fixture
def platforms() -> Iterator[tuple[FakeTelegram, FakeDiscord]]:
    with (
        serving_in_thread(FakeTelegram(token="123:RIGHT")) as telegram,
        serving_in_thread(FakeDiscord(token="discord-right-token")) as discord,
    ):
        yield telegram, discord


def test_telegram_and_discord_answer_with_their_tokens(
    fake: FakeOpenAI, tmp_path: Path, platforms: tuple[FakeTelegram, FakeDiscord]
) -> None:
    config = platform_config(tmp_path, *platforms)
    tokens = {"TELEGRAM_BOT_TOKEN": "123:RIGHT", "DISCORD_BOT_TOKEN": "discord-right-token"}
    result = doctor(fake.url + "/v1", tmp_path / "data", "--config", str(config), **tokens)
    assert result.exit_code == 0, result.output
    assert "ok   telegram: @mnemo_bot (getMe answered)" in lines(result.stdout)
    assert "ok   discord: mnemo (/users/@me answered)" in lines(result.stdout)
    assert [c.route for c in platforms[1].calls] == ["GET /users/@me"]


def test_refused_platform_tokens_fail_with_one_line_each(
    fake: FakeOpenAI, tmp_path: Path, platforms: tuple[FakeTelegram, FakeDiscord]
) -> None:
    config = platform_config(tmp_path, *platforms)
    tokens = {"TELEGRAM_BOT_TOKEN": "123:WRONG-TOKEN", "DISCORD_BOT_TOKEN": "discord-wrong"}
    result = doctor(fake.url + "/v1", tmp_path / "data", "--config", str(config), **tokens)
    assert result.exit_code == 1
    assert failed(result) == [
        "FAIL telegram: Telegram refused the token: check TELEGRAM_BOT_TOKEN",
        "FAIL discord: Discord refused the token: check DISCORD_BOT_TOKEN",
    ]
    assert "WRONG-TOKEN" not in result.output and "discord-wrong" not in result.output


def test_an_enabled_platform_without_its_token_fails(fake: FakeOpenAI, tmp_path: Path) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text("discord:\n  enabled: true\n", encoding="utf-8")
    result = doctor(fake.url + "/v1", tmp_path / "data", "--config", str(config))
    assert result.exit_code == 1
    assert failed(result) == ["FAIL discord: enabled but DISCORD_BOT_TOKEN is not set"]


def test_an_unreachable_telegram_names_the_host_not_the_token(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    config = tmp_path / "mnemo.yaml"
    config.write_text(f"telegram:\n  base_url: http://127.0.0.1:{closed_port()}/bot\n")
    env = {"TELEGRAM_BOT_TOKEN": "123:SECRET-TOKEN"}
    result = doctor(fake.url + "/v1", tmp_path / "data", "--config", str(config), **env)
    assert result.exit_code == 1
    (line,) = failed(result)
    assert line.startswith("FAIL telegram: http://127.0.0.1:") and ": unreachable (" in line
    assert "SECRET-TOKEN" not in result.output


def test_a_missing_skills_folder_fails(fake: FakeOpenAI, tmp_path: Path) -> None:
    missing = tmp_path / "no-skills-here"
    result = doctor(fake.url + "/v1", tmp_path / "data", MNEMO_SKILLS_DIR=str(missing))
    assert result.exit_code == 1
    assert failed(result) == [
        f"FAIL skills: {missing} does not exist (skills.dir, MNEMO_SKILLS_DIR)"
    ]


def test_a_skills_folder_is_checked_writable_when_admins_may_promote(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    skills = tmp_path / "skills"
    (skills / "deploy").mkdir(parents=True)
    (skills / "deploy" / "SKILL.md").write_text("---\nname: deploy\n---\n", encoding="utf-8")
    config = tmp_path / "mnemo.yaml"
    config.write_text("admins: ['telegram:42']\n", encoding="utf-8")
    result = doctor(fake.url + "/v1", tmp_path / "data", "--config", str(config))
    assert result.exit_code == 0, result.output
    assert f"ok   skills: {skills}: 1 skill, readable and writable (admins may /promote)" in lines(
        result.stdout
    )
    assert sorted(p.name for p in skills.iterdir()) == ["deploy"]  # the probe file is gone


def test_a_data_dir_that_cannot_be_written_fails(fake: FakeOpenAI, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    (tmp_path / "skills").mkdir()
    skills = {"MNEMO_SKILLS_DIR": str(tmp_path / "skills")}
    result = doctor(fake.url + "/v1", blocker / "data", **skills)
    assert result.exit_code == 1
    assert failed(result) == [f"FAIL data dir: {blocker / 'data'}: not writable: Not a directory"]


def test_json_lists_the_same_checks(fake: FakeOpenAI, tmp_path: Path) -> None:
    missing = tmp_path / "nowhere"
    result = doctor(
        fake.url + "/v1", tmp_path / "data", "--", "--json", MNEMO_SKILLS_DIR=str(missing)
    )
    assert result.exit_code == 1
    checks = json.loads(result.stdout)
    assert [c["name"] for c in checks] == [
        "config", "data dir", "skills", "storage", "model", "telegram", "discord",
    ]  # fmt: skip
    assert all(set(c) == {"name", "ok", "detail", "warning"} for c in checks)
    assert [c["name"] for c in checks if not c["ok"]] == ["skills"]
    assert checks[2]["detail"] == f"{missing} does not exist (skills.dir, MNEMO_SKILLS_DIR)"
    text = doctor(fake.url + "/v1", tmp_path / "data", MNEMO_SKILLS_DIR=str(missing)).stdout
    assert lines(text) == [
        f"{'ok  ' if c['ok'] else 'FAIL'} {c['name']}: {c['detail']}" for c in checks
    ]


def test_doctor_on_postgres_names_the_server_and_a_fresh_database(
    fake: FakeOpenAI, tmp_path: Path, pg_database: str
) -> None:
    result = doctor(fake.url + "/v1", tmp_path / "data", MNEMO_DATABASE_URL=pg_database)
    assert result.exit_code == 0, result.output
    line = next(line for line in lines(result.stdout) if "storage:" in line)
    assert line.startswith("ok   storage: PostgreSQL 18") and "database mnemo_tests" in line
    assert line.endswith("(empty: mnemo run creates the schema)")


def test_doctor_fails_when_postgres_is_unreachable_and_hides_the_password(
    fake: FakeOpenAI, tmp_path: Path
) -> None:
    url = f"postgresql://mnemo:s3cret@127.0.0.1:{closed_port()}/mnemo"
    result = doctor(fake.url + "/v1", tmp_path / "data", MNEMO_DATABASE_URL=url)
    assert result.exit_code == 1
    (line,) = [line for line in lines(result.stdout) if "storage:" in line]
    assert line.startswith("FAIL storage: cannot connect to PostgreSQL:") and "s3cret" not in line
    assert "ok   model:" in result.stdout  # the other checks still ran
