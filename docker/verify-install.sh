#!/usr/bin/env bash
# Prove the Dockerfile's build steps work without a Docker engine: emulate each stage's
# COPY and RUN steps (the build stage compiles the core into wheels, the runtime stage
# installs them), check that the installed core is the compiled one, then start
# `purgatory serve`, probe /healthz as the HEALTHCHECK does, and stop it with SIGTERM (it
# must exit 0). Usage: docker/verify-install.sh [PYTHON]
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

# 1-2. Emulate every stage without an engine: a stage's WORKDIR is a directory of its own,
# $work/<stage>, and a fresh venv stands in for its interpreter. COPY takes from the build
# context, or with --from=<stage> from that stage's directory; RUN steps run in the stage's
# directory with its venv first on PATH (so a stage's relative paths work unchanged).
declare -A workdir
stage=""
venv=""
while read -r instruction args; do
    case "$instruction" in
    FROM)
        stage=final
        [[ "$args" =~ [[:space:]][Aa][Ss][[:space:]]+([A-Za-z0-9_-]+) ]] && stage=${BASH_REMATCH[1]}
        mkdir -p "$work/$stage"
        venv="$work/venv-$stage"
        "$python" -m venv "$venv"
        echo "FROM $args -> $work/$stage"
        ;;
    WORKDIR)
        workdir[$stage]=$args
        ;;
    COPY)
        read -ra words <<<"$args"
        from=""
        if [[ "${words[0]}" == --from=* ]]; then
            from=${words[0]#--from=}
            words=("${words[@]:1}")
        fi
        dest=${words[-1]}
        unset 'words[-1]'
        for src in "${words[@]}"; do
            if [[ -n "$from" ]]; then
                src_path="$work/$from/${src#"${workdir[$from]}"/}"
            else
                src_path="$root/$src"
            fi
            if [[ "$dest" == */ ]]; then
                mkdir -p "$work/$stage/$dest"
                cp -r "$src_path" "$work/$stage/$dest"
            else
                cp -r "$src_path" "$work/$stage/$dest"
            fi
        done
        find "$work/$stage" -name __pycache__ -prune -exec rm -rf {} +
        find "$work/$stage" -name '*.so' -delete  # built in place by an editable install
        ;;
    RUN)
        echo "RUN $args"
        (cd "$work/$stage" && PATH="$venv/bin:$PATH" bash -c "$args")
        ;;
    esac
done < <(sed -e ':a' -e '/\\$/N; s/\\\n[[:space:]]*/ /; ta' "$root/Dockerfile" | grep -E '^(FROM|WORKDIR|COPY|RUN) ')
export PATH="$venv/bin:$PATH" PIP_DISABLE_PIP_VERSION_CHECK=1

# 3. The installed CLI serves, answers the health check, and exits 0 on SIGTERM.
cd "$work"  # not the source tree: import the installed package
"$venv/bin/purgatory" serve --host 127.0.0.1 --port 0 >"$work/serve.log" 2>&1 &
server_pid=$!
url=""
for _ in $(seq 100); do
    url=$(grep -o 'http://[0-9.:]*' "$work/serve.log" | head -1 || true)
    [[ -n "$url" ]] && break
    sleep 0.1
done
[[ -n "$url" ]] || { cat "$work/serve.log"; echo "server did not start" >&2; exit 1; }
python -c "import urllib.request; urllib.request.urlopen('$url/healthz', timeout=2)"
python -c "import purgatory, sys; assert '$venv' in purgatory.__file__, purgatory.__file__"
python -c "import purgatory, sys; sys.exit(0 if purgatory.COMPILED else 'not compiled')"
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
