# purgatory serve: the HTTP long-poll API over the simulated broker.
# CI lints this file with hadolint and runs its build steps in fresh venvs
# (docker/verify-install.sh), since no Docker engine is available there.

# Stage 1: a full image has gcc and the Python headers, so mypyc compiles the core here
# (about twice as fast as the pure-Python fallback, which is all a slim image could build).
FROM python:3.11-bookworm AS build
ENV PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_ROOT_USER_ACTION=ignore
WORKDIR /src
COPY pyproject.toml setup.py README.md ./
COPY purgatory ./purgatory
# DL3013 wants pinned versions: this builds the local project, whose pyproject.toml
# states its dependency bounds.
# hadolint ignore=DL3013
RUN pip wheel --no-cache-dir --wheel-dir wheels ".[service]"

# Stage 2: the slim runtime installs the wheels built above, nothing else.
FROM python:3.11-slim-bookworm

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PIP_ROOT_USER_ACTION=ignore

WORKDIR /app
COPY --from=build /src/wheels ./wheels
# hadolint ignore=DL3013
RUN pip install --no-cache-dir --no-index --find-links wheels "purgatory-aio[service]" \
    && rm -rf wheels
# The image must run the compiled core: fail the build otherwise.
RUN python -c "import purgatory, sys; sys.exit(0 if purgatory.COMPILED else 'core not compiled')"

# No user database entry needed: a numeric, unprivileged uid:gid.
USER 10001:10001
EXPOSE 8080
# Python's own HTTP client: the slim image has no curl.
HEALTHCHECK --interval=10s --timeout=3s --start-period=5s --retries=3 \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8080/healthz', timeout=2)"]
# purgatory serve answers every parked request and exits 0 on SIGTERM.
STOPSIGNAL SIGTERM
CMD ["purgatory", "serve", "--host", "0.0.0.0"]
