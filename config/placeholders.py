"""Refusing secrets that are an example's placeholder (`change-me`, `<your-token>`, `password`).

An example config or compose file ships with such values so that it runs;
started as it is, a gateway would answer to a token anyone can read and hash
keys with a salt anyone knows. The proxy refuses to start instead, naming the
setting, never echoing the value.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

from pydantic import SecretStr

from runguard.config.settings import Settings

# Compared with letters and digits only, lower case: "Change_Me!" is "changeme".
_PREFIXES = ("changeme", "changethis", "replaceme", "yoursecret", "yourtoken", "yourpassword", "yoursalt")
_WHOLE = frozenset(
    {"secret", "password", "passwd", "placeholder", "example", "todo", "xxx", "token", "admintoken", "salt", "default"}
)
_ANGLED = re.compile(r"^\s*<[^<>]*>\s*$")  # <your-admin-token>


def is_placeholder(value: str) -> bool:
    """Whether `value` reads as a stand-in for a secret rather than a secret."""
    if _ANGLED.match(value):
        return True
    plain = re.sub(r"[^a-z0-9]", "", value.lower())
    if plain in _WHOLE or (plain and set(plain) == {"x"}):
        return True
    return plain.startswith(_PREFIXES)


def _url_password(url: str | None) -> str | None:
    try:
        return urlsplit(url).password if url else None
    except ValueError:  # a URL the settings already refuse or accept on their own terms
        return None


def placeholder_secrets(settings: Settings) -> list[str]:
    """The dotted names of the secret settings whose value is a placeholder."""
    secrets: dict[str, SecretStr | str | None] = {
        "server.admin_token": settings.server.admin_token,
        "runs.key_salt": settings.runs.key_salt,
    }
    found = [
        name
        for name, value in secrets.items()
        if value is not None and is_placeholder(value.get_secret_value() if isinstance(value, SecretStr) else value)
    ]
    for name, url in (("store.database_url", settings.store.database_url), ("state.url", settings.state.url)):
        password = _url_password(url)
        if password is not None and is_placeholder(password):
            found.append(f"{name} (its password)")
    return found
