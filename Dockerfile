# purgatory serve: the HTTP long-poll API over the simulated broker.
# CI lints this file with hadolint and runs its install steps in a fresh venv
# (docker/verify-install.sh), since no Docker engine is available there.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /app
COPY pyproject.toml README.md ./
COPY purgatory ./purgatory
# DL3013 wants pinned versions: this installs the local project, whose pyproject.toml
# states its dependency bounds.
# hadolint ignore=DL3013
RUN pip install --no-cache-dir ".[service]"

# No user database entry needed: a numeric, unprivileged uid:gid.
USER 10001:10001
EXPOSE 8080
# Python's own HTTP client: the slim image has no curl.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]
# purgatory serve answers every parked request and exits 0 on SIGTERM.
STOPSIGNAL SIGTERM
CMD ["purgatory", "serve", "--host", "0.0.0.0"]
