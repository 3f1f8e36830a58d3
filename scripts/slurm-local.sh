#!/usr/bin/env bash
# A single-node Slurm cluster on localhost, for trying `flscale sweep --emit-slurm N` on a
# laptop and for the real-Slurm tests (crates/flscale-cli/tests/slurm_cli.rs).
#
#   sudo bash scripts/slurm-local.sh start     # munged + slurmctld + slurmd; idempotent
#   export SLURM_CONF=/tmp/flscale-slurm/slurm.conf
#   sbatch runs/x/sweep.sbatch; squeue; ...
#   sudo bash scripts/slurm-local.sh status    # exit 0 when the node accepts jobs
#   sudo bash scripts/slurm-local.sh stop
#
# Needs Debian's slurm-wlm and munge (`apt-get install -y slurm-wlm munge`; `start` installs
# them when missing and it runs as root) and root, since slurmd starts jobs as their user.
# Every file of the daemons (slurm.conf, munge key and socket, state, spool, logs) lives under
# $FLSCALE_SLURM_DIR (default /tmp/flscale-slurm); nothing in /etc is changed. cgroups are off
# (proctrack/linuxproc, task/none) so that it runs inside containers; one node with 2 CPUs
# (FLSCALE_SLURM_CPUS), no accounting daemon (squeue/scontrol show the jobs; `sacct` is not
# available without slurmdbd).
set -euo pipefail

DIR="${FLSCALE_SLURM_DIR:-/tmp/flscale-slurm}"
CPUS="${FLSCALE_SLURM_CPUS:-2}"
NODE=flscale-node
export SLURM_CONF="$DIR/slurm.conf"

say() { echo "slurm-local: $*" >&2; }

install_packages() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
        return 0
    fi
    if [ "$(id -u)" != 0 ]; then
        say "slurm-wlm and munge are not installed and this is not root; install them with: sudo apt-get install -y slurm-wlm munge"
        return 1
    fi
    say "installing slurm-wlm and munge"
    DEBIAN_FRONTEND=noninteractive apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq slurm-wlm munge >/dev/null
}

write_config() {
    mkdir -p "$DIR/state" "$DIR/spool" "$DIR/munge"
    chmod 700 "$DIR/munge"
    if [ ! -s "$DIR/munge/munge.key" ]; then
        head -c 1024 /dev/urandom >"$DIR/munge/munge.key"
        chmod 600 "$DIR/munge/munge.key"
    fi
    local mem
    mem=$(awk '/MemTotal/ {print int($2 / 1024 / 2)}' /proc/meminfo)
    cat >"$DIR/slurm.conf" <<EOF
# Written by flscale's scripts/slurm-local.sh: one node on localhost, no cgroups, no accounting.
ClusterName=flscale-local
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmUser=root
SlurmdUser=root
SlurmctldPort=${FLSCALE_SLURM_PORT:-6817}
SlurmdPort=$(( ${FLSCALE_SLURM_PORT:-6817} + 1 ))
AuthType=auth/munge
AuthInfo=socket=$DIR/munge/munge.socket
CredType=cred/munge
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.pid
SlurmdPidFile=$DIR/slurmd.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
SchedulerType=sched/backfill
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$DIR/jobcomp.txt
MpiDefault=none
ReturnToService=2
# Finished jobs stay visible to squeue/scontrol for 10 minutes; SIGTERM comes 5 s before SIGKILL.
MinJobAge=600
KillWait=5
SlurmdTimeout=30
NodeName=$NODE NodeHostname=$(hostname) NodeAddr=127.0.0.1 CPUs=$CPUS RealMemory=$mem State=UNKNOWN
PartitionName=debug Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
}

alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

node_ready() {
    local state
    state=$(sinfo -h -n "$NODE" -o %T 2>/dev/null | head -1) || return 1
    case "$state" in
        idle* | mixed* | allocated* | completing*) return 0 ;;
        *) return 1 ;;
    esac
}

start() {
    install_packages
    if [ "$(id -u)" != 0 ]; then
        say "needs root (slurmd starts jobs as their user); run: sudo bash $0 start"
        return 1
    fi
    write_config
    if ! alive "$DIR/munge/munged.pid"; then
        rm -f "$DIR/munge/munge.socket" "$DIR/munge/munged.pid"
        munged --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
            --pid-file="$DIR/munge/munged.pid" --log-file="$DIR/munge/munged.log" \
            --seed-file="$DIR/munge/munged.seed"
    fi
    if ! alive "$DIR/slurmctld.pid"; then
        slurmctld -f "$SLURM_CONF"
    fi
    if ! alive "$DIR/slurmd.pid"; then
        slurmd -f "$SLURM_CONF" -N "$NODE"
    fi
    for _ in $(seq 1 60); do
        if node_ready; then
            scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
            say "running; export SLURM_CONF=$SLURM_CONF"
            return 0
        fi
        # A node left down by an earlier stop is put back.
        scontrol update nodename="$NODE" state=resume >/dev/null 2>&1 || true
        sleep 0.5
    done
    say "the node did not come up within 30 s; see $DIR/slurmctld.log and $DIR/slurmd.log"
    return 1
}

stop_one() {
    local pidfile="$1"
    if alive "$pidfile"; then
        local pid
        pid=$(cat "$pidfile")
        kill "$pid" 2>/dev/null || true
        for _ in $(seq 1 40); do
            kill -0 "$pid" 2>/dev/null || return 0
            sleep 0.25
        done
        kill -9 "$pid" 2>/dev/null || true
    fi
}

stop() {
    stop_one "$DIR/slurmd.pid"
    stop_one "$DIR/slurmctld.pid"
    stop_one "$DIR/munge/munged.pid"
    say "stopped"
}

status() {
    for d in munge/munged slurmctld slurmd; do
        if alive "$DIR/$d.pid"; then echo "$(basename "$d"): running (pid $(cat "$DIR/$d.pid"))"; else echo "$(basename "$d"): stopped"; fi
    done
    if node_ready; then
        echo "node $NODE: $(sinfo -h -n "$NODE" -o %T | head -1); export SLURM_CONF=$SLURM_CONF"
    else
        echo "node $NODE: not accepting jobs"
        return 1
    fi
}

case "${1:-}" in
    start) start ;;
    stop) stop ;;
    status) status ;;
    # Stops only slurmd, as a node failure would (the fault tests restart it with `start`).
    stop-node) stop_one "$DIR/slurmd.pid" ;;
    *)
        echo "usage: $0 start|stop|status|stop-node   (state under \$FLSCALE_SLURM_DIR, default /tmp/flscale-slurm)" >&2
        exit 2
        ;;
esac
