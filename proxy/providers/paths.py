"""One spelling of a request path: the one routed is the one sent upstream.

A path that looks like a guarded endpoint must not reach the provider without
being guarded. Servers differ in how they read unusual spellings, so before
routing every request target is brought to one canonical form, or refused
(the caller answers a provider-native 404):

Normalised (every HTTP server reads these the same way, RFC 3986 section 6):
- runs of `/` collapse into one (`/v1//chat/completions`);
- `.` and `..` segments are resolved (`/v1/models/../chat/completions`);
  a `..` that would climb above the root is refused;
- a trailing `/` is dropped (`...:generateContent/`): neither provider serves
  a path that ends in one;
- percent-escapes are decoded (`/v1/chat/%63ompletions`), and the path is
  sent upstream re-encoded from the decoded text (`upstream`), so the provider
  decodes exactly the path that was routed.

Refused (servers disagree on them, so the routed and the served endpoint
could differ):
- `;` path parameters (`/v1/chat/completions;x`: some servers drop them);
- `\\`, and escapes of `/`, `\\`, `.`, `;` or `%` (`%2f`, `%2e%2e`, `%252e`):
  some servers decode them into separators and dot segments, some do not;
- control characters, `#`, malformed escapes, and escapes that are not UTF-8.

The query string is not touched: it is forwarded as the client sent it.
"""

from __future__ import annotations

import re
from urllib.parse import quote, unquote_to_bytes

# What may stand in a path segment unencoded (RFC 3986 pchar, less ';'): `upstream` encodes the rest.
_SAFE = "/:@!$&'()*+,=-._~"
_ESCAPE = re.compile(r"%(?![0-9A-Fa-f]{2})|%(?:2[EeFf5]|5[Cc]|3[Bb]|[01][0-9A-Fa-f]|7[Ff])")
_ODD = re.compile(r"[;\\#\x00-\x1f\x7f]")
REFUSED = (
    "a request path with ';' parameters, a backslash, an escaped '/', '\\', '.', ';' or '%', a control "
    "character or a '..' above the root is refused"
)
_UNESCAPED = re.compile(r"[A-Za-z0-9/:@!$&'()*+,=\-_~.]*")  # nothing `upstream` would encode
# Segments of safe characters, none empty or starting with '.': nothing to decode, collapse or resolve.
_PLAIN = re.compile(r"(?:/[A-Za-z0-9:@!$&'()*+,=\-_~][A-Za-z0-9:@!$&'()*+,=\-_~.]*)+")


def canonical(raw_path: str) -> str | None:
    """The decoded, normalised path of a request target (`raw_path`, with or without its query), or None if
    it is refused (see the module docstring)."""
    path = raw_path.partition("?")[0]
    if not path.startswith("/"):
        return None
    if _PLAIN.fullmatch(path) or path == "/":
        return path  # the usual request: nothing to change (one regex match on the hot path)
    if _ODD.search(path) or _ESCAPE.search(path):
        return None
    try:
        text = unquote_to_bytes(path).decode("utf-8") if "%" in path else path
    except UnicodeDecodeError:
        return None
    if _ODD.search(text):
        return None  # a decoded escape spelled a control character
    kept: list[str] = []
    for segment in text.split("/"):
        if segment in ("", "."):
            continue
        if segment == "..":
            if not kept:
                return None  # above the root
            kept.pop()
            continue
        kept.append(segment)
    return "/" + "/".join(kept)


def upstream(path: str) -> str:
    """`path` (a `canonical` one, or its tail) encoded for the request line: unchanged when it needs no escapes."""
    return path if _UNESCAPED.fullmatch(path) else quote(path, safe=_SAFE)
