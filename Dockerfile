# RunGuard proxy sidecar: slim Python, non-root, healthcheck, tiktoken cache pre-seeded.
FROM python:3.11-slim AS runtime

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    TIKTOKEN_CACHE_DIR=/opt/runguard/tiktoken \
    RUNGUARD_HOME=/var/lib/runguard \
    RUNGUARD_DATABASE_URL=sqlite+aiosqlite:////var/lib/runguard/runguard.db \
    RUNGUARD_HOST=0.0.0.0 \
    RUNGUARD_PORT=8787

WORKDIR /opt/runguard/src
# The dependencies at the exact versions of the lock file (its own layer: rebuilt only when the lock changes).
COPY requirements.lock ./
RUN pip install -r requirements.lock
COPY pyproject.toml setup.py README.md ./
COPY proxy ./proxy
COPY detectors ./detectors
COPY config ./config
# The C kernels are built with gcc and xxHash's header, removed again once they are built (the shingle and
# sketch kernels inline xxHash: nothing of them is needed at run time); the import fails the build if one was
# left out.
RUN apt-get update \
    && apt-get install -y --no-install-recommends gcc libc6-dev libxxhash-dev \
    && pip install --no-deps . \
    && apt-get purge -y --auto-remove gcc libc6-dev libxxhash-dev \
    && rm -rf /var/lib/apt/lists/* \
    && python -c "import runguard.detectors.support._shingling, runguard.detectors.support._sketching, runguard.detectors.support._units, runguard.detectors.support._volatile" \
    # Pre-seed tiktoken's encodings at build time (the build has network, the sidecar may not).
    && python -c "import tiktoken; [tiktoken.get_encoding(n) for n in ('o200k_base', 'cl100k_base')]" \
    && useradd --system --uid 10001 --home-dir /var/lib/runguard runguard \
    && mkdir -p /var/lib/runguard && chown runguard /var/lib/runguard

USER runguard
# The key salt (RUNGUARD_HOME/salt) and the SQLite record store live here: a volume, so a recreated
# container keeps them (a new salt would change every key hash: budgets, allowlists, overrides).
VOLUME ["/var/lib/runguard"]
EXPOSE 8787
# The port comes from RUNGUARD_PORT, as `serve` reads it: change the port there, not with --port.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD python -c "import os,sys,urllib.request; url='http://127.0.0.1:%s/runguard/health' % os.environ['RUNGUARD_PORT']; sys.exit(0 if urllib.request.urlopen(url, timeout=2).status == 200 else 1)"
# Bound beyond loopback inside the container: set RUNGUARD_ADMIN_TOKEN to enable the admin API.
CMD ["runguard-proxy", "serve"]
