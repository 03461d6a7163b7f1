"""Detectors: each detector's effective settings (defaults under `guard.detectors`), and what every
override in `guard.overrides` changes for its keys and models."""

from __future__ import annotations

import inspect
from typing import Any

from aiohttp import web
from pydantic import BaseModel

from runguard.proxy.admin.ui.html import Html, esc, href, layout, link, table, tag
from runguard.proxy.admin.ui.routes import UiContext


def _value(value: Any) -> str:
    return str(value.value) if hasattr(value, "value") else str(value)


def _differences(base: BaseModel, other: BaseModel) -> dict[str, Any]:
    return {
        name: getattr(other, name) for name in type(base).model_fields if getattr(base, name) != getattr(other, name)
    }


async def page(request: web.Request, ctx: UiContext) -> Html:
    effective = ctx.policy.effective("", "")
    shadow = ctx.settings.guard.shadow
    parts = [tag("p", "Shadow mode is on: every detector only warns.", class_="notice")] if shadow else []
    overrides = ctx.settings.guard.overrides
    index = [link(f"#{d.name}", d.name) for d in ctx.policy.detectors]
    parts.append(tag("nav", Html(" · ".join(index)), aria_label="detectors", class_="toc"))
    for detector in ctx.policy.detectors:
        config = effective[detector.name]
        doc = (inspect.getdoc(inspect.getmodule(detector)) or "").split("\n\n")[0].replace("`", "")
        rows = []
        for name, info in type(config).model_fields.items():
            default = info.get_default(call_default_factory=True)
            value = getattr(config, name)
            changed = "configured" if value != default else ""
            rows.append([tag("code", name), _value(value), _value(default), changed, info.description or ""])
        changes = []
        for override in overrides:
            custom = ctx.policy.effective(override.key or "", override.model or "")[detector.name]
            diff = _differences(config, custom)
            if diff and (override.key or override.model):
                who = ", ".join(f"{k} {v}" for k, v in (("key", override.key), ("model", override.model)) if v)
                changes.append([who, ", ".join(f"{k} = {_value(v)}" for k, v in diff.items())])
        section = Html(
            tag("h2", detector.name, id=detector.name)
            + tag("p", doc)
            + tag("p", link(href("runs", detector=detector.name), f"runs with a {detector.name} trip or warning"))
            + table(["setting", "effective", "default", "", "description"], rows, class_="settings")
            + (table(["override for", "changes"], changes, caption="per key and model") if changes else Html(""))
        )
        parts.append(tag("section", section, class_="detector"))
    return layout("Detectors", "detectors", Html("".join(esc(part) for part in parts)))
