"""The detector catalogue as Markdown, generated from the registry.

Each detector's module docstring (first paragraph) says what it catches; its
config model's field descriptions and defaults are the settings reference.
`docs/detectors.md` is this output (a test keeps the two equal), and
`runguard-proxy detectors --markdown` prints it
(`runguard-proxy detectors` renders `entries()` for the terminal).
"""

from __future__ import annotations

import inspect
import json
from dataclasses import dataclass
from typing import Any

from pydantic.fields import FieldInfo

from runguard.detectors.registry.listing import DETECTOR_CLASSES
from runguard.detectors.support import Detector, guide, measured

HEADER = """# Detectors

Generated from the code (`runguard-proxy detectors --markdown`); do not edit by hand.

Every detector has `action` (`block`, `nudge`, `warn`, `off`) and `response`, what a block answers:

- `auto` (the default): by client family, the answer that ends the client that sent the request and shows
  the person running it the reason (see [stopping.md](stopping.md#what-each-client-sees));
- `error`: a provider-native 429 the SDK does not retry;
- `refuse`: the same error with status 400, for clients that retry any 429 or hide its body;
- `stop`: a normal completion that ends the agent's turn.

Set them under `guard.detectors.<name>` in the config, per API key or model under `guard.overrides`, or
make them stricter for one run with `X-RunGuard-Limit: <name>.<field>=<value>` (fields marked *tightenable*).
`guard.shadow: true` turns every block into a warning, to calibrate on real traffic first.
`action: nudge` first sends the model a note, then blocks if the pattern goes on (see Nudge, below).
"""


_PER_THREAD = (
    " Judges each conversation on its own: a thread nested in a run (a sub-agent a tool call started,"
    " without `X-Run-Id`; with it, a task a leader delegated to a member or an agent tool) keeps its own state"
    " for it, while the run's caps count every thread."
)


_STAYS_STOPPED = (
    "A run it stops stays stopped until it is reset or forgotten: every later request of the run, a client's"
    " retry after any wait included, gets the same answer locally (see Breakers)."
)
_HEALS = "Its breaker closes by itself: after the cooldown, one probe request is let through (see Breakers)."
_NO_NUDGE = " `nudge` is not available (the model cannot change what it judges)."


def _after(cls: type[Detector[Any]]) -> str:
    """What follows a block by this detector (see the Breakers and Nudge sections)."""
    return (_STAYS_STOPPED if cls.stays_stopped else _HEALS) + ("" if cls.nudges else _NO_NUDGE)


_REASONED = ("Defaults.", "False positives.")


@dataclass(frozen=True, slots=True)
class Setting:
    name: str
    default: Any  # as JSON would show it
    description: str
    tightenable: bool  # a run may make it stricter with X-RunGuard-Limit


@dataclass(frozen=True, slots=True)
class Entry:
    """One detector as the catalogue shows it."""

    name: str
    summary: str  # what it catches (its module docstring's first paragraph)
    settings: tuple[Setting, ...]
    after: str = ""  # what follows a block by it (`_after`)
    reasoning: tuple[str, ...] = ()  # its docstring's "Defaults." and "False positives." paragraphs


def _value(info: FieldInfo) -> Any:
    value: Any = info.get_default(call_default_factory=True)
    if hasattr(value, "value"):
        value = value.value
    return json.loads(json.dumps(value, default=str))


def entry(cls: type[Detector[Any]]) -> Entry:
    module = inspect.getmodule(cls)
    doc = inspect.cleandoc(module.__doc__ or "") if module else ""
    summary = doc.split("\n\n")[0].replace("\n", " ")
    if cls.per_thread:
        summary += _PER_THREAD
    settings = []
    for name, info in cls.Config.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        description = (info.description or "").replace("\n", " ")
        settings.append(Setting(name, _value(info), description, bool(extra.get("tighten"))))
    # Paragraphs of the docstring that reason about the defaults and false positives are reference too.
    reasoning = tuple(p.replace("\n", " ") for p in doc.split("\n\n")[1:] if p.startswith(_REASONED))
    return Entry(cls.name, summary, tuple(settings), _after(cls), reasoning)


def entries() -> list[Entry]:
    """Every detector, in the registry's order."""
    return [entry(cls) for cls in DETECTOR_CLASSES]


def _section(item: Entry) -> str:
    lines = [f"## `{item.name}`", "", item.summary, "", item.after, ""]
    for paragraph in item.reasoning:
        lines += [paragraph, ""]
    lines += ["| setting | default | |", "|---|---|---|"]
    for setting in item.settings:
        tight = " *tightenable*" if setting.tightenable else ""
        description = setting.description.replace("|", "\\|")
        lines.append(f"| `{setting.name}` | `{json.dumps(setting.default)}` | {description}{tight} |")
    return "\n".join(lines)


def render() -> str:
    return (
        HEADER
        + "\n"
        + "\n\n".join(_section(item) for item in entries())
        + "\n\n"
        + measured.render()
        + "\n\n"
        + "\n".join((guide.NUDGE, guide.BREAKERS, guide.EVIDENCE))
    )
