#!/usr/bin/env bash
# Sets up everything the tests need and runs them. Fails (exit 1) when a test fails,
# when no test ran, or when any test was skipped: a skip hides a missing dependency or
# service, and this script's job is to provide them all.
# Benchmarks (tests/benchmarks/bench_*.py) are scripts pytest does not collect; see scripts/bench.sh.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

PYTHON=${PYTHON:-python3}
LOG=out/test.log
mkdir -p out

# --- Python environment --------------------------------------------------------------
# Reuse .venv when its interpreter still works and is new enough; rebuild it otherwise.
if ! .venv/bin/python -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "== creating .venv"
    rm -rf .venv
    "$PYTHON" -m venv .venv
fi
.venv/bin/python -m pip install -q -e '.[test]'

# --- Documentation -------------------------------------------------------------------
# The mkdocs site (mkdocs.yml, docs/); --strict fails on a broken link, anchor or page
# (not with --quiet, which hides the warnings --strict counts).
.venv/bin/python -m pip install -q -e '.[docs]'
if ! .venv/bin/mkdocs build --strict --site-dir out/site >out/mkdocs.log 2>&1; then
    grep -E "WARNING|ERROR|Aborted" out/mkdocs.log >&2 || true
    echo "test.sh: FAIL: mkdocs build --strict failed (the documentation site; out/mkdocs.log)" >&2
    exit 1
fi

# --- System packages -----------------------------------------------------------------
# The example training image runs the host's Debian python3 with python3-numpy (see
# scripts/build-example-image.sh); the HTML report is opened in a headless chromium.
# Installed from Debian's packages when missing (root); the tests FAIL without them.
need=
/usr/bin/python3 -c 'import numpy' 2>/dev/null || need="$need python3-numpy"
command -v chromium >/dev/null 2>&1 || need="$need chromium"
# shellcheck source=scripts/apt-install.sh
source scripts/apt-install.sh
# shellcheck disable=SC2086  # a list of packages
[ -z "$need" ] || andreas_apt_install test.sh "a system package" $need || exit 1

# --- Services ------------------------------------------------------------------------
# Start them here, stop them in one EXIT trap, and never let a test skip because one is
# missing.
#
# MariaDB: the store's contract suite runs on SQLite and on a real MariaDB. Installs the
# Debian package mariadb-server if missing, starts a private throw-away server (data under
# out/mariadb/run-PID/, own socket, free port on 127.0.0.1), exports ANDREAS_TEST_MARIADB_URL;
# see scripts/mariadb-test-server.sh. The MariaDB tests fail without it.
#
# Docker: the agent's epoch tracking (tests/agents_docker/) runs real containers. Uses the
# daemon at $DOCKER_HOST or /var/run/docker.sock when one answers; otherwise installs the
# Debian package docker.io if dockerd is missing and starts a private throw-away dockerd
# (data under out/docker/run-PID/, own socket, no iptables, no bridge). Builds the test
# image andreas-test/busybox:latest with `docker import` from Debian's busybox-static (no
# registry) and exports DOCKER_HOST and ANDREAS_TEST_DOCKER_IMAGE; see
# scripts/docker-test-daemon.sh. The Docker tests fail without them.
#
# Prometheus: the metrics tests (tests/metrics/, marker prometheus) let a real server scrape
# an agent and a manager and query its HTTP API. Installs the Debian package prometheus if
# missing, starts a private server (data under out/prometheus/run-PID/, free port on
# 127.0.0.1, scrape every second from file_sd JSON files the tests write), exports
# ANDREAS_TEST_PROMETHEUS_URL and ANDREAS_TEST_PROMETHEUS_TARGETS; see
# scripts/prometheus-test-server.sh. The Prometheus tests fail without them.
#
# Slurm: the Slurm executor's tests (marker slurm) and its end-to-end tests run against a
# real Slurm cluster on this host. Installs the Debian packages slurmctld, slurmd,
# slurm-client and munge if missing (never slurm-wlm-emulator), starts a private munge,
# one slurmctld and three slurmd with fake GPUs (data under out/slurm/run-PID/), exports
# SLURM_CONF and ANDREAS_TEST_SLURM_*; see scripts/slurm-test-cluster.sh. The Slurm tests
# fail without it.
# shellcheck source=scripts/mariadb-test-server.sh
source scripts/mariadb-test-server.sh
# shellcheck source=scripts/docker-test-daemon.sh
source scripts/docker-test-daemon.sh
# shellcheck source=scripts/prometheus-test-server.sh
source scripts/prometheus-test-server.sh
# shellcheck source=scripts/slurm-test-cluster.sh
source scripts/slurm-test-cluster.sh
services_stop() {
    slurm_test_stop || true
    prometheus_test_stop || true
    docker_test_stop || true
    mariadb_test_stop || true
}
trap services_stop EXIT
mariadb_test_start out/mariadb
docker_test_start out/docker
prometheus_test_start out/prometheus
slurm_test_start out/slurm

# --- Lint ----------------------------------------------------------------------------
# ruff's rules are in pyproject.toml ([tool.ruff]); a finding fails the run.
if ! .venv/bin/ruff check .; then
    echo "test.sh: FAIL: ruff found problems (fix them, or justify a noqa with its reason)" >&2
    exit 1
fi
# mypy over andreas and agents, migrations excluded ([tool.mypy] in pyproject.toml).
if ! .venv/bin/mypy; then
    echo "test.sh: FAIL: mypy found type errors" >&2
    exit 1
fi
# The layering of ARCHITECTURE.md ([tool.importlinter] contracts in pyproject.toml).
if ! .venv/bin/lint-imports --no-cache; then
    echo "test.sh: FAIL: an import breaks the layering contracts (pyproject.toml)" >&2
    exit 1
fi

# --- Tests ---------------------------------------------------------------------------
set +e
# In parallel (tests/conftest.py: one xdist_group per module or shared service, the long
# groups first, so no reordering); the end-to-end tests mostly wait, so workers beat cores.
.venv/bin/python -m pytest -q -p no:cacheprovider -n "${ANDREAS_TEST_WORKERS:-2}" \
    --dist loadgroup --no-loadscope-reorder --junit-xml=out/junit.xml tests 2>&1 | tee "$LOG"
status=${PIPESTATUS[0]}
set -e

if [ "$status" -eq 5 ]; then
    echo "test.sh: FAIL: pytest collected no tests (log: $LOG)" >&2
    exit 1
fi
if [ "$status" -ne 0 ]; then
    echo "test.sh: FAIL: pytest exited with $status (log: $LOG)" >&2
    exit 1
fi
# -ra (pyproject addopts) lists skips as "SKIPPED [n] ..." and the final line says "N skipped".
if grep -Eq '^SKIPPED|[0-9]+ skipped' "$LOG"; then
    echo "test.sh: FAIL: some tests were skipped (see the short summary in $LOG)" >&2
    exit 1
fi
echo "test.sh: all tests passed (log: $LOG)"
