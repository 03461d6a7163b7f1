from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from runguard.config.loader import ConfigError, load_settings, load_yaml
from runguard.detectors.registry import default_detectors, validate_config
from runguard.detectors.support.base import Action
from runguard.proxy.guard.lineup.policy import Policy


def test_precedence_cli_over_env_over_file_over_default(tmp_path: Path) -> None:
    file = tmp_path / "rg.yaml"
    file.write_text("server: {port: 9000, host: 127.0.0.2}\nupstreams: {openai: http://file}\n")
    env = {"RUNGUARD_OPENAI_UPSTREAM": "http://env", "RUNGUARD_SERVER__PORT": "9100"}
    loaded = load_settings(config_file=file, environ=env, cli={"server.port": 9200, "server.host": None})
    s = loaded.settings
    assert (s.server.port, s.server.host, s.upstreams.openai) == (9200, "127.0.0.2", "http://env")
    assert s.upstreams.gemini == "https://generativelanguage.googleapis.com"
    assert loaded.sources["server.port"] == "cli"
    assert loaded.sources["upstreams.openai"] == "env"
    assert loaded.sources["server.host"] == f"file:{file}"


def test_settings_outside_any_section_have_environment_variables(tmp_path: Path) -> None:
    file = tmp_path / "rg.yaml"
    file.write_text("pricing_file: /etc/runguard/pricing.yaml\nmodels_file: /etc/runguard/models.yaml\n")
    env = {"RUNGUARD_PRICING_FILE": "/run/prices.yaml", "RUNGUARD_MODELS_FILE": "2026"}
    loaded = load_settings(config_file=file, environ=env)
    assert (loaded.settings.pricing_file, loaded.settings.models_file) == ("/run/prices.yaml", "2026")
    assert loaded.sources["pricing_file"] == loaded.sources["models_file"] == "env"


def test_invalid_value_names_the_key(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=r"server\.port"):
        load_settings(environ={"RUNGUARD_SERVER__PORT": "not-a-port"})
    with pytest.raises(ConfigError, match=r"server\.bogus"):
        load_settings(environ={"RUNGUARD_SERVER__BOGUS": "1"})
    with pytest.raises(ConfigError, match="RUNGUARD_WHATEVER"):
        load_settings(environ={"RUNGUARD_WHATEVER": "1"})
    bad = tmp_path / "bad.yaml"
    bad.write_text("- a list\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_settings(config_file=bad, environ={})


@pytest.mark.parametrize("content", [None, b"server: {port: 9000}\n\xff\n", "directory"])
def test_a_config_file_that_cannot_be_read_names_the_file_and_where_it_came_from(
    tmp_path: Path, content: bytes | str | None
) -> None:
    path = tmp_path / "runguard.yaml"
    if content == "directory":
        path.mkdir()
    elif isinstance(content, bytes):
        path.write_bytes(content)
    with pytest.raises(ConfigError, match=f"^--config: .*{path}"):
        load_settings(config_file=path, environ={})
    with pytest.raises(ConfigError, match=f"^RUNGUARD_CONFIG: .*{path}"):
        load_settings(environ={"RUNGUARD_CONFIG": str(path)})


@pytest.mark.parametrize(
    ("variable", "value", "key"),
    [
        ("RUNGUARD_STATE_URL", "http://redis:6379", "state.url"),
        ("RUNGUARD_STATE__KEY_PREFIX", "rg{team}", "state.key_prefix"),
        ("RUNGUARD_DATABASE_URL", "mysql://db/records", "store.database_url"),
        ("RUNGUARD_OPENAI_UPSTREAM", "api.openai.com", "upstreams.openai"),
        ("RUNGUARD_GEMINI_UPSTREAM", "", "upstreams.gemini"),
        ("RUNGUARD_GEMINI_UPSTREAM", "ftp://generativelanguage.googleapis.com", "upstreams.gemini"),
        ("RUNGUARD_UPSTREAMS__OPENAI", "http://proxy:port", "upstreams.openai"),
        ("RUNGUARD_ALERTS__WEBHOOKS", "[hooks.slack.com/services/T0]", "alerts.webhooks"),
    ],
)
def test_urls_and_the_redis_prefix_are_checked_at_load(variable: str, value: str, key: str) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        load_settings(environ={variable: value})


def test_valid_state_and_store_urls_load() -> None:
    env = {"RUNGUARD_STATE_URL": "rediss://cache:6380/1", "RUNGUARD_DATABASE_URL": "postgresql+asyncpg://db/rg"}
    settings = load_settings(environ=env).settings
    assert settings.state.url == env["RUNGUARD_STATE_URL"]
    assert settings.store.database_url == env["RUNGUARD_DATABASE_URL"]


def test_valid_upstream_and_webhook_urls_load() -> None:
    env = {
        "RUNGUARD_OPENAI_UPSTREAM": "http://127.0.0.1:9000",
        "RUNGUARD_GEMINI_UPSTREAM": "https://gateway.internal/gemini",
        "RUNGUARD_ALERTS__WEBHOOKS": "[https://hooks.slack.com/services/T0]",
    }
    settings = load_settings(environ=env).settings
    assert (settings.upstreams.openai, settings.upstreams.gemini) == (
        env["RUNGUARD_OPENAI_UPSTREAM"],
        env["RUNGUARD_GEMINI_UPSTREAM"],
    )
    assert settings.alerts.webhooks == ("https://hooks.slack.com/services/T0",)


def test_detector_settings_are_validated_with_their_key() -> None:
    def validate(name: str, values: object) -> None:
        if name == "spiral" and isinstance(values, dict) and values.get("threshold") == "high":
            raise ConfigError("spiral.threshold: Input should be a valid number")

    with pytest.raises(ConfigError, match=r"guard\.detectors\.spiral\.threshold"):
        load_settings(environ={"RUNGUARD_GUARD__DETECTORS": "{spiral: {threshold: high}}"}, validate_detectors=validate)


def test_an_unquoted_off_in_a_file_or_the_environment_turns_a_detector_off(tmp_path: Path) -> None:
    # YAML 1.1 (PyYAML's default) reads `off` as the boolean false, which no action accepts.
    file = tmp_path / "runguard.yaml"
    file.write_text("guard:\n  detectors:\n    delegation: {action: off}\n    spiral: {action: warn}\n")
    environ = {"RUNGUARD_GUARD__DETECTORS__HANDOFF_CYCLE__ACTION": "off"}
    settings = load_settings(config_file=file, environ=environ, validate_detectors=validate_config).settings
    lineup = Policy(default_detectors(), settings.guard).lineup("key", "gpt-4o")
    armed = {one.name for one in lineup.armed}
    assert "delegation" not in armed
    assert "handoff_cycle" not in armed
    assert lineup.configs["spiral"].action is Action.WARN


def test_booleans_still_read_as_booleans_in_either_spelling(tmp_path: Path) -> None:
    file = tmp_path / "runguard.yaml"
    file.write_text("guard: {shadow: yes}\nlog: {access_log: false}\n")
    settings = load_settings(config_file=file, environ={"RUNGUARD_STATE__FAIL_CLOSED": "on"}).settings
    assert settings.guard.shadow is True
    assert settings.log.access_log is False
    assert settings.state.fail_closed is True


def test_a_string_setting_keeps_a_word_yaml_1_1_would_turn_into_a_boolean(tmp_path: Path) -> None:
    file = tmp_path / "runguard.yaml"
    file.write_text("state: {key_prefix: no}\n")
    assert load_settings(config_file=file, environ={}).settings.state.key_prefix == "no"


def test_the_config_loader_leaves_pyyamls_own_safe_loader_as_it_was() -> None:
    assert load_yaml("a: off\nb: true") == {"a": "off", "b": True}
    assert yaml.safe_load("a: off\nb: true") == {"a": False, "b": True}  # other users of PyYAML keep YAML 1.1


@pytest.mark.parametrize("name", ["RUNGUARD_ADMIN_TOKEN", "RUNGUARD_SERVER__ADMIN_TOKEN"])
def test_an_environment_value_is_typed_by_its_field_not_by_the_variables_spelling(name: str) -> None:
    env = {name: "12345", "RUNGUARD_RUNS__KEY_SALT": "0x1f", "RUNGUARD_RUNS__RUN_HEADER": "true"}
    settings = load_settings(environ=env).settings
    assert settings.server.admin_token is not None and settings.server.admin_token.get_secret_value() == "12345"
    assert settings.runs.key_salt is not None and settings.runs.key_salt.get_secret_value() == "0x1f"
    assert settings.runs.run_header == "true"
    numbers = load_settings(environ={"RUNGUARD_SERVER__PORT": "9100", "RUNGUARD_PORT": "9200"}).settings
    assert numbers.server.port in (9100, 9200)  # numbers are still numbers, whichever spelling


def test_the_admin_commands_proxy_url_is_not_a_setting() -> None:
    settings = load_settings(environ={"RUNGUARD_PROXY_URL": "http://127.0.0.1:9999"}).settings
    assert settings.server.port == 8787


def test_the_anthropic_upstream_is_set_by_its_contract_names(tmp_path: Path) -> None:
    assert load_settings(environ={}).settings.upstreams.anthropic == "https://api.anthropic.com"
    env = {"RUNGUARD_ANTHROPIC_UPSTREAM": "http://127.0.0.1:9001"}
    assert load_settings(environ=env).settings.upstreams.anthropic == "http://127.0.0.1:9001"
    file = tmp_path / "runguard.yaml"
    file.write_text("upstreams:\n  anthropic: https://gateway.internal/anthropic\n")
    loaded = load_settings(environ={"RUNGUARD_CONFIG": str(file)}).settings.upstreams
    assert loaded.base_url("anthropic", "https://api.anthropic.com") == "https://gateway.internal/anthropic"
    with pytest.raises(ConfigError, match=r"upstreams\.anthropic"):
        load_settings(environ={"RUNGUARD_ANTHROPIC_UPSTREAM": "ftp://api.anthropic.com"})


def test_a_plug_in_provider_s_upstream_has_its_environment_variable(tmp_path: Path) -> None:
    file = tmp_path / "rg.yaml"
    file.write_text("upstreams: {others: {toy: 'http://file:1'}}\n")
    loaded = load_settings(config_file=file, environ={"RUNGUARD_PARROT_UPSTREAM": "http://127.0.0.1:9000/x"})
    upstreams = loaded.settings.upstreams
    assert upstreams.others == {"toy": "http://file:1", "parrot": "http://127.0.0.1:9000/x"}
    assert loaded.sources["upstreams.others.parrot"] == "env"
    assert upstreams.base_url("parrot", "https://default") == "http://127.0.0.1:9000/x"
    assert upstreams.base_url("nobody", "https://default") == "https://default"
    assert upstreams.base_url("openai", "https://default") == "https://api.openai.com"  # its own field


def test_a_plug_in_provider_s_upstream_must_be_a_url() -> None:
    with pytest.raises(ConfigError, match=r"upstreams\.others"):
        load_settings(environ={"RUNGUARD_TOY_UPSTREAM": "toy.example"})
    with pytest.raises(ConfigError, match="unknown environment variable"):
        load_settings(environ={"RUNGUARD_TOY_UPSTREAMS": "http://toy"})
