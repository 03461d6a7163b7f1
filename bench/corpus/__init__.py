"""A corpus of real agent sessions, converted from public recordings to the traffic `runguard-proxy replay` reads.

Nothing recorded is committed: `sources.json` names each public repository, commit and files, and
`python -m bench.corpus build` converts the fetched copies into `bench/corpus/build/` (gitignored).
See README.md.
"""
