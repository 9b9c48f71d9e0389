#!/usr/bin/env bash
# Every benchmark with its documented default settings, then the published tables:
#
#   bash benchmarks/run_all.sh                        # all of them (sessions_scale alone: 15 min on 2 cores)
#   bash benchmarks/run_all.sh rollouts cli_latency   # only these
#
# Each benchmark writes benchmarks/results/<name>.json (numbers, machine, versions, settings, event
# loops); then `benchmarks/tables.py` renders README.md, docs/providers.md and docs/security.md from those files.
# Run it on a quiet machine: the numbers are only as good as the machine was idle.
# Needs .venv (bash scripts/bootstrap); makes upstream's venv (scripts/upstream-venv) and starts the
# Docker engine (scripts/docker-engine) for cold_start and hub's build step. A benchmark that fails
# keeps its previous results file; the others still run, and the script exits 1 at the end.
set -uo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python
ALL=(step_throughput rollouts sessions_scale forks cli_latency env_steps imported_steps hub crawl hub_load live play_latency cold_start sandbox_runtime hub_lane)
SELECTED=("$@")
[ ${#SELECTED[@]} -gt 0 ] || SELECTED=("${ALL[@]}")
for name in "${SELECTED[@]}"; do
  [ -f "benchmarks/$name.py" ] || { echo "run_all: no benchmark named $name (known: ${ALL[*]})" >&2; exit 2; }
done
[ -x "$PY" ] || { echo "run_all: no $PY: run \`bash scripts/bootstrap\` first" >&2; exit 2; }
bash scripts/upstream-venv >/dev/null || { echo "run_all: could not make upstream's venv (scripts/upstream-venv)" >&2; exit 1; }

if [[ " ${SELECTED[*]} " == *" hub "* || " ${SELECTED[*]} " == *" cold_start "* ]]; then
  if bash scripts/docker-engine >/dev/null && BASE=$(bash scripts/base-image); then
    export OPENENV_HUB_BASE_IMAGE="$BASE"   # hub.py measures the build + smoke of echo_env on it
  else
    echo "run_all: no Docker engine: cold_start will fail and hub will skip its build step" >&2
  fi
fi

failed=()
for name in "${SELECTED[@]}"; do
  echo "== benchmarks/$name.py ($(date -u +%H:%M:%S))" >&2
  start=$SECONDS
  if "$PY" "benchmarks/$name.py"; then
    echo "== $name: done in $((SECONDS - start)) s" >&2
  else
    echo "== $name: FAILED after $((SECONDS - start)) s (its previous results file is unchanged)" >&2
    failed+=("$name")
  fi
done

"$PY" benchmarks/tables.py || failed+=(tables)
if [ ${#failed[@]} -gt 0 ]; then
  echo "run_all: failed: ${failed[*]}" >&2
  exit 1
fi
echo "run_all: every results file written and the tables rendered; check \`git diff README.md docs benchmarks/results\`" >&2
