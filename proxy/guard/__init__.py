"""guard: deciding whether a run goes on, before and after each model request.

The guard and the passage and ticket of one request, state batches, decisions (breakers, trips, local
answers), accounting, nudges, judging; by phase in sub-folders: which detectors run and with what settings
(`lineup/`), what a request costs (`costs/`), what a finished request leaves (`records/`), replay of
recorded traffic (`offline/`).

Its face is `__all__`, each name imported on first use (`runguard.proxy.core.faces`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from runguard.proxy.core.faces import lazy_face

if TYPE_CHECKING:
    from runguard.proxy.guard.breaker import BreakerRecord
    from runguard.proxy.guard.costs.pricing import ModelTables
    from runguard.proxy.guard.costs.spending import costs_money
    from runguard.proxy.guard.costs.upstream_prices import spend
    from runguard.proxy.guard.guard import Guard
    from runguard.proxy.guard.lineup.policy import SHORT_HEADERS, Policy, Tightening, tightening_from
    from runguard.proxy.guard.nudge import with_note
    from runguard.proxy.guard.observer import FanOut, NullObserver, Observer
    from runguard.proxy.guard.offline.replay import ReplayReport, from_rows, read_file, replay
    from runguard.proxy.guard.offline.replay_summary import Summary
    from runguard.proxy.guard.passage import Passage
    from runguard.proxy.guard.records.rebuild import Rebuilt, rebuild
    from runguard.proxy.guard.ticket import Ticket, scope_ids

HOMES = {
    "BreakerRecord": "breaker",
    "FanOut": "observer",
    "Guard": "guard",
    "ModelTables": "costs.pricing",
    "NullObserver": "observer",
    "Observer": "observer",
    "Passage": "passage",
    "Policy": "lineup.policy",
    "Rebuilt": "records.rebuild",
    "ReplayReport": "offline.replay",
    "SHORT_HEADERS": "lineup.policy",
    "Summary": "offline.replay_summary",
    "Ticket": "ticket",
    "Tightening": "lineup.policy",
    "costs_money": "costs.spending",
    "from_rows": "offline.replay",
    "read_file": "offline.replay",
    "rebuild": "records.rebuild",
    "replay": "offline.replay",
    "scope_ids": "ticket",
    "spend": "costs.upstream_prices",
    "tightening_from": "lineup.policy",
    "with_note": "nudge",
}
__all__ = [
    "SHORT_HEADERS",
    "BreakerRecord",
    "FanOut",
    "Guard",
    "ModelTables",
    "NullObserver",
    "Observer",
    "Passage",
    "Policy",
    "Rebuilt",
    "ReplayReport",
    "Summary",
    "Ticket",
    "Tightening",
    "costs_money",
    "from_rows",
    "read_file",
    "rebuild",
    "replay",
    "scope_ids",
    "spend",
    "tightening_from",
    "with_note",
]

__getattr__ = lazy_face(__name__, HOMES)
