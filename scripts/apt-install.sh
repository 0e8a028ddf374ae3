# shellcheck shell=bash
# One way for the set-up scripts to install a missing Debian package: with apt-get when
# root, else one line saying what to install. Source it, then
#
#     andreas_apt_install [--recommends] WHO WHAT PACKAGE...
#
# WHO names the caller in the message, WHAT is what is missing. Returns 1 (never exits:
# the caller decides) when it cannot install. `apt-get update` runs once per shell.

andreas_apt_install() {
    local recommends=--no-install-recommends
    if [ "${1:-}" = --recommends ]; then recommends=; shift; fi
    local who=${1:?usage: andreas_apt_install [--recommends] WHO WHAT PACKAGE...}
    local what=${2:?usage: andreas_apt_install [--recommends] WHO WHAT PACKAGE...}
    shift 2
    [ "$#" -gt 0 ] || { echo "andreas_apt_install: no package named" >&2; return 2; }
    if [ "$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then
        echo "$who: $what is missing; install the Debian package(s) $*" \
             "(apt-get install $*) and run again" >&2
        return 1
    fi
    echo "== installing $* (apt-get)"
    if [ -z "${ANDREAS_APT_UPDATED:-}" ]; then
        apt-get update -qq || return 1
        ANDREAS_APT_UPDATED=1
    fi
    # shellcheck disable=SC2086  # $recommends is one option or none
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $recommends "$@" >/dev/null
}
