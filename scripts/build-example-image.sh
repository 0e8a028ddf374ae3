#!/usr/bin/env bash
# Build the example training image (examples/train) WITHOUT any registry: `docker import`
# of a root file system made here.
#
#   bash scripts/build-example-image.sh [--tag andreas-example/train:latest]
#        [--docker-host unix:///…] [--host-runtime | --debootstrap [--mirror URL]]
#   bash scripts/build-example-image.sh --print-volumes    # the bind mounts, one a line
#
# --host-runtime (default; tests, laptops): the image holds only /app/train.py,
#   /app/andreas/job/ (a copy of the stdlib-only job contract package andreas/job/, no
#   andreas/__init__.py: train.py's `from andreas import job` finds it as a namespace
#   package), /app/history.py, /tmp (1777), /etc/passwd,
#   /etc/group, /etc/alternatives (the host's symlinks: Debian's numpy finds libblas and
#   liblapack through them), an empty /usr and the host's /bin /sbin /lib /lib64 ...
#   as they are on the host: symlinks into /usr on a merged-/usr system (Debian 12), an
#   empty mount point where the host has a real directory. At run time the container
#   needs read-only bind mounts of the host's /usr (and of any such real directory): it
#   runs the HOST's Debian /usr/bin/python3 with Debian's python3-numpy, which this script
#   installs (apt-get, when root) if it is missing. The mounts go to the executor's
#   `[executor] extra_volumes`; the script prints the exact list (on Debian 12:
#   ["/usr:/usr:ro"]) and stores it in the image label andreas-example.volumes.
#   Rebuild after the host's python3 or its alternatives change.
# --debootstrap: a self-contained Debian root (debootstrap --variant=minbase bookworm
#   with python3-numpy; needs root and network access to the mirror; about 1 minute and
#   170 MB). Needs no extra volumes. Not used by the tests.
#
# DOCKER_HOST is respected; --docker-host overrides it. Both modes: CMD
# ["/usr/bin/python3","/app/train.py"], WORKDIR /app, PATH=/usr/bin:/bin.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
tag=andreas-example/train:latest
mode=host-runtime
mirror=http://deb.debian.org/debian
suite=bookworm
print_volumes=

usage() { sed -n '2,/^set -euo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }
die() { echo "build-example-image: $*" >&2; exit 1; }

while [ $# -gt 0 ]; do
    case $1 in
        --tag) tag=${2:?--tag needs a value}; shift 2 ;;
        --tag=*) tag=${1#--tag=}; shift ;;
        --docker-host) export DOCKER_HOST=${2:?--docker-host needs a value}; shift 2 ;;
        --docker-host=*) export DOCKER_HOST=${1#--docker-host=}; shift ;;
        --host-runtime) mode=host-runtime; shift ;;
        --debootstrap) mode=debootstrap; shift ;;
        --mirror) mirror=${2:?--mirror needs a value}; shift 2 ;;
        --print-volumes) print_volumes=1; shift ;;
        -h|--help) usage; exit 0 ;;
        *) die "unknown argument $1 (see --help)" ;;
    esac
done

# The top-level directories a dynamically linked /usr/bin/python3 may reach outside /usr.
TOP_DIRS="bin sbin lib lib32 lib64 libx32"

host_volumes() {
    # The read-only bind mounts a host-runtime container needs: /usr, and every top
    # directory that is a real directory on this host (not a symlink into /usr).
    local d
    echo "/usr:/usr:ro"
    for d in $TOP_DIRS; do
        if [ -d "/$d" ] && [ ! -L "/$d" ]; then echo "/$d:/$d:ro"; fi
    done
}

if [ -n "$print_volumes" ]; then
    [ "$mode" = host-runtime ] || exit 0      # a debootstrap image needs none
    host_volumes
    exit 0
fi

docker_cli=$(command -v docker || true)
[ -n "$docker_cli" ] || die "the docker client is missing (Debian: apt-get install docker.io)"

# shellcheck source=scripts/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"
apt_install() {
    # apt_install WHAT PACKAGES...: installed, or the script ends with what to install.
    andreas_apt_install build-example-image "$@" || exit 1
}

work=$(mktemp -d "${TMPDIR:-/tmp}/andreas-example-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root"

if [ "$mode" = host-runtime ]; then
    if ! /usr/bin/python3 -c 'import numpy' >/dev/null 2>&1; then
        apt_install "/usr/bin/python3 with numpy" python3 python3-numpy
        /usr/bin/python3 -c 'import numpy' || die "/usr/bin/python3 still cannot import numpy"
    fi
    mkdir -p "$root/usr" "$root/etc"
    for d in $TOP_DIRS; do
        if [ -L "/$d" ]; then
            ln -s "$(readlink "/$d")" "$root/$d"
        elif [ -d "/$d" ]; then
            mkdir -p "$root/$d"
        fi
    done
    if [ -d /etc/alternatives ]; then
        mkdir -p "$root/etc/alternatives"
        find /etc/alternatives -maxdepth 1 -type l -exec cp -P {} "$root/etc/alternatives/" \;
    fi
    runtime="host runtime: $(/usr/bin/python3 -c 'import sys, numpy
print(f"/usr/bin/python3 {sys.version.split()[0]}, numpy {numpy.__version__}")')"
else
    [ "$(id -u)" -eq 0 ] || die "--debootstrap needs root (chroot, device nodes)"
    command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap debootstrap
    echo "== debootstrap $suite from $mirror (minutes)"
    debootstrap --variant=minbase --include=python3-numpy "$suite" "$root" "$mirror" \
        >"$work/debootstrap.log" 2>&1 || { tail -20 "$work/debootstrap.log" >&2;
                                          die "debootstrap failed"; }
    rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* \
           "$root"/usr/share/doc "$root"/usr/share/man "$root"/usr/share/locale
    runtime="debootstrap $suite"
fi

mkdir -p "$root/app" "$root/tmp" "$root/etc"
chmod 1777 "$root/tmp"
cp "$here/examples/train/train.py" "$here/examples/train/history.py" "$root/app/"
mkdir -p "$root/app/andreas/job"
cp "$here"/andreas/job/*.py "$root/app/andreas/job/"
if [ "$mode" = host-runtime ]; then
    printf '%s\n' 'root:x:0:0:root:/root:/usr/sbin/nologin' \
        'nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin' >"$root/etc/passwd"
    printf '%s\n' 'root:x:0:' 'nogroup:x:65534:' >"$root/etc/group"
fi

changes=(-c 'CMD ["/usr/bin/python3","/app/train.py"]' -c 'ENV PATH=/usr/bin:/bin'
         -c 'ENV PYTHONUNBUFFERED=1' -c 'WORKDIR /app')
volumes=
if [ "$mode" = host-runtime ]; then
    volumes=$(host_volumes | paste -sd, -)
    changes+=(-c "LABEL andreas-example.volumes=$volumes")
fi
tar -C "$root" --numeric-owner --owner=0 --group=0 -cf "$work/rootfs.tar" .
"$docker_cli" import "${changes[@]}" "$work/rootfs.tar" "$tag" >"$work/import.log" 2>&1 \
    || { cat "$work/import.log" >&2; die "docker import failed (DOCKER_HOST=${DOCKER_HOST:-unset})"; }

echo "== built $tag ($runtime) on ${DOCKER_HOST:-the default daemon}"
if [ "$mode" = host-runtime ]; then
    list=$(host_volumes | sed 's/.*/"&"/' | paste -sd, - | sed 's/,/, /g')
    echo "== the container needs these read-only bind mounts of the host; andreas.toml:"
    echo "[executor]"
    echo "extra_volumes = [$list]"
else
    echo "== self-contained: no extra_volumes needed"
fi
try="docker run --rm --network none"
if [ "$mode" = host-runtime ]; then try="$try$(host_volumes | sed 's/^/ -v /' | tr -d '\n')"; fi
echo "== try it: mkdir -p ckpt && $try -v \"\$PWD/ckpt:/andreas/checkpoint\"" \
     "-e ANDREAS_CHECKPOINT_DIR=/andreas/checkpoint -e ANDREAS_EPOCHS=3 $tag" \
     "&& $try -v \"\$PWD/ckpt:/andreas/checkpoint\" $tag python3 history.py /andreas/checkpoint"
