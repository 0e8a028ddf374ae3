# Throw-away Prometheus server for the metrics tests. Source it, then:
#
#     prometheus_test_start out/prometheus   # installs prometheus if missing (Debian, root)
#     trap prometheus_test_stop EXIT
#
# It writes a private configuration under the given folder (run-<PID of this shell>, so
# concurrent runs in one checkout do not meet) that scrapes every second whatever targets
# the tests list in file_sd JSON files (https://prometheus.io/docs/guides/file-sd/) in
# its targets/ directory, starts prometheus on a free TCP port on 127.0.0.1 (never 9090,
# never the system server's data), waits until it is ready, and exports
#
#     ANDREAS_TEST_PROMETHEUS_URL=http://127.0.0.1:PORT
#     ANDREAS_TEST_PROMETHEUS_TARGETS=<run dir>/targets   (write <name>.json files there)
#
# and PROMETHEUS_TEST_DIR (the run directory: prometheus.yml, prometheus.log, data/).
# A targets file is a JSON list such as [{"targets": ["127.0.0.1:PORT"], "labels":
# {"test": "..."}}]; prometheus re-reads the directory within a second or two.
#
# prometheus_test_stop stops it and deletes its data (the config and log stay). Servers
# left by runs that were killed (their shell is gone) are stopped and removed at the next
# start.

# shellcheck source=scripts/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"

_prometheus_bin() {
    if command -v prometheus >/dev/null 2>&1; then command -v prometheus; return 0; fi
    if [ -x /usr/bin/prometheus ]; then echo /usr/bin/prometheus; return 0; fi
    return 1
}

prometheus_test_install() {
    if _prometheus_bin >/dev/null; then
        return 0
    fi
    andreas_apt_install prometheus-test-server prometheus prometheus
}

prometheus_test_start() {
    local base=${1:?usage: prometheus_test_start DIR}
    prometheus_test_install || return 1
    local server
    server=$(_prometheus_bin)
    mkdir -p "$base"
    base=$(cd "$base" && pwd)
    local old owner
    for old in "$base"/run-*; do
        [ -d "$old" ] || continue
        owner=${old##*/run-}
        if kill -0 "$owner" 2>/dev/null; then continue; fi   # another live run's server
        if [ -f "$old/prometheus.pid" ] && kill -0 "$(cat "$old/prometheus.pid")" 2>/dev/null; then
            kill "$(cat "$old/prometheus.pid")" 2>/dev/null || true
            sleep 1
        fi
        rm -rf "$old"
    done
    base=$base/run-$$
    mkdir -p "$base/targets" "$base/data"
    PROMETHEUS_TEST_DIR=$base
    cat >"$base/prometheus.yml" <<YAML
# Written by scripts/prometheus-test-server.sh: scrape what the tests list, every second.
global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: 1s
scrape_configs:
  - job_name: andreas-tests
    file_sd_configs:
      - files: ["$base/targets/*.json"]
        refresh_interval: 1s
YAML
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    "$server" --config.file="$base/prometheus.yml" --storage.tsdb.path="$base/data" \
        --storage.tsdb.retention.time=2h --web.listen-address="127.0.0.1:$port" \
        --log.level=warn >"$base/prometheus.log" 2>&1 &
    PROMETHEUS_TEST_PID=$!
    echo "$PROMETHEUS_TEST_PID" >"$base/prometheus.pid"
    local i ready=
    for i in $(seq 1 120); do
        if python3 -c "import urllib.request, sys; urllib.request.urlopen('http://127.0.0.1:$port/-/ready', timeout=1)" 2>/dev/null; then
            ready=1
            break
        fi
        if ! kill -0 "$PROMETHEUS_TEST_PID" 2>/dev/null; then
            echo "prometheus-test-server: prometheus exited at start (log: $base/prometheus.log)" >&2
            tail -20 "$base/prometheus.log" >&2
            return 1
        fi
        sleep 0.5
    done
    if [ -z "$ready" ]; then
        echo "prometheus-test-server: prometheus not ready within 60 s (log: $base/prometheus.log)" >&2
        return 1
    fi
    export ANDREAS_TEST_PROMETHEUS_URL="http://127.0.0.1:$port"
    export ANDREAS_TEST_PROMETHEUS_TARGETS="$base/targets"
    export PROMETHEUS_TEST_DIR
    echo "== Prometheus $("$server" --version 2>&1 | awk 'NR == 1 {print $3}') on 127.0.0.1:$port" \
         "(targets $base/targets, data $base/data)"
}

prometheus_test_stop() {
    [ -n "${PROMETHEUS_TEST_PID:-}" ] || return 0
    if kill -0 "$PROMETHEUS_TEST_PID" 2>/dev/null; then
        kill "$PROMETHEUS_TEST_PID" 2>/dev/null || true
        local i
        for i in $(seq 1 40); do
            kill -0 "$PROMETHEUS_TEST_PID" 2>/dev/null || break
            sleep 0.25
        done
        kill -0 "$PROMETHEUS_TEST_PID" 2>/dev/null && kill -9 "$PROMETHEUS_TEST_PID" 2>/dev/null
    fi
    PROMETHEUS_TEST_PID=
    rm -rf "${PROMETHEUS_TEST_DIR:?}/data" "$PROMETHEUS_TEST_DIR/prometheus.pid"
}
