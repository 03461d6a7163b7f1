"""Text that came from clients, made safe to show: printable, and never runnable as a command.

Run ids, model names and agent names are chosen by whoever sends a request.
Wherever RunGuard puts them before a person (a log line, a webhook message, a
metric label, the reset command an error suggests) they go through here:
control characters (NUL, escape, newlines, C1, line separators) become
visible `\\xNN` escapes, so they can neither forge a log line nor drive a
terminal, and a command is built from shell-quoted words, so `demo; curl … | sh`
is one argument, not a second command.
"""

from __future__ import annotations

import re
import shlex

DEFAULT_URL = "http://127.0.0.1:8787"  # where `runguard-proxy reset` looks when given no --url
_CONTROLS = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def _escape(found: re.Match[str]) -> str:
    code = ord(found.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def printable(text: str) -> str:
    """`text` with every control character written as a visible escape (`\\x00`, `\\x1b`, `\\u2028`)."""
    return _CONTROLS.sub(_escape, text) if not text.isprintable() else text


def shell_word(text: str) -> str:
    """`text` as one shell word: printable, and quoted when a shell would read anything in it."""
    return shlex.quote(printable(text))


def proxy_url(host: str, port: int) -> str | None:
    """The `--url` a reset command needs to reach this proxy (bound to `host`:`port`) from its own machine;
    None for the default address (127.0.0.1:8787), or when the port is picked at start (0) and so not known
    from the settings."""
    if port == 0:
        return None
    if host in ("0.0.0.0", "::", ""):
        host = "127.0.0.1"  # bound to every address: the local one reaches it
    shown = f"[{host}]" if ":" in host else host
    url = f"http://{shown}:{port}"
    return None if url in (DEFAULT_URL, "http://localhost:8787") else url


def _option(name: str, value: str) -> list[str]:
    """`--name VALUE`, or `--name=VALUE` when the value starts with `-` (it would read as an option)."""
    return [shell_word(f"{name}={value}")] if value.startswith("-") else [name, shell_word(value)]


def reset_command(
    *,
    run_id: str | None = None,
    key: str | None = None,
    model: str | None = None,
    url: str | None,
    tenant: str | None = None,
) -> str:
    """`runguard-proxy reset ...` for a run, or for a key (and model), every client-chosen word quoted.

    A run id that starts with `-` comes after `--`, so it cannot be read as an option (`--url=...`).
    """
    words = ["runguard-proxy", "reset"]
    if url is not None:
        words += ["--url", shell_word(url)]
    if key is not None:
        words += _option("--key", key)
        if model is not None:
            words += _option("--model", model)
    if tenant is not None:
        words += _option("--tenant", tenant)
    if run_id is not None:
        if run_id.startswith("-"):
            words.append("--")
        words.append(shell_word(run_id))
    return " ".join(words)
