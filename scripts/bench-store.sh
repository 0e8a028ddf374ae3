#!/usr/bin/env bash
# Store benchmark on a real MariaDB (left out of scripts/test.sh): starts a private
# throw-away server the same way as test.sh (scripts/mariadb-test-server.sh), with a
# bigger buffer pool and redo log for the 10-million-row load, runs
# tests/benchmarks/bench_store.py and stops the server. Extra arguments go to the
# benchmark, e.g. `--rows 1000000` for a quick run (see --help). Prints samples/s, the
# ratio to a naive insert measured in the same run, and query times; writes
# out/bench_store.json.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
fi
.venv/bin/python -m pip install -q -e '.[test]'

# shellcheck source=scripts/mariadb-test-server.sh
source scripts/mariadb-test-server.sh
trap mariadb_test_stop EXIT
MARIADB_TEST_OPTIONS="--innodb-buffer-pool-size=2G --innodb-log-file-size=1G ${MARIADB_TEST_OPTIONS:-}" \
    mariadb_test_start out/mariadb-bench
.venv/bin/python tests/benchmarks/bench_store.py --json out/bench_store.json "$@"
