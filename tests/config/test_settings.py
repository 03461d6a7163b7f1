"""The typed settings: the defaults the docs promise, every field documented, unknown keys and bad values
refused with a reason, and settings that cannot change once loaded."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import BaseModel, ValidationError

from runguard.config.settings import (
    BreakerSettings,
    ServerSettings,
    Settings,
    check_tenants,
)

HASH_A, HASH_B = "k_0123456789abcdef", "k_fedcba9876543210"


def _models(model: type[BaseModel]) -> list[type[BaseModel]]:
    found = [model]
    for info in model.model_fields.values():
        inner = info.annotation
        if isinstance(inner, type) and issubclass(inner, BaseModel):
            found += _models(inner)
    return found


def _refused(data: dict[str, Any]) -> str:
    with pytest.raises(ValidationError) as raised:
        Settings.model_validate(data)
    return str(raised.value)


def test_every_setting_has_a_description_for_config_show() -> None:
    undocumented = [
        f"{model.__name__}.{name}"
        for model in _models(Settings)
        for name, info in model.model_fields.items()
        if not info.description and not (isinstance(info.annotation, type) and issubclass(info.annotation, BaseModel))
    ]
    assert undocumented == []


def test_the_defaults_are_the_documented_ones() -> None:
    settings = Settings()
    assert (settings.server.host, settings.server.port) == ("127.0.0.1", 8787)
    assert settings.upstreams.openai == "https://api.openai.com"
    assert settings.upstreams.gemini == "https://generativelanguage.googleapis.com"
    assert (settings.runs.run_header, settings.runs.agent_header) == ("X-Run-Id", "X-Agent-Name")
    assert (settings.state.url, settings.state.fail_closed) == (None, False)
    assert (settings.store.database_url, settings.store.record_bodies) == ("sqlite+aiosqlite:///runguard.db", False)
    assert (settings.guard.shadow, settings.guard.unreadable, settings.guard.gemini_error_status) == (
        False,
        "forward",
        429,
    )
    assert settings.telemetry.enabled is None and settings.telemetry.capture_content is False


def test_unknown_keys_are_refused_in_every_section() -> None:
    assert "extra" in _refused({"servr": {}}).lower()
    assert "extra" in _refused({"server": {"prot": 1}}).lower()
    assert "extra" in _refused({"guard": {"breaker": {"cooldown": 1}}}).lower()


def test_settings_cannot_change_once_loaded() -> None:
    settings = Settings()
    with pytest.raises(ValidationError):
        settings.server.port = 1  # type: ignore[misc]


@pytest.mark.parametrize("url", ["api.openai.com", "", "ftp://host", "http://", "http://host:port", "http://[::1"])
def test_an_upstream_must_be_an_http_url_with_a_host(url: str) -> None:
    assert "expected an http:// or https:// URL with a host" in _refused({"upstreams": {"openai": url}})


def test_webhooks_must_be_http_urls() -> None:
    assert "hooks.slack.com" in _refused({"alerts": {"webhooks": ["hooks.slack.com/T0"]}})
    assert Settings.model_validate({"alerts": {"webhooks": ["https://hooks.slack.com/T0"]}}).alerts.webhooks


def test_admin_hosts_read_from_one_comma_separated_string() -> None:
    assert ServerSettings.model_validate({"admin_hosts": "a.internal, b:8080,,"}).admin_hosts == (
        "a.internal",
        "b:8080",
    )
    assert ServerSettings.model_validate({"admin_hosts": ["x"]}).admin_hosts == ("x",)


def test_a_breaker_s_cooldown_cannot_exceed_its_cap() -> None:
    with pytest.raises(ValidationError, match=r"cooldown_seconds \(1000\) is more than max_cooldown_seconds \(900\)"):
        BreakerSettings.model_validate({"cooldown_seconds": 1000})
    assert BreakerSettings.model_validate({"cooldown_seconds": 900}).cooldown_seconds == 900


def test_tenants_name_key_hashes_each_in_one_tenant() -> None:
    tenants = {"team-a": (HASH_A,), "team.b": (HASH_B,)}
    assert check_tenants(tenants) == tenants
    assert Settings.model_validate({"runs": {"tenants": {"team-a": [HASH_A]}}}).runs.tenants == {"team-a": (HASH_A,)}
    with pytest.raises(ValueError, match="in two tenants"):
        check_tenants({"a": (HASH_A,), "b": (HASH_A,)})
    with pytest.raises(ValueError, match="is not a key hash"):
        check_tenants({"a": ("sk-live-key",)})
    for name in ("k_team", "-team", "has space"):
        with pytest.raises(ValueError, match="tenant name"):
            check_tenants({name: ()})


@pytest.mark.parametrize(
    "data",
    [
        {"server": {"port": 70000}},
        {"server": {"max_body_bytes": 0}},
        {"guard": {"unreadable": "drop"}},
        {"guard": {"gemini_error_status": 500}},
        {"runs": {"run_header": ""}},
        {"log": {"level": "verbose"}},
        {"telemetry": {"protocol": "udp"}},
    ],
)
def test_out_of_range_values_are_refused(data: dict[str, Any]) -> None:
    section = next(iter(data))
    assert section in _refused(data)
