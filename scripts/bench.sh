#!/usr/bin/env bash
# Runs the benchmarks (left out of scripts/test.sh). Each prints times and ratios against
# a baseline measured in the same run, and writes out/bench_*.json.
#   bash scripts/bench.sh             # optimizer (100 nodes, 50/200/450 jobs) + simulator (N=50)
#   bash scripts/bench.sh optimizer   # only the optimizer; extra arguments go to it (--help)
#   bash scripts/bench.sh simulator   # only the simulator; extra arguments go to it (--help)
#   bash scripts/bench.sh agent       # only the node agent (>= 60 s; starts Docker like test.sh;
#                                     # the agent runs from out/venv-agent: andreas[agent] only)
#   bash scripts/bench.sh manager     # only the Job Manager (100 nodes x 450 jobs, SQLite)
#   bash scripts/bench.sh metrics     # the agent's /metrics: scrape time at 8 GPUs, CPU on/off
#   bash scripts/bench.sh submit      # submission -> container running (starts Docker like test.sh)
#   bash scripts/bench.sh submit-breakdown  # where a submission's time goes, per store: the
#                                     # CLI's phases, the manager's tick statement by statement
#   bash scripts/bench.sh slurm       # submission -> Slurm job running vs plain sbatch, manager
#                                     # tick with 3 Slurm nodes x 100 jobs (not in "all": ~4 min)
#   bash scripts/bench.sh gap         # optimality gaps against milp's proven optimum (~10 min)
#   bash scripts/bench.sh ga          # the genetic scheduler: one 100-node event, PAI-like replays (~8 min)
#   bash scripts/bench.sh tariff      # tariff-aware vs tariff-blind rg, day/night tariff (~3 min)
#   bash scripts/bench.sh power       # energy saved by switching idle nodes off, wake-ups charged (~2 min)
#   bash scripts/bench.sh published   # against the paper's C++ code (GPUScheduler checkout; not in "all")
#   bash scripts/bench.sh engine      # the simulator engine against a SimPy model of the same
#                                     # trace (installs simpy into .venv; not in "all": ~12 min)
# The store benchmark needs MariaDB: bash scripts/bench-store.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

if [ ! -x .venv/bin/python ]; then
    "${PYTHON:-python3}" -m venv .venv
fi
.venv/bin/python -m pip install -q -e '.[test]'
which=${1:-all}
[ $# -gt 0 ] && shift
if [ "$which" = all ] || [ "$which" = optimizer ]; then
    .venv/bin/python tests/benchmarks/bench_optimizer.py --json out/bench_optimizer.json "$@"
fi
if [ "$which" = all ] || [ "$which" = simulator ]; then
    .venv/bin/python tests/benchmarks/bench_simulator.py --json out/bench_simulator.json "$@"
fi
if [ "$which" = all ] || [ "$which" = manager ]; then
    .venv/bin/python tests/benchmarks/bench_manager.py --json out/bench_manager.json "$@"
fi
if [ "$which" = all ] || [ "$which" = agent ]; then
    # 4 followed containers need Docker and the test image: the same daemon test.sh uses.
    # Without them the benchmark still runs (and says that no container was followed).
    # shellcheck source=scripts/docker-test-daemon.sh
    source scripts/docker-test-daemon.sh
    trap docker_test_stop EXIT
    docker_test_start out/docker-bench || echo "bench.sh: no Docker; the agent benchmark runs without containers"
    # The agent as a GPU node installs it: the base and the [agent] extra, nothing else.
    if [ ! -x out/venv-agent/bin/python ]; then
        "${PYTHON:-python3}" -m venv out/venv-agent
    fi
    out/venv-agent/bin/python -m pip install -q -e '.[agent]'
    .venv/bin/python tests/benchmarks/bench_agent.py --agent-python out/venv-agent/bin/python \
        --json out/bench_agent.json "$@"
fi
if [ "$which" = all ] || [ "$which" = metrics ]; then
    .venv/bin/python tests/benchmarks/bench_metrics.py --json out/bench_metrics.json "$@"
fi
if [ "$which" = all ] || [ "$which" = gap ]; then
    .venv/bin/python tests/benchmarks/bench_gap.py --json out/bench_gap.json "$@"
fi
if [ "$which" = all ] || [ "$which" = tariff ]; then
    .venv/bin/python tests/benchmarks/bench_tariff.py --json out/bench_tariff.json "$@"
fi
if [ "$which" = all ] || [ "$which" = power ]; then
    .venv/bin/python tests/benchmarks/bench_power.py "$@"
fi
if [ "$which" = all ] || [ "$which" = ga ]; then
    .venv/bin/python tests/benchmarks/bench_ga.py --json out/bench_ga.json "$@"
fi
if [ "$which" = all ] || [ "$which" = submit ]; then
    # A real daemon and the busybox test image, as test.sh provides them.
    # shellcheck source=scripts/docker-test-daemon.sh
    source scripts/docker-test-daemon.sh
    trap docker_test_stop EXIT
    docker_test_start out/docker-bench
    # SQLite, then a private MariaDB (scripts/mariadb-test-server.sh), in the same run.
    # shellcheck source=scripts/mariadb-test-server.sh
    source scripts/mariadb-test-server.sh
    trap 'docker_test_stop; mariadb_test_stop' EXIT
    mariadb_test_start out/mariadb-bench
    .venv/bin/python tests/benchmarks/bench_submit.py --json out/bench_submit.json "$@"
    .venv/bin/python tests/benchmarks/bench_submit.py --mariadb \
        --json out/bench_submit_mariadb.json "$@"
fi
if [ "$which" = submit-breakdown ]; then     # the services of "submit"; not in "all"
    # shellcheck source=scripts/docker-test-daemon.sh
    source scripts/docker-test-daemon.sh
    # shellcheck source=scripts/mariadb-test-server.sh
    source scripts/mariadb-test-server.sh
    trap 'docker_test_stop; mariadb_test_stop' EXIT
    docker_test_start out/docker-bench
    mariadb_test_start out/mariadb-bench
    .venv/bin/python tests/benchmarks/bench_submit_breakdown.py \
        --json out/bench_submit_breakdown.json "$@"
    .venv/bin/python tests/benchmarks/bench_submit_breakdown.py --mariadb \
        --json out/bench_submit_breakdown_mariadb.json "$@"
fi
if [ "$which" = slurm ]; then
    # The Slurm test cluster as test.sh starts it (installs Debian's Slurm if missing).
    # shellcheck source=scripts/slurm-test-cluster.sh
    source scripts/slurm-test-cluster.sh
    trap slurm_test_stop EXIT
    slurm_test_start out/slurm-bench
    .venv/bin/python tests/benchmarks/bench_slurm.py --json out/bench_slurm.json "$@"
fi
if [ "$which" = published ]; then
    # Builds the C++ with g++/make under out/published; --published DIR or ANDREAS_PUBLISHED_DIR
    # names the checkout (--help). Full grid: 77 min here (the C++ random methods dominate);
    # --quick (N = 10, 20): about 8 min.
    .venv/bin/python tests/benchmarks/bench_published.py --json out/bench_published.json "$@"
fi
if [ "$which" = engine ]; then
    # SimPy is the cross-check of this benchmark only, not a dependency of andreas.
    .venv/bin/python -m pip install -q 'simpy>=4.1'
    .venv/bin/python tests/benchmarks/bench_engine.py --json out/bench_engine.json "$@"
fi
