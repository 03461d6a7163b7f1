"""One run: its totals, breaker, trips with their evidence, and its timeline request by request.

The breaker and live counters come from the shared state (what every replica
enforces), the rest from the store. The reset button posts JSON to the admin
API's reset route (the script `ui.js`); without JavaScript the page shows the
CLI command instead. Content (messages, tool arguments and results) appears
only for requests whose bodies `store.record_bodies` recorded.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any
from urllib.parse import quote

from aiohttp import web

from runguard.proxy.admin import run_state
from runguard.proxy.admin.ui.content import Entry, request_entries, response_entries
from runguard.proxy.admin.ui.evidence import evidence_html
from runguard.proxy.admin.ui.html import Html, badge, dl, esc, join, layout, pager, short, table, tag, tokens, when
from runguard.proxy.admin.ui.routes import NotFound, UiContext, no_store, reader_of
from runguard.proxy.admin.ui.runs_page import page_number
from runguard.proxy.core.ops import Scope
from runguard.proxy.core.safe_text import reset_command
from runguard.proxy.guard import BreakerRecord, breaker, spend
from runguard.proxy.runs import tenants
from runguard.proxy.store import AVOIDED_BASIS, StoreReader

RECORD_HINT = (
    "Message content was not recorded for this run, so only tool names are shown. To keep request and response "
    "bodies (API keys removed) for new runs, set store.record_bodies: true (or RUNGUARD_RECORD_BODIES=1). "
    "Bodies hold your prompts and tool results: store them only where that is allowed."
)


def reset_control(action: str, command: str, label: str) -> Html:
    """A button the script turns into a JSON POST to `action`; without script, the CLI command."""
    return Html(
        f'<div class="reset">{tag("button", label, type="button", data_reset=action, class_="reset-button", hidden="")}'
        f'<span class="reset-result" role="status" aria-live="polite"></span>'
        f"<noscript>{tag('p', Html('Reset from a shell: ' + tag('code', command)))}</noscript></div>"
    )


def _breaker(record: BreakerRecord | None) -> Html:
    view = run_state.breaker_view(record)
    if record is None:
        return tag("p", Html("Breaker: " + tag("strong", "closed", class_="state-closed")), class_="breaker")
    return Html(
        tag("p", Html("Breaker: " + tag("strong", view["state"], class_=f"state-{view['state']}")), class_="breaker")
        + dl(
            {
                "detector": view["detector"],
                "reason": view["reason"],
                "opened": when(view["opened_at"]),
                "at request": view["request_index"],
                "times tripped": view["trips"],
            }
        )
    )


def _entries(entries: list[Entry]) -> Html:
    items = []
    for entry in entries:
        title = f"{entry.kind}: {entry.title}" if entry.title and entry.title != entry.kind else entry.kind
        items.append(
            f'<div class="msg msg-{entry.kind.replace(" ", "-")}">{tag("div", title, class_="who")}'
            f"{tag('pre', entry.text)}</div>"
        )
    return Html("".join(items))


def _step_rows(detail: dict[str, Any], start: float) -> list[list[Any]]:
    rows: list[list[Any]] = []
    previous_agent = None
    for step in detail["requests"]:
        calls = join(step["tool_calls"], ", ")
        if step["handoff_to"]:
            calls = Html(calls + esc(f" → hands off to {step['handoff_to']}"))
        agent = step["agent"]
        if previous_agent is not None and agent != previous_agent:
            agent = Html(esc(agent) + tag("span", f" (after {previous_agent})", class_="muted"))
        previous_agent = step["agent"]
        status = f"blocked: {step['blocked_by']}" if step["blocked_by"] else step["status"] or step["error"] or ""
        verdicts = join((f"{v['detector']}: {v['action']}" for v in step["verdicts"] or []), ", ")
        latency = f"{step['upstream_ms']:.0f} ms" if step["upstream_ms"] is not None else "local"
        cached = f" ({tokens(step['cached_tokens'])} cached)" if step["cached_tokens"] else ""
        rows.append(
            [
                tag("a", step["index"], id=f"r{step['index']}", href=f"#r{step['index']}"),
                f"+{step['at'] - start:.1f}s",
                agent,
                Html(esc(step["model"]) + tag("span", f" ({step['provider']})", class_="muted")),
                f"{tokens(step['input_tokens'])} / {tokens(step['output_tokens'])}{cached}",
                spend(step["usd"]),
                latency,
                status,
                calls,
                verdicts,
            ]
        )
    return rows


def _conversation(detail: dict[str, Any]) -> Html:
    if not detail["recorded"]:
        return tag("p", RECORD_HINT, class_="notice")
    parts = []
    for position, step in enumerate(detail["requests"]):
        body = detail["bodies"].get(step["id"])
        if body is None:
            continue
        sent = request_entries(step["api"], body["request"], first=position == 0 and detail["page"] == 1)
        answered = response_entries(step["api"], body["response"])
        heading = f"Request {step['index']} · {step['agent']} · {step['model']}"
        parts.append(
            tag(
                "section",
                Html(
                    tag("h3", heading)
                    + tag("div", _entries(sent), class_="sent")
                    + tag("div", _entries(answered), class_="answered")
                ),
                class_="exchange",
            )
        )
    missing = len(detail["requests"]) - sum(1 for step in detail["requests"] if step["id"] in detail["bodies"])
    note = tag("p", f"{missing} requests of this page have no recorded body.", class_="muted") if missing else ""
    return Html("".join(parts) + esc(note))


async def _tenant(request: web.Request, ctx: UiContext, run_id: str, detail: Mapping[str, Any] | None) -> str | None:
    """Whose run the page shows (its state is its tenant's: `tenants`): `?tenant=`, else the tenant of the
    key its records name, else the one tenant with live state for the id (None when none or several)."""
    named = request.query.get("tenant")
    if named:
        return named
    if detail is not None:
        return tenants.Tenants(ctx.settings.runs.tenants).of(detail["run"]["key_hash"])
    live = await tenants.with_run(ctx.state, run_id)
    return live[0] if len(live) == 1 else None


async def page(request: web.Request, ctx: UiContext) -> Html:
    run_id = request.match_info["run_id"]
    number = page_number(request.query.get("page"))
    reader = reader_of(request)
    detail = await reader.runs.detail(run_id, number) if isinstance(reader, StoreReader) else None
    tenant = await _tenant(request, ctx, run_id, detail)
    fields = await ctx.state.read_scope(Scope.RUN, tenants.state_id(tenant, run_id)) if tenant else {}
    record = BreakerRecord.loads(fields.get(breaker.FIELD))
    live = run_state.live_view(fields)
    if detail is None and live is None and record is None:
        raise NotFound(f"No run {run_id!r} in the record store or the live state.")
    action = f"/runguard/runs/{quote(run_id, safe='')}/reset" + (f"?tenant={quote(tenant, safe='')}" if tenant else "")
    reset = reset_control(action, reset_command(run_id=run_id, tenant=tenant, url=None), "Reset this run")
    parts = [_breaker(record), reset]
    if detail is None:
        parts.append(no_store() if not isinstance(reader, StoreReader) else tag("p", "Nothing recorded yet."))
        if live is not None:
            parts.append(dl({name.replace("_", " "): value for name, value in live.items()}))
        return layout(f"Run {run_id}", "runs", Html("".join(parts)))
    run = detail["run"]
    providers = {step["provider"] for step in detail["requests"]}
    summary = dl(
        {
            "status": badge(run["status"]),
            "key": short(run["key_hash"], 64),
            "agents": join(run["agents"], ", "),
            "requests": run["requests"],
            "tokens in / out": f"{tokens(run['input_tokens'])} / {tokens(run['output_tokens'])}",
            "providers": join(sorted(providers), ", "),
            "spend": spend(run["usd"], run["unpriced"]),
            "cost avoided (est.)": spend(run["usd_avoided"], run["unpriced"]),
            "started": when(run["first_seen"]),
            "last activity": when(run["last_seen"]),
            "duration": f"{run['duration_s']:.1f} s",
            "in flight now": live["in_flight"] if live else 0,
        }
    )
    parts = [tag("div", Html(tag("section", summary) + tag("section", Html("".join(parts)))), class_="grid2")]
    for trip in detail["trips"]:
        title = f"{trip['detector']} ({'stopped the run' if trip['action'] == 'block' else 'warning'})"
        facts = dl(
            {
                "reason": trip["reason"],
                "at request": trip["request_index"],
                "when": when(trip["at"]),
                "spend so far": spend(trip["usd_so_far"], run["unpriced"]),  # never $0 for unpriced requests
                "tokens so far": tokens(trip["tokens_so_far"]),
                "cost avoided (est.)": spend(trip["usd_avoided"], run["unpriced"]),
                "scope": trip["scope"],
            }
        )
        parts.append(
            tag(
                "section",
                Html(tag("h2", title) + facts + tag("h3", "Evidence") + evidence_html(trip["evidence"] or {})),
                class_=f"trip trip-{trip['action']}",
            )
        )
    if any(trip["action"] == "block" for trip in detail["trips"]):
        parts.append(tag("p", AVOIDED_BASIS, class_="muted"))
    headers = ["#", "at", "agent", "model", "tokens in / out", "cost", "latency", "status", "tool calls", "verdicts"]
    parts.append(tag("h2", "Timeline"))
    parts.append(table(headers, _step_rows(detail, run["first_seen"]), class_="timeline"))
    parts.append(pager(number, detail["more"], f"runs/{quote(run_id, safe='')}", {}))
    parts.append(tag("h2", "Conversation"))
    parts.append(_conversation(detail))
    return layout(f"Run {run_id}", "runs", Html("".join(parts)))
