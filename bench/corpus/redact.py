"""Secrets never leave a recording: whatever looks like a credential (provider API keys, GitHub and
Slack tokens, AWS key ids, bearer tokens, private key blocks) is replaced by `[redacted]` in every
line the converter writes, whatever the source. Agents run real shells, so an `env` or a config file
read can put a key into a tool result."""

from __future__ import annotations

import re

REDACTED = "[redacted]"

SECRET = re.compile(
    r"sk-(?:ant-|proj-|or-v1-)?[A-Za-z0-9_\-]{20,}"  # Anthropic, OpenAI, OpenRouter
    r"|gh[pousr]_[A-Za-z0-9]{30,}|github_pat_[A-Za-z0-9_]{30,}"  # GitHub
    r"|xox[abprs]-[A-Za-z0-9\-]{10,}"  # Slack
    r"|AKIA[0-9A-Z]{16}"  # AWS access key id
    r"|AIza[0-9A-Za-z_\-]{35}"  # Google API key
    r"|hf_[A-Za-z0-9]{30,}"  # Hugging Face
    r"|(?i:bearer)\s+[A-Za-z0-9_\-.=]{20,}"
    r"|-----BEGIN [A-Z ]*PRIVATE KEY-----[\s\S]*?-----END [A-Z ]*PRIVATE KEY-----"
)


SECRET_BYTES = re.compile(SECRET.pattern.encode())


def scrub(line: bytes) -> bytes:
    """A serialized JSON line cleared of what looks like a secret. Safe on JSON text: a match holds no
    quote or backslash of its own, and `[redacted]` needs no escaping (a private key's escaped
    newlines are matched as text)."""
    return SECRET_BYTES.sub(REDACTED.encode(), line)
