# A real Slurm cluster on this host for the tests (marker slurm). Source it, then:
#
#     slurm_test_start out/slurm         # installs slurmctld slurmd slurm-client munge
#     trap slurm_test_stop EXIT          # (scripts/test.sh chains it with the others)
#
# Debian's Slurm (22.05 on bookworm) with everything private: a munge key and socket of
# its own, one slurmctld and SLURM_TEST_NODES (default 3) slurmd daemons on this host, each
# started as `slurmd -N <node>` on its own port (Debian's build supports several slurmd per
# host), state, spool, logs and job output under DIR/run-<PID of this shell>/. Never
# slurm-wlm-emulator. Each node has two fake V100 GPUs: character devices made with mknod
# (major 195, the NVIDIA driver's; Slurm's GRES ignores regular files), listed in gres.conf.
# The daemons run under the names slurmctld and slurmd (Debian's *-wlm aliases make slurmd
# ignore Gres=). Power saving is on with a SuspendTime of a day, so only an explicit
# `scontrol update nodename=X state=POWER_DOWN_ASAP` powers a node down: SuspendProgram stops
# its slurmd and ResumeProgram starts it again (Slurm runs them with a bare environment,
# so node.sh sets PATH and starts slurmd with setsid and redirected stdio).
#
# Every daemon is started and stopped by its PID (pid files under the run directory);
# clusters left by runs that were killed (their shell is gone) are stopped at the next
# start. Exports
#
#     SLURM_CONF=…/slurm.conf               (sbatch, squeue, scontrol, scancel read it)
#     ANDREAS_TEST_SLURM_DIR=…/run-PID      (node.sh, logs, job output under out/)
#     ANDREAS_TEST_SLURM_NODES="sn1 sn2 sn3"
#     ANDREAS_TEST_SLURM_PARTITION=gpu
#
# `$ANDREAS_TEST_SLURM_DIR/node.sh stop|start|kill NODE` stops, starts or kills (SIGKILL,
# with the node's job processes: a node lost) one node's slurmd; the tests use it.

# shellcheck source=scripts/apt-install.sh
source "$(dirname "${BASH_SOURCE[0]}")/apt-install.sh"

SLURM_TEST_PARTITION=gpu

_slurm_bin() {
    local name=$1
    if command -v "$name" >/dev/null 2>&1; then command -v "$name"; return 0; fi
    if [ -x "/usr/sbin/$name" ]; then echo "/usr/sbin/$name"; return 0; fi
    if [ -x "/usr/bin/$name" ]; then echo "/usr/bin/$name"; return 0; fi
    return 1
}

slurm_test_install() {
    local need= prog pkg
    for prog in slurmctld:slurmctld slurmd:slurmd sbatch:slurm-client munged:munge; do
        _slurm_bin "${prog%%:*}" >/dev/null || need="$need ${prog##*:}"
    done
    [ -z "$need" ] && return 0
    for pkg in $need; do
        if [ "$pkg" = slurm-wlm-emulator ]; then return 1; fi   # never the emulator
    done
    # shellcheck disable=SC2086  # a list of packages
    andreas_apt_install slurm-test-cluster "a Slurm program" $need
}

_slurm_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

_slurm_stop_run() {
    # _slurm_stop_run RUNDIR: stop the daemons recorded in RUNDIR (slurmd first, then
    # slurmctld, then munged), the job processes they leave, and remove RUNDIR.
    local run=$1 pidfile pid i
    [ -d "$run" ] || return 0
    for pidfile in "$run"/pid/slurmd-*.pid "$run"/pid/slurmctld.pid "$run"/pid/munged.pid; do
        [ -f "$pidfile" ] || continue
        pid=$(cat "$pidfile" 2>/dev/null || true)
        if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
            kill "$pid" 2>/dev/null || true
            for i in $(seq 1 40); do
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.25
            done
            kill -0 "$pid" 2>/dev/null && kill -9 "$pid" 2>/dev/null
        fi
    done
    # Job steps (slurmstepd and the jobs under them) of this cluster's nodes.
    if [ -x "$run/node.sh" ]; then
        "$run/node.sh" reap-all >/dev/null 2>&1 || true
    fi
    local tmp
    tmp=$(cat "$run/tmpdir" 2>/dev/null || true)
    rm -rf "$run"
    case $tmp in /tmp/andreas-slurm.*) rm -rf "$tmp" ;; esac
}

_slurm_write_conf() {
    # _slurm_write_conf RUN TMP NODES...: slurm.conf, gres.conf, cgroup.conf, node.sh.
    local run=$1 tmp=$2
    shift 2
    local ctld_port node port k nodes_csv=
    ctld_port=$(_slurm_free_port)
    for node in "$@"; do nodes_csv="${nodes_csv:+$nodes_csv,}$node"; done
    cat >"$run/slurm.conf" <<EOF
# The andreas test cluster (scripts/slurm-test-cluster.sh); everything under $run.
ClusterName=andreastest
SlurmctldHost=localhost
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$tmp/munge.socket
CredType=cred/munge
StateSaveLocation=$run/state
SlurmdSpoolDir=$run/spool/%n
SlurmctldPidFile=$run/pid/slurmctld.pid
SlurmdPidFile=$run/pid/slurmd-%n.pid
SlurmctldLogFile=$run/log/slurmctld.log
SlurmdLogFile=$run/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
SwitchType=switch/none
MpiDefault=none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
GresTypes=gpu
SlurmdParameters=config_overrides
ReturnToService=2
SlurmdTimeout=5
SlurmctldTimeout=30
MessageTimeout=5
InactiveLimit=0
KillWait=5
MinJobAge=3600
Waittime=0
TreeWidth=64
# Power saving: only on request (SuspendTime is a day); node.sh does the switching.
SuspendProgram=$run/node.sh
ResumeProgram=$run/node.sh
SuspendTime=86400
SuspendTimeout=5
ResumeTimeout=30
SuspendRate=0
ResumeRate=0
DebugFlags=NO_CONF_HASH
EOF
    k=0
    : >"$run/gres.conf"
    for node in "$@"; do
        port=$(_slurm_free_port)
        mkdir -p "$run/dev/$node" "$run/spool/$node"
        mknod "$run/dev/$node/nvidia0" c 195 0
        mknod "$run/dev/$node/nvidia1" c 195 1
        echo "NodeName=$node NodeHostname=localhost NodeAddr=127.0.0.1 Port=$port CPUs=4 RealMemory=2000 Gres=gpu:v100:2 State=UNKNOWN" \
            >>"$run/slurm.conf"
        echo "NodeName=$node Name=gpu Type=v100 File=$run/dev/$node/nvidia[0-1]" >>"$run/gres.conf"
        k=$((k + 1))
    done
    echo "PartitionName=$SLURM_TEST_PARTITION Nodes=$nodes_csv Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO" \
        >>"$run/slurm.conf"
    echo "PartitionName=other Nodes=$nodes_csv MaxTime=INFINITE State=UP" >>"$run/slurm.conf"

    # node.sh: start / stop / kill one node's slurmd; SuspendProgram and ResumeProgram
    # (called by slurmctld with a host list and a bare environment).
    cat >"$run/node.sh" <<EOF
#!/bin/sh
# One node's slurmd of the andreas test cluster: $run
export PATH=/usr/sbin:/usr/bin:/sbin:/bin
export SLURM_CONF=$run/slurm.conf
RUN=$run
SLURMD=$(_slurm_bin slurmd)
SCONTROL=$(_slurm_bin scontrol)
SQUEUE=$(_slurm_bin squeue)
EOF
    cat >>"$run/node.sh" <<'EOF'
pidof_node() { cat "$RUN/pid/slurmd-$1.pid" 2>/dev/null; }
start_node() {
    # A start is a boot: a slurmd still running (a resume that timed out) is restarted.
    stop_node "$1" TERM
    setsid "$SLURMD" -b -N "$1" -f "$SLURM_CONF" </dev/null >>"$RUN/log/slurmd-$1.out" 2>&1
}
ours() { grep -qsxzF "SLURM_CONF=$SLURM_CONF" "/proc/$1/environ"; }
jobs_on() { "$SQUEUE" -h -w "$1" -t running,completing -o %i 2>/dev/null; }
reap_node() {
    # A lost machine takes its jobs with it: its slurmstepd first (so that nothing reports
    # the jobs' end: Slurm learns of the loss by the node not answering), then every job
    # process that ran there. $2: the node's job ids.
    for id in $2; do
        for p in $(pgrep -f "^slurmstepd: \[$id\."); do ours "$p" && kill -9 "$p"; done
    done
    for f in $(grep -lsxzF "SLURMD_NODENAME=$1" /proc/[0-9]*/environ); do
        p=${f#/proc/}; p=${p%/environ}
        ours "$p" && kill -9 "$p"
    done
}
stop_node() {
    pid=$(pidof_node "$1")
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -"${2:-TERM}" "$pid"
        i=0
        while kill -0 "$pid" 2>/dev/null && [ $i -lt 40 ]; do sleep 0.25; i=$((i + 1)); done
    fi
}
what=$1; shift
nodes=
for spec in "$@"; do nodes="$nodes $("$SCONTROL" show hostnames "$spec" 2>/dev/null || echo "$spec")"; done
case $what in
    start) for n in $nodes; do start_node "$n"; done ;;
    stop) for n in $nodes; do stop_node "$n" TERM; done ;;
    kill) for n in $nodes; do ids=$(jobs_on "$n"); stop_node "$n" KILL; reap_node "$n" "$ids"; done ;;
    reap-all)
        for p in $(pgrep -f "^slurmstepd: \["); do ours "$p" && kill -9 "$p"; done
        for f in $(grep -lsxzF "SLURM_CONF=$SLURM_CONF" /proc/[0-9]*/environ); do
            p=${f#/proc/}; p=${p%/environ}
            grep -qsz "^SLURMD_NODENAME=" "/proc/$p/environ" && kill -9 "$p"
        done ;;
    *) echo "node.sh: unknown action $what (start, stop, kill, reap-all)" >&2; exit 2 ;;
esac
EOF
    chmod 755 "$run/node.sh"
    # Slurm calls SuspendProgram and ResumeProgram with only the host list: two wrappers.
    printf '#!/bin/sh\nexec %s stop "$@"\n' "$run/node.sh" >"$run/suspend.sh"
    # The resumed slurmd reports its boot as now (-b); Slurm takes a boot time before its
    # POWER_UP request (rounded to the second) for a node that never rebooted: "boot" 2 s.
    printf '#!/bin/sh\nsleep 2\nexec %s start "$@"\n' "$run/node.sh" >"$run/resume.sh"
    chmod 755 "$run/suspend.sh" "$run/resume.sh"
    sed -i "s|^SuspendProgram=.*|SuspendProgram=$run/suspend.sh|; s|^ResumeProgram=.*|ResumeProgram=$run/resume.sh|" \
        "$run/slurm.conf"
    cat >"$run/cgroup.conf" <<'EOF'
CgroupPlugin=autodetect
IgnoreSystemd=yes
EOF
}

_slurm_answers() {
    SLURM_CONF=$1 "$SLURM_TEST_SCONTROL" ping 2>/dev/null | grep -q "is UP"
}

slurm_test_start() {
    local base=${1:?usage: slurm_test_start DIR}
    slurm_test_install || return 1
    SLURM_TEST_SCONTROL=$(_slurm_bin scontrol)
    local n=${SLURM_TEST_NODES:-3} nodes= i
    for i in $(seq 1 "$n"); do nodes="$nodes sn$i"; done
    mkdir -p "$base"
    base=$(cd "$base" && pwd)
    local old owner
    for old in "$base"/run-*; do
        [ -d "$old" ] || continue
        owner=${old##*/run-}
        if kill -0 "$owner" 2>/dev/null; then continue; fi   # another live run's cluster
        _slurm_stop_run "$old"
    done
    local run=$base/run-$$ tmp
    _slurm_stop_run "$run"
    mkdir -p "$run"/{state,pid,log,spool,dev,output}
    chmod 1777 "$run/output"
    tmp=$(mktemp -d /tmp/andreas-slurm.XXXXXX)
    echo "$tmp" >"$run/tmpdir"
    SLURM_TEST_RUN=$run
    # shellcheck disable=SC2086  # a list of nodes
    _slurm_write_conf "$run" "$tmp" $nodes || return 1

    # munge: a private key, socket, pid, log and seed file.
    dd if=/dev/urandom of="$run/munge.key" bs=1024 count=1 status=none
    chmod 400 "$run/munge.key"
    "$(_slurm_bin munged)" --force --key-file="$run/munge.key" --socket="$tmp/munge.socket" \
        --pid-file="$run/pid/munged.pid" --log-file="$run/log/munged.log" \
        --seed-file="$run/munged.seed" >"$run/log/munged.out" 2>&1 || {
        echo "slurm-test-cluster: munged did not start (log: $run/log/munged.log)" >&2
        tail -5 "$run/log/munged.log" "$run/log/munged.out" >&2
        return 1
    }

    export SLURM_CONF=$run/slurm.conf
    "$(_slurm_bin slurmctld)" -f "$SLURM_CONF" -i >"$run/log/slurmctld.out" 2>&1 || {
        echo "slurm-test-cluster: slurmctld did not start (log: $run/log/slurmctld.log)" >&2
        tail -20 "$run/log/slurmctld.log" "$run/log/slurmctld.out" >&2
        return 1
    }
    for i in $(seq 1 80); do
        _slurm_answers "$SLURM_CONF" && break
        sleep 0.25
    done
    if ! _slurm_answers "$SLURM_CONF"; then
        echo "slurm-test-cluster: slurmctld does not answer (log: $run/log/slurmctld.log)" >&2
        tail -20 "$run/log/slurmctld.log" >&2
        return 1
    fi
    # shellcheck disable=SC2086  # a list of nodes
    "$run/node.sh" start $nodes
    local idle
    for i in $(seq 1 120); do
        idle=$("$SLURM_TEST_SCONTROL" -o show node 2>/dev/null | grep -c "State=IDLE " || true)
        [ "$idle" -ge "$n" ] && break
        sleep 0.25
    done
    if [ "$idle" -lt "$n" ]; then
        echo "slurm-test-cluster: only $idle of $n nodes idle after 30 s" \
             "(logs: $run/log/)" >&2
        "$SLURM_TEST_SCONTROL" -o show node >&2
        tail -n 5 "$run"/log/slurmd-*.log >&2
        return 1
    fi
    export ANDREAS_TEST_SLURM_DIR=$run
    export ANDREAS_TEST_SLURM_NODES="${nodes# }"
    export ANDREAS_TEST_SLURM_PARTITION=$SLURM_TEST_PARTITION
    echo "== Slurm $("$SLURM_TEST_SCONTROL" --version | awk '{print $2}') test cluster:" \
         "slurmctld and $n slurmd ($ANDREAS_TEST_SLURM_NODES) under $run"
}

slurm_test_stop() {
    if [ -n "${SLURM_TEST_RUN:-}" ]; then
        _slurm_stop_run "$SLURM_TEST_RUN"
    fi
    SLURM_TEST_RUN=
}
