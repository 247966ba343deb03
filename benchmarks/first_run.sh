#!/usr/bin/env bash
# First-run time of the README's run command on a fresh venv: install, then `smart-context serve`
# until the page answers. Usage: bash benchmarks/first_run.sh  (uses a temporary venv and home)
set -euo pipefail
cd "$(dirname "$0")/.."
work=$(mktemp -d)
trap 'kill "$server" 2>/dev/null || true; rm -rf "$work"' EXIT
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
start=$(date +%s.%N)
python3 -m venv "$work/venv"
"$work/venv/bin/pip" install -q -e '.[local,serve]' 2>/dev/null
installed=$(date +%s.%N)
SMART_CONTEXT_HOME="$work/home" SMART_CONTEXT_CACHE="$work/cache" \
  "$work/venv/bin/smart-context" serve --port "$port" >"$work/serve.log" 2>&1 &
server=$!
until curl -sf -o /dev/null "http://127.0.0.1:$port/"; do sleep 0.1; done
answered=$(date +%s.%N)
python3 - "$start" "$installed" "$answered" <<'PY'
import sys
start, installed, answered = map(float, sys.argv[1:])
print(f"fresh venv + install: {installed - start:.1f} s; serve until the page answers: "
      f"{answered - installed:.1f} s; total {answered - start:.1f} s")
PY
