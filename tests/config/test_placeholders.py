"""A secret setting left at an example's placeholder stops the proxy at start, named, its value not shown."""

from __future__ import annotations

import pytest

from runguard.config.loader import ConfigError, load_settings
from runguard.config.placeholders import is_placeholder


@pytest.mark.parametrize(
    "value", ["change-me", "change-me-to-a-long-random-string", "CHANGE_ME", "<your-admin-token>", "password", "xxxx"]
)
def test_placeholders_are_known(value: str) -> None:
    assert is_placeholder(value)


@pytest.mark.parametrize("value", ["t0ken-s3cret", "12345", "test-salt", "9f86d081884c7d659a2feaa0c55ad015"])
def test_real_looking_secrets_are_not_placeholders(value: str) -> None:
    assert not is_placeholder(value)


@pytest.mark.parametrize(
    ("env", "key"),
    [
        ({"RUNGUARD_ADMIN_TOKEN": "change-me-admin-token"}, "server.admin_token"),
        ({"RUNGUARD_KEY_SALT": "change-me-to-a-long-random-string"}, "runs.key_salt"),
        ({"RUNGUARD_DATABASE_URL": "postgresql+asyncpg://rg:change-me@db:5432/rg"}, "store.database_url"),
        ({"RUNGUARD_STATE_URL": "redis://:changeme@redis:6379/0"}, "state.url"),
    ],
)
def test_a_placeholder_secret_is_refused_by_name(env: dict[str, str], key: str) -> None:
    with pytest.raises(ConfigError, match=rf"^{key}.*placeholder") as caught:
        load_settings(environ=env)
    assert "change" not in str(caught.value).replace("such as change-me", "")  # the value itself is not echoed
