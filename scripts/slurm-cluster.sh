#!/usr/bin/env bash
# A real two-node Slurm on this machine, for the tests of the slurm provider.
#   start DIR   munged (its own key, socket and pid file under DIR), one slurmctld and two slurmd
#               (-N n1, -N n2) on 127.0.0.1, each with its own port, spool directory, log and pid file;
#               no slurmdbd, so there is no accounting (sacct fails: the provider's no-accounting path)
#   stop DIR    stops every daemon started by `start DIR`, by the PID it wrote, and waits until each is gone
#   node DIR N  starts node N's slurmd again (after a test killed it): it registers and returns to service
#   env DIR     prints the environment a client needs (SLURM_CONF=...)
# Needs Debian's slurm-wlm and munge (scripts/test.sh installs them). Runs as the invoking user: the
# daemons and the jobs all run as that user (SlurmUser=SlurmdUser=$USER), so root is not required for
# the jobs of that user, but slurmd itself must be able to start (root in the test container).
set -euo pipefail
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

cmd=${1:?usage: slurm-cluster.sh start|stop|env DIR | node DIR NAME}
dir=${2:?usage: slurm-cluster.sh start|stop|env DIR | node DIR NAME}
dir=$(cd "$dir" && pwd)

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

stop_pidfile() {
  local f=$1 pid
  [ -s "$f" ] || return 0
  pid=$(cat "$f")
  case $pid in ''|*[!0-9]*) return 0 ;; esac
  kill "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
  for _ in $(seq 1 100); do
    kill -0 "$pid" 2>/dev/null || { rm -f "$f"; return 0; }
    sleep 0.1
  done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$f"
}

wait_for_file() {
  for _ in $(seq 1 100); do [ -s "$1" ] && return 0; sleep 0.1; done
  echo "slurm-cluster.sh: $1 never appeared; see the logs in $dir" >&2
  return 1
}

case $cmd in
env)
  echo "SLURM_CONF=$dir/slurm.conf"
  ;;
node)
  name=${3:?usage: slurm-cluster.sh node DIR NAME}
  case $name in n1|n2) ;; *) echo "slurm-cluster.sh: no node $name (n1, n2)" >&2; exit 2 ;; esac
  export SLURM_CONF="$dir/slurm.conf"
  rm -f "$dir/slurmd.$name.pid"
  slurmd -f "$SLURM_CONF" -N "$name"
  wait_for_file "$dir/slurmd.$name.pid"
  # back when the controller hears it again (ReturnToService=2: a DOWN node returns once it registers)
  for _ in $(seq 1 300); do
    case $(sinfo -h -N -n "$name" -o '%T' 2>/dev/null | head -1) in
      idle|allocated|mixed|completing) exit 0 ;;
    esac
    sleep 0.1
  done
  echo "slurm-cluster.sh: node $name never came back; see the logs in $dir" >&2
  exit 1
  ;;
stop)
  for f in "$dir"/slurmd.*.pid "$dir/slurmctld.pid" "$dir/munged.pid"; do
    [ -e "$f" ] && stop_pidfile "$f"
  done
  ;;
start)
  umask 077
  mkdir -p "$dir/munge" "$dir/state" "$dir/spool/n1" "$dir/spool/n2"
  chmod 700 "$dir/munge"
  user=$(id -un)
  [ -s "$dir/munge/munge.key" ] || dd if=/dev/urandom of="$dir/munge/munge.key" bs=1024 count=1 status=none
  chmod 400 "$dir/munge/munge.key"
  munged --key-file="$dir/munge/munge.key" --socket="$dir/munge/munge.socket" \
    --pid-file="$dir/munged.pid" --log-file="$dir/munged.log" --seed-file="$dir/munge/munged.seed" \
    --force
  wait_for_file "$dir/munged.pid"
  ctld_port=$(free_port); n1_port=$(free_port); n2_port=$(free_port)
  # Memory for each node: what the machine has, shared (config_overrides keeps slurmd from draining a
  # node whose configured size differs from the hardware, as it must when two slurmd share one host).
  mem_mb=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 ))
  cpus=$(nproc)
  cat >"$dir/slurm.conf" <<EOF
ClusterName=cloudtrain-test
SlurmctldHost=$(hostname -s)(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=$user
SlurmdUser=$user
AuthType=auth/munge
CredType=cred/munge
# cred_expire: a step credential's lifetime, and "how long a requeued job must wait before starting
# again" (slurm.conf(5); default 120 s): 20 s keeps the node-failure requeue test short
AuthInfo=socket=$dir/munge/munge.socket,cred_expire=20
StateSaveLocation=$dir/state
SlurmdSpoolDir=$dir/spool/%n
SlurmctldPidFile=$dir/slurmctld.pid
SlurmdPidFile=$dir/slurmd.%n.pid
SlurmctldLogFile=$dir/slurmctld.log
SlurmdLogFile=$dir/slurmd.%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
SelectType=select/linear
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
MpiDefault=none
ReturnToService=2
SchedulerType=sched/backfill
SlurmdTimeout=30
InactiveLimit=0
KillWait=5
MinJobAge=300
NodeName=n1 NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 Port=$n1_port CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
NodeName=n2 NodeHostname=$(hostname -s) NodeAddr=127.0.0.1 Port=$n2_port CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN
PartitionName=debug Nodes=n1,n2 Default=YES MaxTime=INFINITE State=UP
PartitionName=preempt Nodes=n1,n2 Default=NO MaxTime=INFINITE State=UP
EOF
  chmod 644 "$dir/slurm.conf"
  export SLURM_CONF="$dir/slurm.conf"
  slurmctld -f "$SLURM_CONF" -i
  wait_for_file "$dir/slurmctld.pid"
  slurmd -f "$SLURM_CONF" -N n1
  slurmd -f "$SLURM_CONF" -N n2
  wait_for_file "$dir/slurmd.n1.pid"
  wait_for_file "$dir/slurmd.n2.pid"
  # ready when both nodes are idle
  for _ in $(seq 1 300); do
    if [ "$(sinfo -h -N -p debug -t idle -o '%N' 2>/dev/null | sort -u | wc -l)" = 2 ]; then
      echo "SLURM_CONF=$SLURM_CONF"
      exit 0
    fi
    sleep 0.1
  done
  echo "slurm-cluster.sh: the two nodes never became idle; see the logs in $dir" >&2
  sinfo -N >&2 || true
  exit 1
  ;;
*)
  echo "usage: slurm-cluster.sh start|stop|env DIR" >&2
  exit 2
  ;;
esac
