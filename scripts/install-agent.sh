#!/usr/bin/env bash
# Installs the andreas node agent on a GPU node as a systemd service. Run as root:
#
#     sudo bash scripts/install-agent.sh [--dry-run] [--source DIR|SPEC] [--prefix /opt/andreas]
#                                        [--etc-dir /etc/andreas] [--unit-dir /etc/systemd/system]
#                                        [--node-name NAME] [--no-start]
#
# What it does (every step is idempotent: a second run changes nothing it did before,
# upgrades the package, and never overwrites an operator's config or secrets):
#   1. the system user andreas-agent (no login, no home) in the docker group;
#   2. a virtual environment PREFIX/venv and `pip install` of the package with its [agent]
#      extra (default: this checkout) into it;
#   3. /etc/andreas/agent.toml from systemd/agent.toml.example (0640 root:andreas-agent),
#      only when missing;
#   4. /etc/andreas/agent.env for the secrets (0600 root:root; systemd reads it before
#      dropping privileges), created empty when missing, its mode and owner enforced;
#   5. the spool directory /var/lib/andreas-agent/spool (0750, owned by the agent user),
#      the only place the service may write;
#   6. the unit /etc/systemd/system/andreas-agent.service (checked with systemd-analyze
#      verify where available), enabled, and (re)started once a database is configured.
# --dry-run prints the commands and file writes instead of doing them (no root needed).
set -euo pipefail

SCRIPT_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO=$(dirname "$SCRIPT_DIR")
PREFIX=/opt/andreas
SOURCE=$REPO
NODE_NAME=$(hostname 2>/dev/null || echo node)
DRY_RUN=0
START=1
AGENT_USER=andreas-agent
ETC=/etc/andreas
STATE=/var/lib/andreas-agent
UNIT_DIR=/etc/systemd/system
PYTHON=${PYTHON:-python3}

usage() { sed -n '2,20p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
    case $1 in
        --dry-run) DRY_RUN=1 ;;
        --no-start) START=0 ;;
        --prefix) PREFIX=${2:?--prefix needs a directory}; shift ;;
        --source) SOURCE=${2:?--source needs a directory or a pip requirement}; shift ;;
        --node-name) NODE_NAME=${2:?--node-name needs a name}; shift ;;
        --etc-dir) ETC=${2:?--etc-dir needs a directory}; shift ;;
        --unit-dir) UNIT_DIR=${2:?--unit-dir needs a directory}; shift ;;
        -h|--help) usage; exit 0 ;;
        *) echo "install-agent.sh: unknown option $1 (see --help)" >&2; exit 2 ;;
    esac
    shift
done
for dir in "$PREFIX" "$ETC" "$UNIT_DIR"; do
    case $dir in /*) ;; *) echo "install-agent.sh: $dir: directories must be absolute" >&2; exit 2 ;; esac
done
VENV=$PREFIX/venv
UNIT=$UNIT_DIR/andreas-agent.service

say() { echo "== $*"; }

# run CMD...: do it, or print it (--dry-run).
run() {
    if [ "$DRY_RUN" -eq 1 ]; then
        printf '+'; printf ' %q' "$@"; printf '\n'
    else
        "$@"
    fi
}

# install_file SRC DEST MODE OWNER GROUP: copy a file with mode and owner.
install_file() {
    run install -m "$3" -o "$4" -g "$5" "$1" "$2"
}

# write_file DEST MODE OWNER GROUP DESCRIPTION < CONTENT: write a file atomically.
write_file() {
    local dest=$1 mode=$2 owner=$3 group=$4 what=$5
    if [ "$DRY_RUN" -eq 1 ]; then
        cat >/dev/null
        printf '+ write %s (%s, mode %s, %s:%s)\n' "$dest" "$what" "$mode" "$owner" "$group"
        return 0
    fi
    local tmp
    tmp=$(mktemp)
    cat >"$tmp"
    install -m "$mode" -o "$owner" -g "$group" "$tmp" "$dest"
    rm -f "$tmp"
}

# from_template TEMPLATE DEST MODE OWNER GROUP: write DEST from TEMPLATE unless it exists
# (an operator's file is never overwritten; its mode and owner are enforced).
from_template() {
    local template=$1 dest=$2 mode=$3 owner=$4 group=$5
    if [ -e "$dest" ]; then
        say "$dest exists: kept (mode and owner set to $mode $owner:$group)"
        run chown "$owner:$group" "$dest"
        run chmod "$mode" "$dest"
        return 0
    fi
    sed -e "s/@NODE_NAME@/$NODE_NAME/g" -e "s#/etc/andreas/#$ETC/#g" "$template" \
        | write_file "$dest" "$mode" "$owner" "$group" "from ${template#"$REPO"/}"
}

if [ "$DRY_RUN" -eq 0 ] && [ "$(id -u)" -ne 0 ]; then
    echo "install-agent.sh: run as root (or with --dry-run to see what it would do)" >&2
    exit 1
fi
if ! "$PYTHON" -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null; then
    echo "install-agent.sh: $PYTHON must be Python 3.11 or newer" >&2
    exit 1
fi
case $NODE_NAME in *[!A-Za-z0-9._-]*|"")
    echo "install-agent.sh: node name '$NODE_NAME' may hold letters, digits, . _ - only" >&2
    exit 2 ;;
esac

say "1. system user $AGENT_USER in the docker group"
if ! getent group docker >/dev/null; then
    say "   no docker group yet (Docker not installed?): creating it"
    run groupadd --system docker
fi
if id "$AGENT_USER" >/dev/null 2>&1; then
    run usermod --append --groups docker "$AGENT_USER"
else
    run useradd --system --user-group --groups docker --home-dir "$STATE" --no-create-home \
        --shell /usr/sbin/nologin --comment "andreas node agent" "$AGENT_USER"
fi

say "2. virtual environment $VENV and the andreas package from $SOURCE"
if [ ! -x "$VENV/bin/python" ]; then
    run install -d -m 0755 -o root -g root "$PREFIX"
    run "$PYTHON" -m venv "$VENV"
fi
run "$VENV/bin/python" -m pip install --quiet --upgrade pip
# A checkout gets the [agent] extra (what the node needs, not the manager's libraries); a pip
# requirement is used as given (write andreas[agent]).
if [ -d "$SOURCE" ]; then PACKAGE="$SOURCE[agent]"; else PACKAGE=$SOURCE; fi
run "$VENV/bin/python" -m pip install --quiet --upgrade "$PACKAGE"
if [ -f "$REPO/README.md" ]; then
    install_file "$REPO/README.md" "$PREFIX/README.md" 0644 root root
fi

say "3. configuration $ETC/agent.toml (0640 root:$AGENT_USER)"
run install -d -m 0755 -o root -g root "$ETC"
from_template "$REPO/systemd/agent.toml.example" "$ETC/agent.toml" 0640 root "$AGENT_USER"

say "4. secrets $ETC/agent.env (0600 root:root, read by systemd only)"
from_template "$REPO/systemd/agent.env.example" "$ETC/agent.env" 0600 root root

say "5. spool directory $STATE/spool (the service's only writable path)"
run install -d -m 0750 -o "$AGENT_USER" -g "$AGENT_USER" "$STATE"
run install -d -m 0750 -o "$AGENT_USER" -g "$AGENT_USER" "$STATE/spool"

say "6. systemd unit $UNIT"
unit_text=$(sed -e "s#/opt/andreas/#$PREFIX/#g" -e "s#/etc/andreas/#$ETC/#g" \
            "$REPO/systemd/andreas-agent.service")
if command -v systemd-analyze >/dev/null 2>&1 && [ "$DRY_RUN" -eq 0 ]; then
    check_dir=$(mktemp -d)
    printf '%s\n' "$unit_text" >"$check_dir/andreas-agent.service"
    if ! systemd-analyze verify "$check_dir/andreas-agent.service"; then
        echo "install-agent.sh: systemd-analyze verify rejects the unit (see above)" >&2
        rm -rf "$check_dir"
        exit 1
    fi
    rm -rf "$check_dir"
fi
printf '%s\n' "$unit_text" | write_file "$UNIT" 0644 root root "from systemd/andreas-agent.service"
run systemctl daemon-reload
run systemctl enable andreas-agent.service

configured=0
if grep -Eq '^[[:space:]]*ANDREAS_DB_URL=' "$ETC/agent.env" 2>/dev/null \
        || grep -Eq '^[[:space:]]*url[[:space:]]*=' "$ETC/agent.toml" 2>/dev/null; then
    configured=1
fi
if [ "$START" -eq 0 ]; then
    say "not started (--no-start)"
elif [ "$configured" -eq 1 ]; then
    run systemctl restart andreas-agent.service
else
    say "not started yet: no database configured"
fi
cat <<NEXT
== next steps
   - database: ANDREAS_DB_URL in $ETC/agent.env (or [store] url + password_file in $ETC/agent.toml)
   - register the node once with the manager's account (the agent's account may not):
       ANDREAS_DB_URL='mysql+pymysql://andreas_manager@DB/andreas' ANDREAS_DB_PASSWORD_FILE=... \\
         $VENV/bin/andreas-agent --config $ETC/agent.toml --register
   - check what the service will see, then start it:
       sudo $VENV/bin/andreas-agent --config $ETC/agent.toml --env-file $ETC/agent.env --check
       sudo systemctl restart andreas-agent && journalctl -u andreas-agent -f
NEXT
