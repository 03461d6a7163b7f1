"""Text a client chooses (run id, model name) never becomes something a shell, a terminal or a model runs.

A real `runguard-proxy serve` on a port of its own stops runs whose id and
model carry shell syntax and control bytes. The reset command its error and
its webhook suggest is pasted into a real shell: it must reset exactly that
run and do nothing else. Metric labels and log lines must carry no control
bytes, and the stop completion the model reads must carry no command at all.
"""

from __future__ import annotations

import asyncio
import os
import shlex
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from tests.e2e import payloads
from tests.e2e.faults import eventually
from tests.e2e.trust import serving
from tests.support.processes import console_script
from tests.support.upstream import FakeUpstream, Received, Reply, closed_port

pytestmark = pytest.mark.slow

HOSTILE_RUN = "demo; touch PWNED #"
HOSTILE_MODEL = "gpt-4o-mini-fail\x1b]0;owned\x07\x00; touch PWNED"
GUARD = {
    "detectors": {"max_requests": {"limit": 1}},
    "overrides": [
        {"model": "gpt-4o-stop", "detectors": {"max_requests": {"response": "stop"}}},
        {"model": "gpt-4o-mini-fail*", "detectors": {"max_requests": {"limit": 10}}},
    ],
}


def _script(request: Received) -> Reply:
    if request.path == "/hook":
        return Reply.json({"ok": True})
    if b"-fail" in request.body:
        return Reply.json({"error": {"message": "overloaded", "type": "server_error"}}, status=500)
    return Reply.json(payloads.chat_completion("ok"))


def _client(url: str, run_id: str) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(
        base_url=url + "/v1", api_key="sk-trust-text", max_retries=0, default_headers={"X-Run-Id": run_id}
    )


async def _ask(sdk: openai.AsyncOpenAI, model: str = "gpt-4o-mini") -> Any:
    return await sdk.chat.completions.create(model=model, messages=[{"role": "user", "content": "go"}])


def _command(text: str, lead: str) -> str:
    """The command a message suggests after `lead` (up to the end of the text)."""
    assert lead in text, text
    return text.split(lead, 1)[1].strip()


async def _in_a_shell(command: str, cwd: Path) -> tuple[int, str]:
    """`command` pasted into /bin/sh, with the runguard-proxy CLI on PATH."""
    path = f"{Path(console_script()).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    env = {k: v for k, v in os.environ.items() if k not in ("RUNGUARD_ADMIN_TOKEN", "RUNGUARD_PROXY_URL")}
    process = await asyncio.create_subprocess_exec(
        "/bin/sh",
        "-c",
        command,
        cwd=cwd,
        env={**env, "PATH": path},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await process.communicate()
    return process.returncode if process.returncode is not None else -1, out.decode()


def _no_controls(where: str, text: str) -> None:
    bad = sorted({hex(ord(c)) for c in text if (ord(c) < 32 and c not in "\n\t") or 0x7F <= ord(c) < 0xA0})
    assert not bad, f"control characters {bad} in {where}"


async def test_reset_hints_quote_client_text_and_name_the_url(upstream: FakeUpstream, tmp_path: Path) -> None:
    upstream.script = _script
    port = closed_port()
    alerts = {"webhooks": [upstream.url + "/hook"], "retries": 0}
    async with serving(tmp_path, upstream.url, "--port", str(port), guard=GUARD, alerts=alerts) as served:
        url = served.url
        assert url == f"http://127.0.0.1:{port}"

        # A run named with shell syntax is stopped; its error says how to reset it.
        sdk = _client(url, HOSTILE_RUN)
        await _ask(sdk)
        with pytest.raises(openai.RateLimitError) as stopped:
            await _ask(sdk)
        hint = _command(stopped.value.message, "Reset with:")
        assert shlex.split(hint) == ["runguard-proxy", "reset", "--url", url, HOSTILE_RUN]
        code, said = await _in_a_shell(hint, tmp_path)  # what an operator does with it
        assert code == 0 and f"run {HOSTILE_RUN} reset" in said, said
        assert not (tmp_path / "PWNED").exists(), "the reset hint ran a second command"
        await _ask(sdk)  # reset: the run goes on

        # A model name with control bytes and shell syntax opens the key+model breaker (retry_cascade).
        failing = _client(url, "ctl-run")
        for _ in range(2):
            with pytest.raises(openai.InternalServerError):
                await _ask(failing, HOSTILE_MODEL)
        with pytest.raises(openai.RateLimitError) as cascade:
            await _ask(failing, HOSTILE_MODEL)
        key_hint = _command(cascade.value.message, "or:")
        _no_controls("the key+model reset hint", key_hint)
        words = shlex.split(key_hint)
        assert words[:4] == ["runguard-proxy", "reset", "--url", url] and words[-2] == "--model"
        assert words[-1] == "gpt-4o-mini-fail\\x1b]0;owned\\x07\\x00; touch PWNED"  # visible, one argument

        # The webhooks got both trips; their text is printable and their commands quote the same way.
        def hooks() -> list[dict[str, Any]]:
            return [r.json() for r in upstream.received if r.path == "/hook"]

        await eventually(lambda: len(hooks()) >= 2, within=5.0)
        texts = {hook["detector"]: hook["text"] for hook in hooks()}
        for text in texts.values():
            _no_controls("a webhook's text", text)
        run_command = shlex.split(_command(texts["max_requests"], "Reset with:"))
        assert run_command == ["runguard-proxy", "reset", "--url", url, HOSTILE_RUN]
        assert shlex.split(_command(texts["retry_cascade"], "Reset with:"))[-1] == words[-1]

        # Metric labels carry the model name without its control bytes.
        async with httpx.AsyncClient() as http:
            exposition = (await http.get(url + "/runguard/metrics")).text
            assert "gpt-4o-mini-fail" in exposition
            _no_controls("the metrics", exposition)
            # A run id with a newline, named in an admin path, cannot forge a log line.
            forged = await http.post(url + "/runguard/runs/x%0Aforged%20line/reset", json={})
            assert forged.status_code == 200
        await served.stop()
        assert not any(line.startswith("forged") for line in served.text().splitlines()), served.diagnostics()
        _no_controls("the process's output", served.text())


async def test_the_stop_completion_tells_the_model_no_command(upstream: FakeUpstream, tmp_path: Path) -> None:
    upstream.script = _script
    async with serving(tmp_path, upstream.url, "--port", str(closed_port()), guard=GUARD) as served:
        sdk = _client(served.url, HOSTILE_RUN)
        await _ask(sdk, "gpt-4o-stop")
        stop = await _ask(sdk, "gpt-4o-stop")
        text = stop.choices[0].message.content or ""
        assert stop.choices[0].finish_reason == "stop" and "max_requests" in text
        assert "runguard-proxy" not in text and "reset" not in text.lower() and "--url" not in text
        assert len(upstream.received) == 1  # the stop was answered by the proxy
