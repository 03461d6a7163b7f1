"""`runguard-proxy reset`: reopen a run or an API key on a running proxy, through its admin API.

With shared Redis state one reset reopens the run on every replica, because
the breaker lives in the shared state, not in the replica that answered.
"""

from __future__ import annotations

from typing import Annotated
from urllib.parse import quote

import httpx
import orjson
import typer

DEFAULT_URL = "http://127.0.0.1:8787"

UrlOption = Annotated[str, typer.Option("--url", envvar="RUNGUARD_PROXY_URL", help="Base URL of the running proxy.")]
TokenOption = Annotated[
    str | None,
    typer.Option(
        "--token", envvar="RUNGUARD_ADMIN_TOKEN", help="Admin token (server.admin_token).", show_default=False
    ),
]


def _fail(message: str, code: int = 1) -> typer.Exit:
    typer.echo(f"runguard-proxy: {message}", err=True)
    return typer.Exit(code)


def call_admin(url: str, path: str, token: str | None, params: dict[str, str] | None = None) -> dict[str, object]:
    """POST to the admin API; exits with a clear message when the proxy is unreachable or refuses.

    The body is JSON (`{}`), as the admin API requires of every change, and the `Host` is the one `url` names.
    """
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = httpx.post(url.rstrip("/") + path, headers=headers, params=params, json={}, timeout=10.0)
    except httpx.HTTPError as exc:
        raise _fail(f"cannot reach the proxy at {url}: {exc} (is `runguard-proxy serve` running? see --url)") from exc
    try:
        body = orjson.loads(response.content)
    except orjson.JSONDecodeError:
        body = {"error": response.text[:200]}
    if response.status_code == 401:
        raise _fail("the proxy wants its admin token: pass --token or set RUNGUARD_ADMIN_TOKEN")
    if response.status_code == 409 and body.get("tenants"):
        raise _fail(f"{body.get('error')}: {', '.join(map(str, body['tenants']))} (pass --tenant)")
    if not response.is_success:
        raise _fail(f"the proxy answered {response.status_code}: {body.get('error', body)}")
    return dict(body)


def register(app: typer.Typer) -> None:
    @app.command()
    def reset(
        run_id: Annotated[
            str | None, typer.Argument(metavar="RUN_ID", help="Run to reset (its breaker and counters).")
        ] = None,
        key: Annotated[
            str | None, typer.Option("--key", help="API-key hash whose breaker to reset (instead of a run).")
        ] = None,
        model: Annotated[str | None, typer.Option("--model", help="With --key: also reset key+model.")] = None,
        tenant: Annotated[
            str | None,
            typer.Option(
                "--tenant", help="With RUN_ID: the tenant (a runs.tenants name or a key hash) whose run it is."
            ),
        ] = None,
        url: UrlOption = DEFAULT_URL,
        token: TokenOption = None,
    ) -> None:
        """Reset a run's breaker and counters, or an API key's breaker, on a running proxy."""
        if (run_id is None) == (key is None):
            raise _fail("name either a RUN_ID or --key HASH", 2)
        if model and key is None:
            raise _fail("--model goes with --key", 2)
        if tenant and run_id is None:
            raise _fail("--tenant goes with a RUN_ID", 2)
        if run_id is not None:
            params = {"tenant": tenant} if tenant else None
            result = call_admin(url, f"/runguard/runs/{quote(run_id, safe='')}/reset", token, params)
            state = "reset" if result.get("cleared") else "had no state (nothing to reset)"
            typer.echo(f"run {run_id} {state}")
            return
        assert key is not None
        result = call_admin(
            url, f"/runguard/keys/{quote(key, safe='')}/reset", token, {"model": model} if model else None
        )
        cleared = result.get("cleared")
        parts = cleared.items() if isinstance(cleared, dict) else ()
        summary = ", ".join(f"{scope} {'reset' if done else 'had no state'}" for scope, done in parts)
        typer.echo(f"key {key}{f' model {model}' if model else ''}: {summary}")
