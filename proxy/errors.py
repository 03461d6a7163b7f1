"""RunGuard's exceptions: a small tree under one base class.

    RunGuardError
    ├── ConfigError          (runguard.config.loader) invalid configuration, names the key
    ├── UpstreamError        the provider could not be reached or answered badly
    │   └── UpstreamTimeout  connect, first-byte or idle timeout
    ├── StateUnavailable     the state backend (Redis) failed or timed out
    └── BreakerOpen          a breaker is open; carries the notice for the synthetic response

Parse failures are not exceptions: adapters return records with `parse_error`
set and the request is forwarded untouched (fail open).
"""

from __future__ import annotations


class RunGuardError(Exception):
    """Base class of every error RunGuard raises on purpose."""


class UpstreamError(RunGuardError):
    """The upstream could not be reached, or broke off mid-response."""


class UpstreamTimeout(UpstreamError):
    """The upstream did not connect, answer, or continue a stream in time."""


class StateUnavailable(RunGuardError):
    """The state backend did not answer in time or failed."""


class BreakerOpen(RunGuardError):
    """A breaker is open for this run, key, or key and model."""
