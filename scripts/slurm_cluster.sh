#!/usr/bin/env bash
# A one-node Slurm cluster on this machine, for the Slurm tests (tests/slurm) and for trying the
# Slurm presets by hand. No systemd: munged, slurmctld and slurmd run in the foreground of background
# shells, their pids recorded in the state folder, and `stop` ends exactly those processes.
#
#   bash scripts/slurm_cluster.sh install      # root + apt-get: Debian's slurm-wlm and munge (idempotent)
#   bash scripts/slurm_cluster.sh start [DIR]  # write DIR's configs, start the daemons, return at once
#   bash scripts/slurm_cluster.sh wait [DIR]   # until the node is idle; on failure print why and the logs
#   bash scripts/slurm_cluster.sh stop [DIR]   # cancel our jobs, stop the daemons by their pids
#
# Every file lives in DIR (default /tmp/lade_bench_slurm): slurm.conf, the munge key and socket, the
# daemons' state, spool, logs and pids, and cluster.yaml, the description the tests take with
# `pytest tests/slurm --slurm-cluster=DIR/cluster.yaml`. Nothing is written to /etc: Slurm's commands
# find the config through SLURM_CONF=DIR/slurm.conf (Slurm's own variable), which the tests set for
# the commands they run and slurmd passes to every job.
set -euo pipefail

ACTION=${1:-}
DIR=$(realpath -m "${2:-/tmp/lade_bench_slurm}")
# How long `wait` waits for an idle node (Debian's 22.05 takes about 13 s here), and `stop` for exits.
START_TIMEOUT_S=90
STOP_TIMEOUT_S=30
DAEMONS=(munged slurmctld slurmd)

die() {
    echo "slurm_cluster: $*" >&2
    exit 1
}

install() {
    if command -v slurmctld >/dev/null && command -v slurmd >/dev/null && command -v munged >/dev/null; then
        return 0
    fi
    command -v apt-get >/dev/null || die "slurm-wlm and munge are not installed and there is no apt-get"
    [ "$(id -u)" = 0 ] || die "slurm-wlm and munge are not installed; installing them needs root"
    # The lock timeout: another apt-get (setup.sh's chromium, say) may hold dpkg's lock for a while.
    apt-get -o DPkg::Lock::Timeout=300 update -qq
    DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq slurm-wlm munge >/dev/null
}

alive() { # alive NAME: the recorded daemon still runs
    local pid
    pid=$(cat "$DIR/$1.pid" 2>/dev/null) || return 1
    [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null
}

listening() { # listening PORT: something accepts connections on localhost:PORT
    (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

free_ports() { # two free adjacent ports from 6817 on (another cluster on this machine keeps its own)
    local port
    for port in $(seq 6817 2 6917); do
        if ! listening "$port" && ! listening $((port + 1)); then
            echo "$port"
            return 0
        fi
    done
    die "no two free ports between 6817 and 6918"
}

write_configs() {
    local host cpus mem_mb port
    host=$(hostname -s)
    port=$(free_ports)
    cpus=$(nproc)
    # Leave a quarter of the memory to the machine itself; Slurm refuses jobs asking for more.
    mem_mb=$(($(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 * 3 / 4))
    mkdir -p "$DIR"/{state,spool,munge}
    chmod 755 "$DIR/munge"  # munged wants its socket folder reachable by every client; the key stays 0600
    if [ ! -s "$DIR/munge/munge.key" ]; then
        if command -v mungekey >/dev/null; then
            mungekey --create --keyfile="$DIR/munge/munge.key"
        else # munge before 0.5.14 has no mungekey: any 1 KiB of random bytes is a key
            (umask 077 && head -c 1024 /dev/urandom >"$DIR/munge/munge.key")
        fi
    fi
    cat >"$DIR/slurm.conf" <<EOF
# Written by scripts/slurm_cluster.sh: a one-node test cluster, every file under $DIR.
ClusterName=lade
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$port
SlurmdPort=$((port + 1))
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$DIR/munge/munge.socket
SlurmUser=root
SlurmdUser=root
StateSaveLocation=$DIR/state
SlurmdSpoolDir=$DIR/spool
SlurmctldPidFile=$DIR/slurmctld.daemon.pid
SlurmdPidFile=$DIR/slurmd.daemon.pid
SlurmctldLogFile=$DIR/slurmctld.log
SlurmdLogFile=$DIR/slurmd.log
# No cgroups in a container without systemd: track job processes through /proc.
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
PlugStackConfig=/dev/null
JobAcctGatherType=jobacct_gather/none
# No accounting (no slurmdbd): sacct has nothing to say, which is the case the launcher must survive.
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
SwitchType=switch/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
ReturnToService=2
# Short waits: tests cancel and requeue jobs, and a test cluster should react in seconds.
KillWait=5
MessageTimeout=10
SlurmdTimeout=60
InactiveLimit=0
MinJobAge=300
NodeName=$host NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=$host Default=YES MaxTime=INFINITE State=UP
EOF
    cat >"$DIR/cluster.yaml" <<EOF
# The test cluster that scripts/slurm_cluster.sh started (pytest tests/slurm --slurm-cluster=THIS_FILE).
slurm_conf: $DIR/slurm.conf  # given to Slurm's commands as SLURM_CONF
shared_dir: null  # where tests put their sweeps (must be visible on every node); null: pytest's temp folder
overrides: []  # extra overrides for every test launch, e.g. [hydra.launcher.partition=debug]
EOF
}

start() {
    install
    mkdir -p "$DIR"
    for daemon in "${DAEMONS[@]}"; do
        alive "$daemon" && die "$daemon already runs (pid $(cat "$DIR/$daemon.pid")); stop it first: $0 stop $DIR"
    done
    write_configs
    rm -f "$DIR"/*.daemon.pid "$DIR/munge/munge.socket"*
    export SLURM_CONF="$DIR/slurm.conf"
    # Each daemon in the foreground of a background process: $! is the daemon itself, recorded for stop.
    munged --foreground --force --key-file="$DIR/munge/munge.key" --socket="$DIR/munge/munge.socket" \
        --pid-file="$DIR/munge/munged.pid" --seed-file="$DIR/munge/munged.seed" \
        --log-file="$DIR/munged.log" </dev/null >>"$DIR/munged.out" 2>&1 &
    echo $! >"$DIR/munged.pid"
    # slurmctld and slurmd need munge's socket from their first message on.
    for _ in $(seq 50); do [ -S "$DIR/munge/munge.socket" ] && break; sleep 0.1; done
    # -i: ignore (not fail on) state files of an earlier run of this folder.
    slurmctld -D -i -f "$SLURM_CONF" </dev/null >>"$DIR/slurmctld.out" 2>&1 &
    echo $! >"$DIR/slurmctld.pid"
    slurmd -D -f "$SLURM_CONF" </dev/null >>"$DIR/slurmd.out" 2>&1 &
    echo $! >"$DIR/slurmd.pid"
    echo "slurm_cluster: starting in $DIR (SLURM_CONF=$SLURM_CONF)"
}

show_logs() {
    for file in munged.log munged.out slurmctld.log slurmctld.out slurmd.log slurmd.out; do
        [ -s "$DIR/$file" ] || continue
        echo "----- $DIR/$file (last 40 lines)" >&2
        tail -n 40 "$DIR/$file" >&2
    done
}

wait_idle() {
    [ -f "$DIR/slurm.conf" ] || die "no cluster in $DIR: run $0 start $DIR first"
    export SLURM_CONF="$DIR/slurm.conf"
    local deadline=$((SECONDS + START_TIMEOUT_S)) state=""
    while [ $SECONDS -lt $deadline ]; do
        for daemon in "${DAEMONS[@]}"; do
            if ! alive "$daemon"; then
                echo "slurm_cluster: $daemon exited during start-up" >&2
                show_logs
                exit 1
            fi
        done
        state=$(sinfo -h -N -o "%T" 2>/dev/null | head -n 1 || true)
        if [ "$state" = idle ]; then
            echo "slurm_cluster: node $(hostname -s) idle; SLURM_CONF=$SLURM_CONF"
            return 0
        fi
        sleep 0.5
    done
    echo "slurm_cluster: the node is not idle after ${START_TIMEOUT_S} s (state: ${state:-no answer from slurmctld})" >&2
    show_logs
    exit 1
}

stop_pid() { # stop_pid NAME: TERM the recorded daemon, KILL it if it outlives the timeout
    local pid
    pid=$(cat "$DIR/$1.pid" 2>/dev/null) || return 0
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
        kill -TERM "$pid" 2>/dev/null || true
        for _ in $(seq $((STOP_TIMEOUT_S * 10))); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "slurm_cluster: $1 (pid $pid) ignored SIGTERM for ${STOP_TIMEOUT_S} s; killing it" >&2
            kill -KILL "$pid" 2>/dev/null || true
        fi
    fi
    rm -f "$DIR/$1.pid"
}

job_processes() { # pids of processes started by this cluster's jobs (their environment names our config)
    local proc
    for proc in /proc/[0-9]*; do
        # A process may end (or be another user's) while we look: such a file is skipped quietly.
        { tr '\0' '\n' <"$proc/environ"; } 2>/dev/null | grep -qx "SLURM_CONF=$DIR/slurm.conf" && echo "${proc#/proc/}"
    done
    return 0
}

stop() {
    [ -d "$DIR" ] || return 0
    # SLURM_CONF per command, not exported: this script's own processes must not look like job processes.
    local conf="$DIR/slurm.conf"
    if alive slurmctld; then
        # Jobs first: their step daemons outlive slurmd, and a job left running would outlive the test.
        SLURM_CONF=$conf scancel --quiet --full --user="$(id -un)" 2>/dev/null || true
        for _ in $(seq 100); do
            [ -z "$(SLURM_CONF=$conf squeue -h -t R,CG,CF -o %i 2>/dev/null)" ] && break
            sleep 0.1
        done
    fi
    stop_pid slurmd
    stop_pid slurmctld
    stop_pid munged
    local leftovers
    leftovers=$(job_processes | grep -vx "$$" || true)
    if [ -n "$leftovers" ]; then
        echo "slurm_cluster: killing job processes left behind: $(echo $leftovers)" >&2
        kill -KILL $leftovers 2>/dev/null || true
    fi
    echo "slurm_cluster: stopped ($DIR)"
}

case "$ACTION" in
install) install ;;
start) start ;;
wait) wait_idle ;;
stop) stop ;;
*) die "usage: $0 install|start|wait|stop [DIR]" ;;
esac
