"""The sections of `docs/detectors.md` that are about every detector: nudges, breakers, evidence.

`catalogue.render()` puts them after the detectors; they are prose, kept here
so the generated page stays one file that a test compares with the code.
"""

from __future__ import annotations

NUDGE = """## Nudge

`action: nudge` sits between `warn` and `block`. The first time such a detector fires in a run, the
request is forwarded **with a short note added** for the model, saying what the agent keeps doing (the
verdict's reason: tool and agent names and counts, never message content) and asking it to change
approach or give its answer. The response carries `x-runguard-warning: <detector> (nudge): <reason>`,
and the trip is recorded with `action: nudge`. If the detector fires again later in the run, the pattern
went on after the note: the run is stopped as with `block` (the trip's evidence has `after_nudge: true`).
A model that changes course is left alone.

This is **the one case where the proxy changes a request**; it is off by default. Set it per detector
(`guard.detectors.spiral.action: nudge`), per API key or model (`guard.overrides`), or tighten a run to it
with `X-RunGuard-Limit: tool_storm.action=nudge`. Where the note goes:

- **Chat Completions**: a message appended to `messages`, with role `developer` if the conversation
  already uses that role, else `system`. It comes last, after the tool results, so the model reads it
  last, in a role this client already sends.
- **Responses**: an `input` message item with role `developer`, appended (a string `input` becomes the
  same user message, then the note). Not `instructions`: they are echoed in the response object the SDK
  returns, and `input` is not.
- **Gemini**: a text part appended to `systemInstruction` (created when absent). Not a turn in
  `contents`: Gemini wants a function-response turn to hold only function responses, and some models
  refuse two user turns in a row, so a text turn after the tool results could turn a working request
  into a 400.

The note is spliced into the body's bytes: every other byte is as the client sent it (no
re-serialization), the body goes as plain JSON (a compressed request body is decompressed and its
`Content-Encoding` dropped) and its `Content-Length` is the new body's. A finding made after a response
(such as `spiral`'s) is carried by the run's next request. A body the note cannot be placed in is
forwarded unchanged, and the run still counts as nudged. `guard.shadow: true` records nudges as
warnings and changes nothing. Detectors the model cannot influence refuse `nudge` at start-up.
"""

BREAKERS = """## Breakers

A blocking verdict opens a breaker for what the verdict names: the run, the API key, or the key and
model. Two kinds:

- **A run stopped for a loop, a cycle or a cap stays stopped** until it is reset
  (`runguard-proxy reset RUN_ID`, or `POST /runguard/runs/{id}/reset`) or forgotten (its state expires
  after `runs.idle_seconds` without a request). There is no cooldown and no probe: some frameworks retry
  any 429 on their own schedule, ignoring `x-should-retry: false`, and a cooldown would let their retry
  back into the loop. Every later request of the run is answered locally with the detector's `response`,
  the same answer each time. We keep that answer rather than switch to the stop completion: code that
  reads the 429 as "stopped" would read a completion as the model's answer and carry on with it. For a
  framework that retries errors without end, set `response: stop` on the detectors that stop its runs.
- **An upstream-health breaker** (`retry_cascade` per key and model; `duplicate_request`'s per run)
  heals: after `guard.breaker.cooldown_seconds` one probe request is let through (a half-open breaker);
  its success closes the breaker, its failure opens it again with the cooldown doubled, up to
  `guard.breaker.max_cooldown_seconds`.

Each detector's section above says which kind it opens.
"""
