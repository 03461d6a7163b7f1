"""Where state and records live: a state URL is Redis (or memory), Sentinels are host:port pairs that make
the state shared, and the store is SQLite, PostgreSQL or none."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from runguard.config.backends import StateSettings, StoreSettings
from runguard.config.settings import Settings


def test_the_state_url_is_redis_and_an_empty_one_means_memory() -> None:
    assert StateSettings.model_validate({"url": ""}).url is None
    assert StateSettings.model_validate({"url": "unix:///run/redis.sock"}).url == "unix:///run/redis.sock"
    with pytest.raises(ValidationError, match="redis://"):
        StateSettings.model_validate({"url": "memcached://cache"})
    with pytest.raises(ValidationError):
        StateSettings.model_validate({"key_prefix": "rg{team}"})


def test_the_store_is_sqlite_postgresql_or_empty_for_none() -> None:
    assert StoreSettings.model_validate({"database_url": ""}).database_url == ""
    with pytest.raises(ValidationError, match="sqlite"):
        StoreSettings.model_validate({"database_url": "mysql://db/records"})


def test_sentinels_are_host_port_pairs_and_make_the_state_shared() -> None:
    from runguard.config.loader import load_settings

    loaded = load_settings(environ={"RUNGUARD_STATE__SENTINELS": "[127.0.0.1:26379, sentinel-b:26380]"})
    assert loaded.settings.state.sentinels == ("127.0.0.1:26379", "sentinel-b:26380")
    assert loaded.settings.state.shared and not Settings().state.shared
    with pytest.raises(ValidationError, match="host:port"):
        Settings.model_validate({"state": {"sentinels": ["no-port"]}})
