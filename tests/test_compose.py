"""The deployment example: compose.yaml (PostgreSQL, three `mnemo run` replicas in webhook
mode, Caddy in front), deploy/replicas.yaml and deploy/Caddyfile, read as compose and Caddy
would read them and checked against each other and against Mnemo's own configuration."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from gateway.config import Config, load_config

ROOT = Path(__file__).resolve().parents[1]
COMPOSE = ROOT / "compose.yaml"
CADDYFILE = ROOT / "deploy" / "Caddyfile"
CONFIG_FILE = "/config/mnemo.yaml"
# what the operator's .env gives compose (the test's own stand-ins)
DOTENV = {
    "POSTGRES_PASSWORD": "pw-from-env",
    "TELEGRAM_BOT_TOKEN": "123:token-from-env",
    "TELEGRAM_WEBHOOK_SECRET": "secret-from-env",
    "MNEMO_PUBLIC_HOST": "bot.example.org",
    "OPENAI_API_KEY": "sk-from-env",
}
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|API_KEY")
_VARIABLE = re.compile(r"\$\{(?P<name>[A-Z_][A-Z0-9_]*)(?:(?P<op>:[-?])(?P<arg>[^}]*))?\}")


def interpolated(value: str, env: dict[str, str]) -> str:
    """`value` with compose's ``${VAR}``, ``${VAR:-default}`` and ``${VAR:?error}`` filled."""

    def fill(match: re.Match[str]) -> str:
        name, op, arg = match["name"], match["op"], match["arg"]
        if env.get(name):
            return env[name]
        if op == ":?":
            raise LookupError(f"{name}: {arg}")
        return arg if op == ":-" else ""

    return _VARIABLE.sub(fill, value)


@pytest.fixture(scope="module")
def compose() -> dict[str, Any]:
    loaded = yaml.safe_load(COMPOSE.read_text(encoding="utf-8"))
    assert isinstance(loaded, dict)
    return loaded


def replicas(compose: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        name: service
        for name, service in compose["services"].items()
        if service.get("command") == ["run"]
    }


def environment(service: dict[str, Any], env: dict[str, str] = DOTENV) -> dict[str, str]:
    return {key: interpolated(str(value), env) for key, value in service["environment"].items()}


def replica_config(service: dict[str, Any]) -> Config:
    """The configuration the replica's `mnemo run` loads in its container."""
    mounts = dict(volume.split(":")[:2] for volume in service["volumes"])
    file = next(ROOT / host for host, inside in mounts.items() if inside == CONFIG_FILE)
    env = environment(service)
    assert env["MNEMO_CONFIG"] == CONFIG_FILE
    return load_config(file, environ=env)


def caddy_site() -> str:
    return CADDYFILE.read_text(encoding="utf-8")


def test_one_database_with_a_volume_and_a_healthcheck(compose: dict[str, Any]) -> None:
    databases = {
        name: service
        for name, service in compose["services"].items()
        if str(service.get("image", "")).startswith("postgres:")
    }
    [(name, database)] = databases.items()
    [volume] = database["volumes"]
    named, inside = volume.split(":")
    assert named in compose["volumes"] and inside == "/var/lib/postgresql/data"
    assert "pg_isready" in " ".join(database["healthcheck"]["test"])
    env = environment(database)
    for service in replicas(compose).values():
        assert service["depends_on"][name] == {"condition": "service_healthy"}
        url = urlsplit(environment(service)["MNEMO_DATABASE_URL"])
        assert (url.hostname, url.username, url.password) == (
            name,
            env["POSTGRES_USER"],
            DOTENV["POSTGRES_PASSWORD"],
        )
        assert url.path == "/" + env["POSTGRES_DB"]


def test_three_replicas_each_with_its_index_and_its_own_data(compose: dict[str, Any]) -> None:
    found = replicas(compose)
    assert len(found) == 3
    configs = {name: replica_config(service) for name, service in found.items()}
    assert sorted(c.replicas.index for c in configs.values()) == [0, 1, 2]
    assert {c.replicas.count for c in configs.values()} == {3}
    data = [v for s in found.values() for v in s["volumes"] if v.endswith(":/data")]
    assert len(set(data)) == 3  # logs and exports stay each replica's own
    for config in configs.values():
        assert config.storage.postgres and config.telegram.active
        assert config.telegram.webhook_secret == DOTENV["TELEGRAM_WEBHOOK_SECRET"]
        assert config.telegram.webhook.url == "https://bot.example.org/telegram"
        assert config.telegram.webhook.listen == "0.0.0.0"  # inside its own container
        assert config.home == Path("/data") and config.skills.dir == Path("/skills")
    for service in found.values():  # SIGTERM: the drain fits before Docker's SIGKILL
        grace = float(service["stop_grace_period"].removesuffix("s"))
        assert grace >= next(iter(configs.values())).shutdown_grace + 5


def test_the_proxy_balances_the_webhook_path_over_the_replicas_health_checked(
    compose: dict[str, Any],
) -> None:
    found = replicas(compose)
    configs = [replica_config(service) for service in found.values()]
    [proxy] = [s for s in compose["services"].values() if str(s.get("image")).startswith("caddy")]
    assert "./deploy/Caddyfile:/etc/caddy/Caddyfile:ro" in proxy["volumes"]
    assert set(proxy["depends_on"]) == set(found)
    assert {"80:80", "443:443"} <= set(proxy["ports"])
    site = caddy_site()
    [upstreams] = re.findall(r"^\s*reverse_proxy ([^{\n]+)\{", site, re.MULTILINE)
    ports = {config.telegram.webhook.port for config in configs}
    assert set(upstreams.split()) == {f"{name}:{port}" for name in found for port in ports}
    [path] = {urlsplit(config.telegram.webhook.url or "").path for config in configs}
    assert re.search(rf"^\s*handle {re.escape(path)}\*", site, re.MULTILINE)
    assert re.search(r"^\s*health_uri /healthz$", site, re.MULTILINE)
    [health_port] = {config.health.port for config in configs}
    assert re.search(rf"^\s*health_port {health_port}$", site, re.MULTILINE)
    assert "MNEMO_PUBLIC_HOST" in proxy["environment"] and "{$MNEMO_PUBLIC_HOST}" in site


def test_no_secret_is_written_in_the_files(compose: dict[str, Any]) -> None:
    for name, service in compose["services"].items():
        for key, value in (service.get("environment") or {}).items():
            if SECRET_NAME.search(key):  # only a variable, with no default
                assert re.fullmatch(r"\$\{[A-Z_]+(:\?[^}]*|:-)?\}", str(value)), (name, key)
        url = (service.get("environment") or {}).get("MNEMO_DATABASE_URL")
        if url is not None:
            assert urlsplit(url).password == "${POSTGRES_PASSWORD}"
    everything = COMPOSE.read_text() + caddy_site() + (ROOT / "deploy/replicas.yaml").read_text()
    assert not re.search(r"://[^/\s$]+:[^@\s$]+@", everything)  # no user:password@ literal
    for required in ("POSTGRES_PASSWORD", "TELEGRAM_BOT_TOKEN", "TELEGRAM_WEBHOOK_SECRET"):
        without = {k: v for k, v in DOTENV.items() if k != required}
        with pytest.raises(LookupError, match=f"^{required}: set {required} in .env$"):
            for service in compose["services"].values():  # unset: compose refuses to start
                if "environment" in service:
                    environment(service, without)
