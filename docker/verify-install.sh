#!/usr/bin/env bash
# Prove the Dockerfile's install steps work without a Docker engine: stage the build
# context as its COPY instructions do, run its `RUN pip install` steps in a fresh venv,
# then start `purgatory serve`, probe /healthz as the HEALTHCHECK does, and stop it with
# SIGTERM (it must exit 0). Usage: docker/verify-install.sh [PYTHON]
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
python=${1:-python3}
work=$(mktemp -d)
server_pid=""
cleanup() {
    if [[ -n "$server_pid" ]] && kill -0 "$server_pid" 2>/dev/null; then
        kill "$server_pid"
    fi
    rm -rf "$work"
}
trap cleanup EXIT

if command -v hadolint >/dev/null; then
    hadolint "$root/Dockerfile"
    echo "hadolint: ok"
fi

# 1. Stage the context: every `COPY src... dest` relative to WORKDIR (/app -> $work/app).
mkdir -p "$work/app"
while read -r _ args; do
    read -ra words <<<"$args"
    dest=${words[-1]}
    unset 'words[-1]'
    if [[ "$dest" == */ ]]; then
        mkdir -p "$work/app/$dest"
        for src in "${words[@]}"; do cp -r "$root/$src" "$work/app/$dest"; done
    else
        cp -r "$root/${words[0]}" "$work/app/$dest"
    fi
done < <(grep -E '^COPY ' "$root/Dockerfile")
find "$work/app" -name __pycache__ -prune -exec rm -rf {} +

# 2. A fresh venv stands in for the image's interpreter; run each RUN step in /app.
"$python" -m venv "$work/venv"
export PATH="$work/venv/bin:$PATH" PIP_DISABLE_PIP_VERSION_CHECK=1
while read -r _ step; do
    echo "RUN $step"
    (cd "$work/app" && bash -c "$step")
done < <(grep -E '^RUN ' "$root/Dockerfile")

# 3. The installed CLI serves, answers the health check, and exits 0 on SIGTERM.
cd "$work"  # not the source tree: import the installed package
"$work/venv/bin/purgatory" serve --host 127.0.0.1 --port 0 >"$work/serve.log" 2>&1 &
server_pid=$!
url=""
for _ in $(seq 100); do
    url=$(grep -o 'http://[0-9.:]*' "$work/serve.log" | head -1 || true)
    [[ -n "$url" ]] && break
    sleep 0.1
done
[[ -n "$url" ]] || { cat "$work/serve.log"; echo "server did not start" >&2; exit 1; }
python -c "import urllib.request; urllib.request.urlopen('$url/healthz', timeout=2)"
python -c "import purgatory, sys; assert '$work/venv' in purgatory.__file__, purgatory.__file__"
kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=""
if [[ $status -ne 0 ]]; then
    cat "$work/serve.log"
    echo "purgatory serve exited $status on SIGTERM" >&2
    exit 1
fi
echo "verify-install: ok ($url/healthz answered; clean exit on SIGTERM)"
