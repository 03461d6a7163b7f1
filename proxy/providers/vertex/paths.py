"""Vertex AI's paths: which model, project and region a request names, and the host that serves it.

Vertex AI serves each region at its own host (`{location}-aiplatform.googleapis.com`), the multi-regions
`us` and `eu` at `aiplatform.{location}.rep.googleapis.com`, the global endpoint and express mode (an API
key, no project) at `aiplatform.googleapis.com`. The path says which: the proxy
sends a request to the host its path implies, unless a base URL is configured (`RUNGUARD_VERTEX_UPSTREAM`).

Project and location are read with strict patterns (lower-case letters, digits, `-`), so nothing a client
writes in a path can become part of a host name: a path whose location is anything else is routed nowhere.
"""

from __future__ import annotations

import re

DEFAULT_BASE = "https://aiplatform.googleapis.com"
_MULTI_REGIONS = frozenset({"us", "eu"})  # served at `aiplatform.{location}.rep.googleapis.com`
_PROJECT = r"(?P<project>[a-z0-9][a-z0-9-]{0,62})"
_LOCATION = r"(?P<location>[a-z][a-z0-9-]{0,62})"
_VERSION = r"/v1(?:beta1)?"
# The project-and-location part of a path: `/v1/projects/{p}/locations/{l}/`, and `/projects/...` without the
# version (AnthropicVertex on a base URL that does not end in `/v1`).
SCOPED = rf"(?:{_VERSION})?/projects/{_PROJECT}/locations/{_LOCATION}/"
_SCOPED = re.compile("^" + SCOPED)

# The rows of the routing table (`spec`): Gemini models (project-scoped and express mode), Claude models.
GEMINI = re.compile(
    rf"^(?:{_VERSION}/projects/[a-z0-9][a-z0-9-]*/locations/[a-z][a-z0-9-]*|{_VERSION})"
    r"/publishers/google/models/(?P<model>[^/:]+):(?P<method>generateContent|streamGenerateContent)$"
)
CLAUDE = re.compile(
    rf"^{SCOPED}publishers/anthropic/models/(?P<model>(?!count-tokens)[^/:]+):(?P<method>rawPredict|streamRawPredict)$"
)
# The model a path no API reads names (`countTokens`, `computeTokens`, Claude's `count-tokens:rawPredict`).
ANY_MODEL = re.compile(r"/publishers/[a-z]+/models/(?P<model>[^/:]+):[A-Za-z]+$")


def project(path: str) -> str | None:
    """The project a Vertex AI path names (`/v1/projects/{project}/locations/...`); None for express mode."""
    found = _SCOPED.match(path)
    return found["project"] if found is not None else None


def upstream_url(base_url: str, target: str) -> str:
    """The URL of a request to Vertex AI: `target` (path and query) on `base_url`, or, when that is the default
    one, on the host the path's location implies (`{location}-aiplatform.googleapis.com`; the global endpoint
    and express mode stay on `aiplatform.googleapis.com`). A path that left out its `/v1` gets it back."""
    if target.startswith("/projects/"):
        target = "/v1" + target
    if base_url != DEFAULT_BASE:
        return base_url + target
    found = _SCOPED.match(target)
    if found is None or found["location"] == "global":
        return DEFAULT_BASE + target
    if found["location"] in _MULTI_REGIONS:  # a multi-region's own endpoint, as google-genai names it
        return f"https://aiplatform.{found['location']}.rep.googleapis.com{target}"
    return f"https://{found['location']}-aiplatform.googleapis.com{target}"
