# Throw-away MariaDB server for the store tests and benchmark. Source it, then:
#
#     mariadb_test_start out/mariadb     # installs mariadb-server if missing (Debian, root)
#     trap mariadb_test_stop EXIT
#
# It initialises a private data directory under the given folder (run-<PID of this shell>,
# so concurrent runs in one checkout do not meet), starts mariadbd on a private unix
# socket and a free TCP port on 127.0.0.1 (never 3306, never the system server's files),
# waits until it answers, creates the database `andreas_test` and an administrator
# account with a random password, and exports
#
#     ANDREAS_TEST_MARIADB_URL=mysql+pymysql://andreas_admin:PASSWORD@127.0.0.1:PORT/andreas_test
#
# and MARIADB_TEST_DIR (the run directory: mariadb.pid, error.log, and mariadbd.args, the
# server's exact command line, NUL-separated, so a test can stop the server and start it
# again on the same data, socket and port: tests/agents_daemon/mariadb_control.py).
#
# mariadb_test_stop shuts it down (the PID in mariadb.pid, so a server a test restarted is
# found too) and deletes the data directory (logs stay). Servers left by runs that were
# killed (their shell is gone) are stopped and removed at the next start.
# Extra server options: MARIADB_TEST_OPTIONS (e.g. a bigger --innodb-buffer-pool-size).

# shellcheck source=scripts/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"

_mariadb_bin() {
    local name
    for name in "$@"; do
        if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
        if [ -x "/usr/sbin/$name" ]; then echo "/usr/sbin/$name"; return 0; fi
    done
    return 1
}

mariadb_test_install() {
    if _mariadb_bin mariadbd mysqld >/dev/null && _mariadb_bin mariadb-install-db \
            mysql_install_db >/dev/null; then
        return 0
    fi
    andreas_apt_install --recommends mariadb-test-server mariadbd mariadb-server
}

mariadb_test_start() {
    local base=${1:?usage: mariadb_test_start DIR}
    mariadb_test_install || return 1
    local server install admin client
    server=$(_mariadb_bin mariadbd mysqld)
    install=$(_mariadb_bin mariadb-install-db mysql_install_db)
    admin=$(_mariadb_bin mariadb-admin mysqladmin)
    client=$(_mariadb_bin mariadb mysql)
    mkdir -p "$base"
    base=$(cd "$base" && pwd)
    local old owner
    for old in "$base"/run-*; do
        [ -d "$old" ] || continue
        owner=${old##*/run-}
        if kill -0 "$owner" 2>/dev/null; then continue; fi   # another live run's server
        if [ -f "$old/mariadb.pid" ] && kill -0 "$(cat "$old/mariadb.pid")" 2>/dev/null; then
            kill "$(cat "$old/mariadb.pid")" 2>/dev/null || true   # SIGTERM: clean shutdown
            sleep 1
        fi
        rm -rf "$old"
    done
    base=$base/run-$$
    mkdir -p "$base"
    MARIADB_TEST_DIR=$base
    MARIADB_TEST_SOCKET=$base/mariadb.sock
    if [ ${#MARIADB_TEST_SOCKET} -gt 100 ]; then   # unix socket paths are limited to ~107 bytes
        MARIADB_TEST_SOCKET=$(mktemp -d /tmp/andreas-mariadb.XXXXXX)/mariadb.sock
    fi
    MARIADB_TEST_ADMIN=$admin
    MARIADB_TEST_CLIENT=$client
    local user
    user=$(id -un)
    if ! "$install" --no-defaults --datadir="$base/data" --user="$user" \
            --auth-root-authentication-method=normal --skip-test-db \
            >"$base/install.log" 2>&1; then
        echo "mariadb-test-server: mariadb-install-db failed (log: $base/install.log)" >&2
        tail -20 "$base/install.log" >&2
        return 1
    fi
    local port
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    local -a args
    # shellcheck disable=SC2206  # MARIADB_TEST_OPTIONS is a list of options
    args=("$server" --no-defaults --datadir="$base/data" --user="$user"
        --socket="$MARIADB_TEST_SOCKET" --port="$port" --bind-address=127.0.0.1 --skip-name-resolve
        --pid-file="$base/mariadb.pid" --log-error="$base/error.log"
        --character-set-server=utf8mb4 --collation-server=utf8mb4_unicode_ci
        --innodb-buffer-pool-size=256M --innodb-log-file-size=256M --max-connections=500
        --local-infile=1 --skip-log-bin ${MARIADB_TEST_OPTIONS:-})
    printf '%s\0' "${args[@]}" >"$base/mariadbd.args"
    "${args[@]}" >/dev/null 2>&1 &
    MARIADB_TEST_PID=$!
    local i
    for i in $(seq 1 120); do
        if "$admin" --no-defaults --socket="$MARIADB_TEST_SOCKET" -uroot ping >/dev/null 2>&1; then
            break
        fi
        if ! kill -0 "$MARIADB_TEST_PID" 2>/dev/null; then
            echo "mariadb-test-server: mariadbd exited at start (log: $base/error.log)" >&2
            tail -20 "$base/error.log" >&2
            return 1
        fi
        sleep 0.5
    done
    if ! "$admin" --no-defaults --socket="$MARIADB_TEST_SOCKET" -uroot ping >/dev/null 2>&1; then
        echo "mariadb-test-server: mariadbd did not answer within 60 s (log: $base/error.log)" >&2
        return 1
    fi
    local password
    password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
    # No anonymous accounts (they would shadow 'user'@'%' logins) and root only through
    # the private socket; the tests log in over TCP as andreas_admin.
    "$client" --no-defaults --socket="$MARIADB_TEST_SOCKET" -uroot <<SQL
DELETE FROM mysql.global_priv WHERE User = '' OR (User = 'root' AND Host <> 'localhost');
FLUSH PRIVILEGES;
CREATE USER 'andreas_admin'@'%' IDENTIFIED BY '$password';
GRANT ALL PRIVILEGES ON *.* TO 'andreas_admin'@'%' WITH GRANT OPTION;
CREATE DATABASE andreas_test CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci;
SQL
    export ANDREAS_TEST_MARIADB_URL="mysql+pymysql://andreas_admin:$password@127.0.0.1:$port/andreas_test"
    export MARIADB_TEST_SOCKET MARIADB_TEST_CLIENT MARIADB_TEST_ADMIN MARIADB_TEST_DIR
    echo "== MariaDB $("$server" --version | awk '{print $3}') on 127.0.0.1:$port" \
         "(socket $MARIADB_TEST_SOCKET, data $base/data)"
}

mariadb_test_stop() {
    [ -n "${MARIADB_TEST_PID:-}" ] || return 0
    # A test may have stopped the server and started it again (a new PID in the pid file).
    if [ -f "$MARIADB_TEST_DIR/mariadb.pid" ] && kill -0 "$(cat "$MARIADB_TEST_DIR/mariadb.pid")" 2>/dev/null; then
        MARIADB_TEST_PID=$(cat "$MARIADB_TEST_DIR/mariadb.pid")
    fi
    if kill -0 "$MARIADB_TEST_PID" 2>/dev/null; then
        "$MARIADB_TEST_ADMIN" --no-defaults --socket="$MARIADB_TEST_SOCKET" -uroot shutdown \
            >/dev/null 2>&1 || kill "$MARIADB_TEST_PID" 2>/dev/null || true
        local i
        for i in $(seq 1 60); do
            kill -0 "$MARIADB_TEST_PID" 2>/dev/null || break
            sleep 0.5
        done
        kill -0 "$MARIADB_TEST_PID" 2>/dev/null && kill -9 "$MARIADB_TEST_PID" 2>/dev/null
    fi
    MARIADB_TEST_PID=
    rm -rf "${MARIADB_TEST_DIR:?}/data" "$MARIADB_TEST_SOCKET"
    case $MARIADB_TEST_SOCKET in /tmp/andreas-mariadb.*) rmdir "$(dirname "$MARIADB_TEST_SOCKET")" ;; esac
}
