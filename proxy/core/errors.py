"""RunGuard's exceptions: a small tree under one base class.

    RunGuardError
    ├── ConfigError          invalid configuration, names the key (raised by runguard.config.loader)
    ├── UpstreamError        the provider could not be reached or answered badly
    │   ├── UpstreamTimeout  connect, first-byte or idle timeout
    │   └── UpstreamRefused  the provider answered a WebSocket handshake with an HTTP status
    └── StateUnavailable     the state backend (Redis) failed or timed out
        └── StateFull        a tenant's runs fill its share of the in-memory state with stops

Parse failures are not exceptions: adapters return records with `parse_error`
set and the request is forwarded untouched (fail open).
"""

from __future__ import annotations

from collections.abc import Awaitable, Sequence

from runguard.proxy.core.ops import OpResult


class RunGuardError(Exception):
    """Base class of every error RunGuard raises on purpose."""


class ConfigError(RunGuardError, ValueError):
    """A configuration value is invalid; the message names the key.

    It lives here, not in the config loader, so that detectors (which validate
    their own settings) raise it without importing the config package.
    """


class UpstreamError(RunGuardError):
    """The upstream could not be reached, or broke off mid-response."""


class UpstreamTimeout(UpstreamError):
    """The upstream did not connect, answer, or continue a stream in time."""


class UpstreamRefused(UpstreamError):
    """The upstream answered a WebSocket handshake with `status` instead of switching protocols."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


class StateUnavailable(RunGuardError):
    """The state backend did not answer in time or failed.

    `pending` is set when the batch may have run all the same (its reply was
    lost: a timeout, a broken connection). The backend goes on sending it under
    its marker, and `pending` gives its results once it is known to have run
    exactly once, or None if that could not be known while the marker lived.
    """

    def __init__(self, message: str, pending: Awaitable[Sequence[OpResult] | None] | None = None) -> None:
        super().__init__(message)
        self.pending = pending


class StateFull(StateUnavailable):
    """A new run of a tenant whose runs in memory are at its bound, every one of them held (stopped, or
    carrying spend): nothing of it may be dropped before its idle time, so the run is refused, not
    let through unguarded (whatever `state.fail_closed` says)."""
