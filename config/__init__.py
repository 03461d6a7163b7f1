"""config: typed settings, their loading (CLI > env > file > defaults), shipped price and model tables.

Its face is `__all__`, each name imported on first use (`runguard.proxy.core.faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runguard.proxy.core.faces import lazy_face

if TYPE_CHECKING:
    from runguard.config.backends import StoreSettings
    from runguard.config.compatible import CompatibleUpstream, ModelPrice
    from runguard.config.loader import ConfigError, LoadedSettings, load_settings, load_yaml, read_text
    from runguard.config.settings import (
        AlertSettings,
        BreakerSettings,
        GuardSettings,
        Override,
        ServerSettings,
        Settings,
        TelemetrySettings,
        UpstreamSettings,
    )

HOMES = {
    "AlertSettings": "settings",
    "BreakerSettings": "settings",
    "CompatibleUpstream": "compatible",
    "ConfigError": "loader",
    "GuardSettings": "settings",
    "LoadedSettings": "loader",
    "ModelPrice": "compatible",
    "Override": "settings",
    "ServerSettings": "settings",
    "Settings": "settings",
    "StoreSettings": "backends",
    "TelemetrySettings": "settings",
    "UpstreamSettings": "settings",
    "load_settings": "loader",
    "load_yaml": "loader",
    "read_text": "loader",
}
__all__ = [
    "AlertSettings",
    "BreakerSettings",
    "CompatibleUpstream",
    "ConfigError",
    "GuardSettings",
    "LoadedSettings",
    "ModelPrice",
    "Override",
    "ServerSettings",
    "Settings",
    "StoreSettings",
    "TelemetrySettings",
    "UpstreamSettings",
    "load_settings",
    "load_yaml",
    "read_text",
]

__getattr__ = lazy_face(__name__, HOMES)
