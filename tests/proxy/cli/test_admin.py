"""`runguard-proxy reset` as a subprocess against a proxy running in this process."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
from collections.abc import AsyncIterator

import openai
import pytest

from runguard.detectors.max_requests import MaxRequests
from tests.e2e import payloads
from tests.support.proxy import ListSink, settings_for, start_proxy
from tests.support.upstream import FakeUpstream, Reply

pytestmark = pytest.mark.slow

TOKEN = "cli-t0ken"


async def reset(*args: str, token: str | None = None) -> tuple[int, str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("RUNGUARD_ADMIN_TOKEN", "RUNGUARD_PROXY_URL")}
    if token is not None:
        env["RUNGUARD_ADMIN_TOKEN"] = token
    process = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "runguard.proxy.cli.main",
        "reset",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env=env,
    )
    out, err = await process.communicate()
    assert process.returncode is not None
    return process.returncode, out.decode(), err.decode()


@pytest.fixture
async def proxy(upstream: FakeUpstream) -> AsyncIterator[tuple[str, ListSink]]:
    upstream.script = lambda _: Reply.json(payloads.chat_completion())
    sink = ListSink()
    settings = settings_for(
        upstream.url, server={"admin_token": TOKEN}, guard={"detectors": {"max_requests": {"limit": 1}}}
    )
    running = await start_proxy(settings, sink=sink, detectors=[MaxRequests()])
    yield running.url, sink
    await running.stop()


async def test_reset_run_reopens_it(proxy: tuple[str, ListSink]) -> None:
    url, _ = proxy
    sdk = openai.AsyncOpenAI(
        base_url=url + "/v1", api_key="sk-test-abc", max_retries=0, default_headers={"X-Run-Id": "run/cli 1"}
    )
    try:
        await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "a"}])
        with pytest.raises(openai.RateLimitError):
            await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "a"}])
        code, out, err = await reset("run/cli 1", "--url", url, token=TOKEN)
        assert (code, out.strip()) == (0, "run run/cli 1 reset"), err
        await sdk.chat.completions.create(model="gpt-4o-mini", messages=[{"role": "user", "content": "a"}])
    finally:
        await sdk.close()


async def test_reset_key_with_model_and_token_flag(proxy: tuple[str, ListSink]) -> None:
    url, _ = proxy
    code, out, err = await reset("--key", "k_abc", "--model", "gpt-4o", "--url", url, "--token", TOKEN)
    assert code == 0, err
    assert out.strip() == "key k_abc model gpt-4o: key had no state, key_model had no state"


async def test_missing_or_wrong_token_is_a_clear_error(proxy: tuple[str, ListSink]) -> None:
    url, _ = proxy
    for token in (None, "wrong"):
        code, _, err = await reset("some-run", "--url", url, token=token)
        assert code == 1 and "admin token" in err


async def test_unreachable_proxy_and_bad_arguments() -> None:
    with socket.socket() as probe:  # a port with nothing listening
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    code, _, err = await reset("r1", "--url", f"http://127.0.0.1:{port}")
    assert code == 1 and "cannot reach the proxy" in err
    assert (await reset())[0] == 2
    assert (await reset("r1", "--key", "k"))[0] == 2
    code, _, err = await reset("r1", "--model", "m")
    assert code == 2 and "--model goes with --key" in err


async def test_reset_of_a_run_id_two_tenants_use_names_them_and_takes_a_tenant(proxy: tuple[str, ListSink]) -> None:
    url, sink = proxy
    ask = {"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "a"}]}
    for key in ("sk-tenant-one", "sk-tenant-two"):
        async with openai.AsyncOpenAI(
            base_url=url + "/v1", api_key=key, max_retries=0, default_headers={"X-Run-Id": "run-x"}
        ) as sdk:
            await sdk.chat.completions.create(**ask)  # type: ignore[call-overload]
    one, two = sorted({record.key_hash for record in sink.records if hasattr(record, "key_hash")})
    code, _, err = await reset("run-x", "--url", url, token=TOKEN)
    assert code == 1 and one in err and two in err and "--tenant" in err
    code, out, err = await reset("run-x", "--tenant", one, "--url", url, token=TOKEN)
    assert (code, out.strip()) == (0, "run run-x reset"), err
    code, out, err = await reset("run-x", "--url", url, token=TOKEN)  # only the other tenant's is left
    assert (code, out.strip()) == (0, "run run-x reset"), err
    assert (await reset("--key", "k_abc", "--tenant", one, "--url", url, token=TOKEN))[0] == 2
