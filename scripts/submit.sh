#!/usr/bin/env bash
# Submit a training job with this site's defaults: a thin wrapper around `andreas submit`.
#
# Usage: scripts/submit.sh [IMAGE] [more `andreas submit` options...]
#        scripts/submit.sh job.yaml           # a job file is passed on as it is
#
# Defaults come from the environment (options given on the command line come later, so
# they win: click takes the last value of an option):
#   JOB_IMAGE     andreas-example/train-numpy:latest (the example training image)
#   JOB_EPOCHS    10
#   JOB_DUE       +12h       (+30m, +2d, 2026-11-23T18:00Z or unix seconds)
#   JOB_WEIGHT    0.01       (penalty per second late, in the currency of the energy price)
#   JOB_MAX_GPUS  unset      (at most this many GPUs)
#   ANDREAS       the andreas command (default: `andreas` on PATH, else .venv/bin/andreas)
# The database is the configured one (ANDREAS_DB_URL or /etc/andreas/andreas.toml).
# Prints the job id (only the id with -q).
#
# Example: JOB_DUE=+2d scripts/submit.sh registry.example.org/ml/resnet50:2 --epochs 90 \
#              --env LR=0.1 --name resnet-lr01
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
if [ -z "${ANDREAS:-}" ]; then
    if command -v andreas >/dev/null 2>&1; then
        ANDREAS=andreas
    else
        ANDREAS="$root/.venv/bin/andreas"
    fi
fi

case "${1:-}" in
    *.yaml|*.yml)
        exec "$ANDREAS" submit "$@" ;;
esac

image="${JOB_IMAGE:-andreas-example/train-numpy:latest}"
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
    image="$1"
    shift
fi
args=(--epochs "${JOB_EPOCHS:-10}" --due "${JOB_DUE:-+12h}" --weight "${JOB_WEIGHT:-0.01}")
if [ -n "${JOB_MAX_GPUS:-}" ]; then
    args+=(--max-gpus "$JOB_MAX_GPUS")
fi
exec "$ANDREAS" submit "$image" "${args[@]}" "$@"
