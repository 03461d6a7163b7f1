"""observe: Prometheus metrics, the access log, webhook alerts, spend per key, OpenTelemetry.

Its face is `__all__`, each name imported on first use (`runguard.proxy.core.faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runguard.proxy.core.faces import lazy_face

if TYPE_CHECKING:
    from runguard.proxy.observe.access_log import AccessLog
    from runguard.proxy.observe.alerts import Alerts, where
    from runguard.proxy.observe.metrics import Metrics
    from runguard.proxy.observe.spend_metrics import SpendMetrics

HOMES = {
    "AccessLog": "access_log",
    "Alerts": "alerts",
    "Metrics": "metrics",
    "SpendMetrics": "spend_metrics",
    "where": "alerts",
}
__all__ = [
    "AccessLog",
    "Alerts",
    "Metrics",
    "SpendMetrics",
    "where",
]

__getattr__ = lazy_face(__name__, HOMES)
