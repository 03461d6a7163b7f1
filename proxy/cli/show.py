"""`runguard-proxy show RUN`: one run, as a conversation when its bodies were recorded.

With `store.record_bodies` on, each request shows what the agent sent (the
new user message, the tool results it returns) and what came back (text,
tool calls with their arguments, handoffs), read from the recorded bodies the
way the dashboard reads them (`runguard.proxy.admin.ui.content`). Without recorded
bodies it shows the timeline (agents, models, tokens, tool names) and says
what is missing and how to record it. Trips follow, with their evidence.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Annotated, Any

import orjson
import typer
from rich.console import Console
from rich.padding import Padding
from rich.rule import Rule
from rich.text import Text

from runguard.proxy.cli.loading import ConfigOption, load
from runguard.proxy.cli.render import Column, ago, console, echo_json, fail, print_fitted, when
from runguard.proxy.cli.store import JsonOption, read_store
from runguard.proxy.guard import spend

if TYPE_CHECKING:
    from runguard.proxy.store import StoreReader

PER_PAGE = 200
NOT_RECORDED = (
    "Message content was not recorded for this run, so only tool names are shown. To record request and "
    "response bodies (API keys removed) of new runs, set store.record_bodies: true in the config (or "
    "RUNGUARD_RECORD_BODIES=1) and restart the proxy. Bodies hold your prompts and tool results: record them "
    "only where that is allowed."
)
_STYLES = {
    "system": "magenta",
    "user": "green",
    "tool result": "cyan",
    "assistant": "bold",
    "tool call": "yellow",
    "handoff": "blue",
    "error": "red",
}


async def _detail(reader: StoreReader, run_id: str) -> dict[str, Any] | None:
    """The run with every request (page after page) and, where recorded, what each said."""
    from runguard.proxy.admin.ui.content import request_entries, response_entries

    detail, number, position = None, 1, 0
    while True:
        page = await reader.runs.detail(run_id, number, PER_PAGE)
        if page is None:
            return detail
        if detail is None:
            detail = {"run": page["run"], "requests": [], "trips": page["trips"], "bodies_recorded": page["recorded"]}
        for step in page["requests"]:
            body = page["bodies"].get(step.pop("id"))
            step["content"] = None
            if body is not None:
                sent = request_entries(step["api"], bytes(body["request"]), first=position == 0)
                answered = response_entries(step["api"], bytes(body["response"]))
                step["content"] = {
                    "sent": [{"kind": e.kind, "title": e.title, "text": e.text} for e in sent],
                    "answered": [{"kind": e.kind, "title": e.title, "text": e.text} for e in answered],
                }
            detail["requests"].append(step)
            position += 1
        if not page["more"]:
            return detail
        number += 1


def _summary(out: Console, run: dict[str, Any], now: float) -> None:
    out.print(Text.assemble(("run ", "bold"), run["run_id"]), soft_wrap=True)  # whole, to copy
    lines = [
        ("status", str(run["status"])),
        ("key", run["key_hash"]),
        ("agents", ", ".join(run["agents"]) or "-"),
        (
            "spend",
            f"{spend(run['usd'], run['unpriced'])} over {run['requests']} requests, "
            f"tokens {run['input_tokens']} in / {run['output_tokens']} out",
        ),
        ("started", f"{when(run['first_seen'])}, last request {ago(run['last_seen'], now)}"),
    ]
    if run["trips"] or run["warnings"]:
        lines.append(
            (
                "trips",
                f"{run['trips']} blocking, {run['warnings']} warnings, "
                f"avoided (est.) {spend(run['usd_avoided'], run['unpriced'])}",
            )
        )
    for label, value in lines:
        out.print(Text.assemble((f"{label:<8}", "bold"), value))


def _step_heading(step: dict[str, Any], start: float) -> Text:
    status = f"blocked: {step['blocked_by']}" if step["blocked_by"] else str(step["status"] or step["error"] or "")
    facts = [
        f"#{step['index']}",
        f"+{step['at'] - start:.1f}s",
        step["agent"] or "?",
        f"{step['model']} ({step['provider']})",
        f"{step['input_tokens']}/{step['output_tokens']} tokens",
        spend(step["usd"]),
        status,
    ]
    return Text(" · ".join(fact for fact in facts if fact))


def _entry(entry: dict[str, Any]) -> Padding:
    label = entry["kind"] if entry["kind"] in ("user", "assistant", "system") else f"{entry['kind']} {entry['title']}"
    return Padding(Text.assemble((label, _STYLES.get(entry["kind"], "")), ": ", entry["text"]), (0, 0, 0, 2))


def _conversation(out: Console, detail: dict[str, Any]) -> None:
    start = detail["run"]["first_seen"]
    for step in detail["requests"]:
        out.print(Rule(_step_heading(step, start), align="left"))
        content = step["content"]
        if content is None:
            calls = ", ".join(step["tool_calls"])
            out.print(Padding(Text(f"(body not recorded) tool calls: {calls or '-'}"), (0, 0, 0, 2)))
        else:
            for entry in [*content["sent"], *content["answered"]]:
                out.print(_entry(entry))
        if step["handoff_to"]:
            out.print(Padding(Text(f"handoff to {step['handoff_to']}"), (0, 0, 0, 2)))
        verdicts = ", ".join(f"{v['detector']}: {v['action']}" for v in step.get("verdicts") or [])
        if verdicts:
            out.print(Padding(Text(f"verdicts: {verdicts}", style="red"), (0, 0, 0, 2)))


def _timeline(out: Console, detail: dict[str, Any]) -> None:
    start = detail["run"]["first_seen"]

    def status(step: dict[str, Any]) -> str:
        return f"blocked: {step['blocked_by']}" if step["blocked_by"] else str(step["status"] or step["error"] or "")

    columns = [
        Column("#", lambda s: str(s["index"]), whole=True, right=True),
        Column("at", lambda s: f"+{s['at'] - start:.1f}s", priority=90, right=True, one_line=True),
        Column("agent", lambda s: s["agent"], priority=80),
        Column(
            "tool calls",
            lambda s: ", ".join(s["tool_calls"]) + (f" -> {s['handoff_to']}" if s["handoff_to"] else ""),
            priority=85,
        ),
        Column("status", status, priority=95),
        Column(
            "verdicts", lambda s: ", ".join(f"{v['detector']}:{v['action']}" for v in s["verdicts"] or []), priority=88
        ),
        Column("USD", lambda s: spend(s["usd"]), priority=70, right=True, one_line=True),
        Column("tokens in/out", lambda s: f"{s['input_tokens']}/{s['output_tokens']}", priority=60, right=True),
        Column("model", lambda s: s["model"], priority=50),
        Column("provider", lambda s: s["provider"], priority=45),
    ]
    print_fitted(out, columns, detail["requests"], title="requests")
    out.print(Text(NOT_RECORDED, style="yellow"))


def _trips(out: Console, trips: list[dict[str, Any]], unpriced: int) -> None:
    """The run's trips; `unpriced`: how many of its requests have no price (spends say so, never $0)."""
    for trip in trips:
        out.print(
            Text.assemble(
                (f"{'trip' if trip['action'] == 'block' else 'warning'} at request {trip['request_index']}: ", "bold"),
                (trip["detector"], "red"),
                f" ({trip['action']}) {trip['reason']}",
            )
        )
        spent, avoided = spend(trip["usd_so_far"], unpriced), spend(trip["usd_avoided"], unpriced)
        facts = f"spent so far {spent}, cost avoided (est.) {avoided}"
        evidence = orjson.dumps(trip["evidence"], default=str).decode()
        out.print(Padding(Text(f"{facts}\nevidence: {evidence[:600]}"), (0, 0, 0, 2)))


def register(app: typer.Typer) -> None:
    @app.command()
    def show(
        run_id: Annotated[str, typer.Argument(metavar="RUN_ID", help="The run to show (an id from `runs`).")],
        as_json: JsonOption = False,
        config: ConfigOption = None,
    ) -> None:
        """One run: its totals, its conversation request by request (when bodies were recorded), its trips."""
        settings = load(config).settings
        detail = read_store(settings, lambda reader: _detail(reader, run_id))
        if detail is None:
            raise fail(f"no run {run_id!r} in the record store")
        if as_json:
            echo_json(detail)
            return
        out = console()
        _summary(out, detail["run"], time.time())
        if detail["bodies_recorded"]:
            _conversation(out, detail)
        else:
            _timeline(out, detail)
        if detail["trips"]:
            out.print(Rule("trips", align="left"))
            _trips(out, detail["trips"], detail["run"]["unpriced"])
