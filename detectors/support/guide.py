"""Guide: the sections of `docs/detectors.md` about every detector (nudges, breakers, evidence).

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

This is **the one case where the proxy changes what a request says** (`upstreams.inject_stream_usage`
only asks for usage); it is off by default. Set it per detector
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
  into a 400. A request on cached content (`cachedContent`) gets no note: Gemini refuses a system
  instruction beside it.

The note is spliced into the body's bytes: every other byte is as the client sent it (no
re-serialization), the body goes as plain JSON (a compressed request body is decompressed and its
`Content-Encoding` dropped) and its `Content-Length` is the new body's. A finding made after a response
(such as `spiral`'s) is carried by the run's next request. A body the note cannot be placed in is
forwarded unchanged, and the run still counts as nudged; so is a request over a WebSocket (a Responses
socket's `response.create`), whose messages pass as they are. `guard.shadow: true` records nudges as
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


def _table(header: tuple[str, str, str], rows: tuple[tuple[str, str, str], ...]) -> str:
    lines = [f"| {' | '.join(header)} |", "|---|---|---|", *(f"| {a} | {b} | {c} |" for a, b, c in rows)]
    return "\n".join(lines)


KEYS = (
    ("`summary`", "text", "always: the verdict's reason, one sentence"),
    (
        "`calls`",
        "list of `{tool, args_digest?, result_digest?, request_seq?}`",
        "the calls (and results) that repeated",
    ),
    ("`batch`", "list of the same", "the calls of one response (a parallel batch)"),
    ("`agents`", "list of agent names", "the agents of a cycle or a delegation chain, in order"),
    ("`series`", "list of `{x, y}`", "a curve: `x` a step or request of the run, `y` the figure then"),
    ("`value`, `limit`", "numbers", "the figure that reached its threshold, and the threshold"),
    ("`after_nudge`", "`true`", "the block came after a nudge (see Nudge)"),
)
# Per detector: the well-known keys it fills, and its own figures (a test checks every detector is here).
BY_DETECTOR = (
    ("`budget`", "`value` (USD spent), `limit`", "`usd`"),
    ("`max_requests`", "`value` (requests), `limit`", "`requests`"),
    ("`max_tokens`", "`value` (tokens), `limit`", "`tokens`, `input_tokens`, `output_tokens`"),
    ("`timeout`", "`value` (seconds), `limit`", "`elapsed_seconds`"),
    ("`non_progress`", "`calls` (the streak of identical results)", "`tool`, `result_hash`, `repeats`"),
    ("`spiral`", "`calls` (those in near-identical pairs, with their requests)", "`tool`, `window`, `pairs`"),
    ("`repeat_call`", "`calls` (each repeat of the call and its answer)", "`tool`, `triple_hash`, `repeats`"),
    ("`tool_storm`", "`calls` (the latest), `value` (calls in the run), `limit`", "`tool`"),
    ("`consecutive_same_tool`", "`calls` (the latest turn's), `value` (turns), `limit`", "`tool`, `turns`"),
    ("`stagnation`", "`calls` (the identical action, each time)", "`tools`, `signature`, `actions`"),
    ("`oscillation`", "`calls` (the latest action)", "`signatures`, `sequence` (oldest first), `actions`"),
    (
        "`handoff_cycle`",
        "`agents` (from, to), `calls` (the handoff); `value`, `limit` past the hard limit",
        "`pair`, `payload` or `repeats`",
    ),
    (
        "`delegation`",
        "`agents` (the chain; the re-entering agent last); `value`, `limit` when too deep",
        "`agent` or `depth`, `chain`",
    ),
    (
        "`novelty`",
        "`calls` (the stale turn's calls of that kind of tool, with their request)",
        "`tools`, `kind`, `new_shares`, `turns`, `compared_turns`",
    ),
    (
        "`text_loop`",
        "`agents` (the speakers of the stale or repeated turns, in order)",
        "`new_shares` (or `same_answers`), `turns`, `compared_turns`",
    ),
    (
        "`fan_out`",
        "`batch` (the repeated fan-out's calls, with their request)",
        "`tools`, `width`, `previous_width`, `turns`, `similarity`",
    ),
    (
        "`spend_rate`",
        "`value` (USD a minute), `limit`",
        "`usd_in_window`, `responses`, `window_seconds`",
    ),
    ("`over_spawn`", "`value` (in flight), `limit`", "`in_flight`"),
    (
        "`context_growth`",
        "`series` (input tokens: the first steps at x 1-5, the latest at their request), `value` (ratio), `limit`",
        "`ratio`, `first`, `recent`, `early_increment`, `late_increment`",
    ),
    ("`context_window`", "`value` (share of the window), `limit`", "`tokens`, `window`, `share`"),
    ("`session_bloat`", "`value` (characters), `limit`", "`history_chars`, `assistant_turns`"),
    (
        "`parallel_calls`",
        "`batch` (the calls over the limit, alike, or repeating the previous turn's); `value`, `limit` when too wide",
        "`tools`, or `similarity`, or `width`, `previous_width`, `matching_pairs`",
    ),
    ("`retry_cascade`", "`value` (failures), `limit`", "`failures`, `status`, `error`"),
    ("`duplicate_request`", "`value` (identical bodies), `limit`", "`body_hash`, `repeats`"),
    (
        "`structured_output`",
        "`series` (the judged answers: y 1 valid, 0 failed), `value` (failure rate), `limit`",
        "`failed`, `judged`, `rate`, `schema`",
    ),
)

EVIDENCE = f"""## Evidence

Every trip (`runguard-proxy trips`, `GET /runguard/trips`, the store's `trips.evidence` column) records
what formed its pattern, under a few well-known keys, then the detector's own figures. The well-known
keys, each present only when the detector has something for it:

{_table(("key", "shape", "what"), KEYS)}

`args_digest` and `result_digest` are short hex digests of the call's normalized arguments and of its
result (volatile keys such as ids and timestamps left out), so two entries with the same digest made the
same call or got the same answer. `request_seq` is the run's request that carried the result, or whose
response made the call; the state keeps only digests of earlier calls, so it is known for the calls of
the tripping request and, for `spiral`, of every call compared. No message content is recorded unless
`store.record_bodies` is on: then the `calls` and `batch` entries that the tripping request or its
response carries also have `args` and `result`, their text abridged to 500 characters.

{_table(("detector", "well-known keys", "its own figures"), BY_DETECTOR)}
"""
