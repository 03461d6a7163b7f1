"""Secrets never leave a recording: whatever looks like a credential in a recorded string (provider
API keys, GitHub and Slack tokens, AWS key ids, bearer tokens, private key blocks) is replaced by
`[redacted]` before the converter writes it. Coding-agent CLI sessions run real shells, so an
`env` or a config file read can put a key into a tool result."""

from __future__ import annotations

import re
from typing import Any

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


def redact(value: Any) -> Any:
    """`value` with every string in it (keys of objects too) cleared of what looks like a secret."""
    if isinstance(value, str):
        return SECRET.sub(REDACTED, value)
    if isinstance(value, list):
        return [redact(item) for item in value]
    if isinstance(value, dict):
        return {redact(key): redact(item) for key, item in value.items()}
    return value
