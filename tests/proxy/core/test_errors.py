"""The exception tree: one base class catches every error RunGuard raises on purpose, and the errors carry
what their handlers need (a refused handshake's status, a lost batch's pending results)."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import pytest

from runguard.config.loader import ConfigError
from runguard.proxy.core.errors import (
    RunGuardError,
    StateUnavailable,
    UpstreamError,
    UpstreamRefused,
    UpstreamTimeout,
)
from runguard.proxy.core.ops import OpResult


@pytest.mark.parametrize(
    ("error", "parent"),
    [
        (ConfigError, RunGuardError),
        (UpstreamError, RunGuardError),
        (UpstreamTimeout, UpstreamError),
        (UpstreamRefused, UpstreamError),
        (StateUnavailable, RunGuardError),
    ],
)
def test_the_tree_is_the_one_the_docstring_draws(error: type[Exception], parent: type[Exception]) -> None:
    assert issubclass(error, parent)


def test_a_timeout_is_caught_where_the_relay_catches_upstream_errors() -> None:
    with pytest.raises(UpstreamError, match="idle"):
        raise UpstreamTimeout("idle timeout after 30 s")


def test_a_config_error_is_also_a_value_error_for_pydantic_validators() -> None:
    assert issubclass(ConfigError, ValueError)


def test_a_refused_handshake_carries_the_status_the_provider_answered() -> None:
    error = UpstreamRefused("handshake refused", 401)
    assert (str(error), error.status) == ("handshake refused", 401)


async def test_state_unavailable_without_a_lost_reply_has_nothing_pending() -> None:
    assert StateUnavailable("redis down").pending is None


async def test_state_unavailable_hands_over_the_results_of_a_batch_that_ran_after_all() -> None:
    async def resent() -> Sequence[OpResult] | None:
        await asyncio.sleep(0)
        return [1.0, "x"]

    error = StateUnavailable("reply lost", pending=resent())
    assert error.pending is not None
    assert await error.pending == [1.0, "x"]
