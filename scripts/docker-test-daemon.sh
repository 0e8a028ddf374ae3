# Docker daemon and test image for the tests that run real containers. Source it, then:
#
#     docker_test_start out/docker       # installs docker.io / busybox-static if missing
#     trap docker_test_stop EXIT         # (scripts/test.sh chains it with MariaDB's stop)
#
# A daemon that already answers is used as it is: $DOCKER_HOST when it is set, else the
# system socket /var/run/docker.sock. Otherwise it starts a private throw-away dockerd
# (Debian's docker.io, installed with apt-get when dockerd is missing and we are root)
# with everything of its own: data root under DIR/run-<PID of this shell>/, exec root,
# pid file and API socket under a short /tmp/andreas-docker.XXXXXX directory (unix socket
# paths are limited to ~107 bytes), no iptables and no bridge (the test containers run
# with --network none), so it works in CI sandboxes and next to another run in the same
# checkout. Daemons left by runs that were killed (their shell is gone) are stopped and
# removed at the next start.
#
# The test image is made without any registry: `docker import` of a root file system
# holding Debian's static busybox (package busybox-static) and one symlink per applet,
# tagged andreas-test/busybox:latest. Exports
#
#     DOCKER_HOST=unix:///…/docker.sock
#     ANDREAS_TEST_DOCKER_IMAGE=andreas-test/busybox:latest
#
# The docker CLI (/usr/local/bin/docker may be newer than Debian's daemon) and the Python
# SDK (version="auto") negotiate the API version with the daemon.

# shellcheck source=scripts/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"

DOCKER_TEST_IMAGE=andreas-test/busybox:latest

_docker_bin() {
    local name
    for name in "$@"; do
        if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
        if [ -x "/usr/sbin/$name" ]; then echo "/usr/sbin/$name"; return 0; fi
        if [ -x "/usr/bin/$name" ]; then echo "/usr/bin/$name"; return 0; fi
    done
    return 1
}

_docker_static_busybox() {
    # The first busybox that is statically linked (it runs in an empty root file system).
    local bb out
    for bb in /bin/busybox /usr/bin/busybox "$(command -v busybox 2>/dev/null || true)"; do
        [ -n "$bb" ] && [ -x "$bb" ] || continue
        out=$(LC_ALL=C ldd "$bb" 2>&1 || true)   # ldd exits 1 on a static binary
        case $out in *"not a dynamic executable"*) echo "$bb"; return 0 ;; esac
    done
    return 1
}

_docker_answers() {
    # _docker_answers HOST: the daemon at HOST answers the API.
    DOCKER_HOST=$1 "$DOCKER_TEST_CLI" version --format '{{.Server.Version}}' >/dev/null 2>&1
}

_docker_stop_daemon() {
    # _docker_stop_daemon RUNDIR: stop the dockerd recorded in RUNDIR and remove RUNDIR.
    local run=$1 tmp pid i mnt
    tmp=$(cat "$run/tmpdir" 2>/dev/null || true)
    pid=$(cat "$run/dockerd.pid" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        if [ -n "$tmp" ] && [ -S "$tmp/docker.sock" ]; then
            # Containers first, so that dockerd does not wait for their stop timeouts.
            DOCKER_HOST="unix://$tmp/docker.sock" "$DOCKER_TEST_CLI" ps -aq 2>/dev/null \
                | xargs -r env DOCKER_HOST="unix://$tmp/docker.sock" "$DOCKER_TEST_CLI" \
                    rm -f >/dev/null 2>&1 || true
        fi
        kill "$pid" 2>/dev/null || true
        for i in $(seq 1 60); do
            kill -0 "$pid" 2>/dev/null || break
            sleep 0.5
        done
        kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
    fi
    # Mounts a killed daemon may have left behind (overlay layers, shm, netns).
    for mnt in $(awk -v a="$run/" -v b="$tmp/" \
            '(index($2, a) == 1) || (b != "/" && index($2, b) == 1) {print $2}' \
            /proc/mounts 2>/dev/null | sort -r); do
        umount -l "$mnt" 2>/dev/null || true
    done
    rm -rf "$run"
    case $tmp in /tmp/andreas-docker.*) rm -rf "$tmp" ;; esac
}

docker_test_install() {
    local need=
    _docker_bin dockerd >/dev/null || need="$need docker.io"
    _docker_static_busybox >/dev/null || need="$need busybox-static"
    if [ -n "$need" ]; then
        # shellcheck disable=SC2086  # a list of packages
        andreas_apt_install docker-test-daemon "dockerd or a static busybox" $need || return 1
    fi
    if ! _docker_bin docker >/dev/null; then
        andreas_apt_install docker-test-daemon "the docker client" docker.io || return 1
    fi
}

docker_test_start() {
    local base=${1:?usage: docker_test_start DIR}
    docker_test_install || return 1
    DOCKER_TEST_CLI=$(_docker_bin docker)
    DOCKER_TEST_PID=
    DOCKER_TEST_RUN=
    local host=
    if [ -n "${DOCKER_HOST:-}" ] && _docker_answers "$DOCKER_HOST"; then
        host=$DOCKER_HOST
    elif [ -z "${DOCKER_HOST:-}" ] && [ -S /var/run/docker.sock ] \
            && _docker_answers unix:///var/run/docker.sock; then
        host=unix:///var/run/docker.sock
    fi
    mkdir -p "$base"
    base=$(cd "$base" && pwd)
    local old owner
    for old in "$base"/run-*; do
        [ -d "$old" ] || continue
        owner=${old##*/run-}
        if kill -0 "$owner" 2>/dev/null; then continue; fi   # another live run's daemon
        _docker_stop_daemon "$old"
    done
    local how
    if [ -n "$host" ]; then
        how="the running daemon at $host"
    else
        local dockerd run tmp
        dockerd=$(_docker_bin dockerd)
        run=$base/run-$$
        rm -rf "$run"
        mkdir -p "$run"
        tmp=$(mktemp -d /tmp/andreas-docker.XXXXXX)
        echo "$tmp" >"$run/tmpdir"
        DOCKER_TEST_RUN=$run
        host=unix://$tmp/docker.sock
        echo '{}' >"$run/daemon.json"   # not the system's /etc/docker/daemon.json
        # shellcheck disable=SC2086  # DOCKER_TEST_OPTIONS is a list of options
        "$dockerd" --host "$host" --data-root "$run/root" --exec-root "$tmp/exec" \
            --pidfile "$run/dockerd.pid" --iptables=false --bridge=none \
            --log-level=warn --config-file "$run/daemon.json" ${DOCKER_TEST_OPTIONS:-} >"$run/dockerd.log" 2>&1 &
        DOCKER_TEST_PID=$!
        local i
        for i in $(seq 1 120); do
            _docker_answers "$host" && break
            if ! kill -0 "$DOCKER_TEST_PID" 2>/dev/null; then
                echo "docker-test-daemon: dockerd exited at start (log: $run/dockerd.log)" >&2
                tail -20 "$run/dockerd.log" >&2
                DOCKER_TEST_PID=
                return 1
            fi
            sleep 0.5
        done
        if ! _docker_answers "$host"; then
            echo "docker-test-daemon: dockerd did not answer within 60 s" \
                 "(log: $run/dockerd.log)" >&2
            tail -20 "$run/dockerd.log" >&2
            return 1
        fi
        how="a private dockerd (socket $tmp/docker.sock, data $run/root)"
    fi
    export DOCKER_HOST=$host
    _docker_test_image "$base" || return 1
    export ANDREAS_TEST_DOCKER_IMAGE=$DOCKER_TEST_IMAGE
    echo "== Docker $("$DOCKER_TEST_CLI" version --format '{{.Server.Version}}') on $how;" \
         "test image $DOCKER_TEST_IMAGE"
}

_docker_test_image() {
    # The test image: a static busybox and a symlink per applet, imported from a tarball.
    local base=$1 bb work applet
    bb=$(_docker_static_busybox) || {
        echo "docker-test-daemon: no statically linked busybox (package busybox-static)" >&2
        return 1
    }
    work=$(mktemp -d "$base/image.XXXXXX")
    mkdir -p "$work/rootfs/bin" "$work/rootfs/tmp" "$work/rootfs/etc"
    chmod 1777 "$work/rootfs/tmp"
    cp "$bb" "$work/rootfs/bin/busybox"
    for applet in $("$bb" --list); do
        case $applet in busybox|*/*|"") continue ;; esac
        ln -sf busybox "$work/rootfs/bin/$applet"
    done
    echo 'root:x:0:0:root:/root:/bin/sh' >"$work/rootfs/etc/passwd"
    echo 'root:x:0:' >"$work/rootfs/etc/group"
    tar -C "$work/rootfs" --numeric-owner --owner=0 --group=0 -cf "$work/rootfs.tar" .
    if ! "$DOCKER_TEST_CLI" import -c 'CMD ["/bin/sh"]' -c 'ENV PATH=/bin' \
            "$work/rootfs.tar" "$DOCKER_TEST_IMAGE" >"$work/import.log" 2>&1; then
        echo "docker-test-daemon: docker import failed:" >&2
        cat "$work/import.log" >&2
        rm -rf "$work"
        return 1
    fi
    rm -rf "$work"
}

docker_test_stop() {
    if [ -n "${DOCKER_TEST_RUN:-}" ]; then
        _docker_stop_daemon "$DOCKER_TEST_RUN"
    fi
    DOCKER_TEST_RUN=
    DOCKER_TEST_PID=
}
