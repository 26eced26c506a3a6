#!/usr/bin/env bash
# A real Slurm cluster on this one machine, for the `slurm` tests: Debian's slurmctld, slurmd
# and munge; one controller in the host's network namespace and N compute nodes, each slurmd in
# its own network namespace (its own address on a bridge this script creates) and its own UTS
# namespace (its own hostname). The filesystem is shared, as a cluster's /shared would be.
# Idempotent: every step is skipped when already done. Needs root.
#   bash scripts/ci/setup_slurm.sh          # install, start munged, slurmctld and the nodes
#   bash scripts/ci/setup_slurm.sh stop     # stop every daemon and job step, remove the namespaces
#   bash scripts/ci/setup_slurm.sh status   # sinfo
#   MLERL_SLURM_NODES=4 bash ...            # nodes (default 3: mlerl-n1..3)
# Addresses: 10.77.0.1/24 (the controller, bridge mlerl-br0), 10.77.0.1{1..N} (the nodes);
# names resolve inside the nodes through /etc/netns/<node>/hosts (`ip netns exec` mounts it),
# so the host's /etc/hosts is not touched. State and logs: /var/lib/mlerl-slurm.
set -euo pipefail
N="${MLERL_SLURM_NODES:-3}"
NET=10.77.0
BR=mlerl-br0
ROOT=/var/lib/mlerl-slurm
CONF=/etc/slurm/slurm.conf
NODES=()
for i in $(seq 1 "$N"); do NODES+=("mlerl-n$i"); done

pids_of() {  # pids whose executable is $1 (the file it links to), nothing else
  local exe p
  exe=$(readlink -f "$1")
  for p in /proc/[0-9]*; do
    [[ "$(readlink "$p/exe" 2>/dev/null)" == "$exe" ]] && echo "${p#/proc/}"
  done
  return 0
}

stop() {
  local n p
  # every process of a node (slurmd, slurmstepd, job steps) lives in that node's namespace
  for n in "${NODES[@]}"; do
    if ip netns list | grep -qw "^$n"; then
      for p in $(ip netns pids "$n" 2>/dev/null); do kill -9 "$p" 2>/dev/null || true; done
    fi
  done
  for p in $(pids_of /usr/sbin/slurmctld); do kill -TERM "$p" 2>/dev/null || true; done
  for _ in $(seq 1 50); do [[ -z "$(pids_of /usr/sbin/slurmctld)" ]] && break; sleep 0.2; done
  for p in $(pids_of /usr/sbin/slurmctld); do kill -9 "$p" 2>/dev/null || true; done
  if [[ -f "$ROOT/munged.pid" ]]; then
    kill -TERM "$(cat "$ROOT/munged.pid")" 2>/dev/null || true
    rm -f "$ROOT/munged.pid"
  fi
  for n in "${NODES[@]}"; do
    for _ in $(seq 1 50); do [[ -z "$(ip netns pids "$n" 2>/dev/null)" ]] && break; sleep 0.1; done
    ip netns del "$n" 2>/dev/null || true
    ip link del "veth-$n" 2>/dev/null || true
    rm -rf "/etc/netns/$n"
  done
  ip link del "$BR" 2>/dev/null || true
  # the controller's state: jobs of a stopped cluster are not resumed by the next start
  rm -rf "$ROOT/ctld"
  local left=() exe
  for exe in /usr/sbin/slurmctld /usr/sbin/slurmd /usr/sbin/slurmstepd /usr/sbin/munged; do
    [[ -e $exe ]] && for p in $(pids_of "$exe"); do
      grep -q '^State:.*Z' "/proc/$p/status" 2>/dev/null || left+=("$p:$exe")
    done
  done
  for n in "${NODES[@]}"; do ip netns list | grep -qw "^$n" && left+=("netns:$n"); done
  ip link show "$BR" >/dev/null 2>&1 && left+=("link:$BR")
  if ((${#left[@]})); then
    echo "setup_slurm: stop left ${left[*]}" >&2
    return 1
  fi
  echo "setup_slurm: stopped (no slurm daemon, no namespace left)"
}

case "${1:-start}" in
  stop) stop; exit $? ;;
  status) sinfo; exit 0 ;;
  start) ;;
  *) echo "usage: $0 [start|stop|status]" >&2; exit 2 ;;
esac

need=()
command -v slurmctld >/dev/null || need+=(slurmctld)
command -v slurmd >/dev/null || need+=(slurmd)
command -v sbatch >/dev/null || need+=(slurm-client)
command -v munged >/dev/null || need+=(munge)
command -v ip >/dev/null || need+=(iproute2)
if ((${#need[@]})); then
  echo "setup_slurm: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
mkdir -p "$ROOT/ctld" "$ROOT/log" "$ROOT/run" /etc/slurm

# munge: the key the package made (or one made here), the daemon as root
if [[ ! -s /etc/munge/munge.key ]]; then
  mkdir -p /etc/munge
  dd if=/dev/urandom of=/etc/munge/munge.key bs=1024 count=1 status=none
fi
chown root:root /etc/munge/munge.key && chmod 400 /etc/munge/munge.key
mkdir -p /run/munge /var/lib/munge /var/log/munge && chown root:root /run/munge /var/lib/munge /var/log/munge
if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
  munged --force --pid-file="$ROOT/munged.pid" 2>&1 | grep -v "^$" || true
  for _ in $(seq 1 50); do munge -n 2>/dev/null | unmunge >/dev/null 2>&1 && break; sleep 0.1; done
  munge -n | unmunge >/dev/null || { echo "setup_slurm: munged did not start"; exit 1; }
fi

# the network: a bridge for the controller, a namespace + veth pair per node
if ! ip link show "$BR" >/dev/null 2>&1; then
  ip link add "$BR" type bridge
  ip addr add "$NET.1/24" dev "$BR"
fi
ip link set "$BR" up
hosts="127.0.0.1 localhost
::1 localhost
$NET.1 mlerl-ctl"
for i in $(seq 1 "$N"); do hosts+=$'\n'"$NET.$((10 + i)) mlerl-n$i"; done
CPUS=$(nproc)
MEM=$(( $(awk '/MemTotal/ {print $2}' /proc/meminfo) / 1024 / 2 ))
for i in $(seq 1 "$N"); do
  n="mlerl-n$i"
  if ! ip netns list | grep -qw "^$n"; then
    ip netns add "$n"
    ip link add "veth-$n" type veth peer name eth0 netns "$n"
    ip link set "veth-$n" master "$BR" up
    ip -n "$n" addr add "$NET.$((10 + i))/24" dev eth0
    ip -n "$n" link set eth0 up
    ip -n "$n" link set lo up
  fi
  mkdir -p "/etc/netns/$n"
  printf '%s\n' "$hosts" >"/etc/netns/$n/hosts"
done

cat >"$CONF.new" <<EOF
# written by scripts/ci/setup_slurm.sh: one controller, $N nodes in their own namespaces
ClusterName=mlerl
SlurmctldHost=mlerl-ctl($NET.1)
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
# AuthInfo's cred_expire stays at Slurm's default (120 s), which is also how long a requeued
# job waits before it starts again. At 30 s a requeued job's step could start on a node that
# had just come back while a message meant for the dead instance's step of the same id was
# still on its way: the requeued learner step (2.2 in both instances) was SIGKILLed ~50 s after
# its node went DOWN, twice in 11 runs; each run whose step 2.2 started after that survived.
CredType=cred/munge
StateSaveLocation=$ROOT/ctld
SlurmdSpoolDir=$ROOT/spool-%n
SlurmctldPidFile=$ROOT/run/slurmctld.pid
SlurmdPidFile=$ROOT/run/slurmd-%n.pid
SlurmctldLogFile=$ROOT/log/slurmctld.log
SlurmdLogFile=$ROOT/log/slurmd-%n.log
SlurmctldPort=6817
SlurmdPort=6818
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=none
SwitchType=switch/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
ReturnToService=2
SlurmdTimeout=10
SlurmctldTimeout=10
MessageTimeout=5
KillWait=5
# the daemons log at info (the default). At debug (slurmd) and debug2 (slurmctld) the restart of
# a torchrun learner over two nodes once failed 2 of 2 runs: torchrun's store shared across
# restart rounds (fixed in the job script since; docs/faults.md). No backquotes in this text:
# the here-document would run them.
MinJobAge=600
InactiveLimit=0
EOF
for i in $(seq 1 "$N"); do
  echo "NodeName=mlerl-n$i NodeHostname=mlerl-n$i NodeAddr=$NET.$((10 + i)) CPUs=$CPUS RealMemory=$MEM State=UNKNOWN" >>"$CONF.new"
done
# every node may run several jobs at once (a sweep's jobs share them; 2 cores here)
echo "PartitionName=debug Nodes=mlerl-n[1-$N] Default=YES MaxTime=INFINITE State=UP OverSubscribe=FORCE:4" >>"$CONF.new"
changed=0
cmp -s "$CONF.new" "$CONF" || { mv "$CONF.new" "$CONF"; changed=1; }
rm -f "$CONF.new"

if [[ -z "$(pids_of /usr/sbin/slurmctld)" ]]; then
  echo "setup_slurm: starting slurmctld (log: $ROOT/log/slurmctld.log)"
  # its own hostname, the one slurm.conf names (a daemon checks it is the host it is meant for)
  unshare --uts sh -c "hostname mlerl-ctl && exec slurmctld -i"  # -i: ignore state that does not match
elif ((changed)); then
  scontrol reconfigure
fi
for i in $(seq 1 "$N"); do
  n="mlerl-n$i"
  if ! ip netns pids "$n" 2>/dev/null | while read -r p; do
      [[ "$(readlink "/proc/$p/exe" 2>/dev/null)" == "$(readlink -f /usr/sbin/slurmd)" ]] && echo yes; done | grep -q yes; then
    # its own network namespace, hostname (UTS namespace) and /etc/hosts (a mount namespace that
    # still sees the host's mounts: `ip netns exec` would remount /sys and hide the cgroups)
    # a node that died whole (the learner-node fault of the slurm tests) left its jobs' scripts
    # in its spool, which a slurmd started over them purges as vestigial, again and again.
    # (That purge was first blamed for a requeued learner step SIGKILLed after its node came
    # back; it was not: see cred_expire above.) Nothing of the node runs any more, so its
    # spool holds nothing live: start from an empty one.
    if [[ -z "$(ip netns pids "$n" 2>/dev/null)" ]]; then rm -rf "$ROOT/spool-$n"; fi
    mkdir -p "$ROOT/spool-$n"
    nsenter --net="/run/netns/$n" unshare --mount --propagation slave --uts \
      sh -c "mount --bind /etc/netns/$n/hosts /etc/hosts && hostname $n && exec slurmd"
  fi
done

for _ in $(seq 1 100); do
  idle=$(sinfo -h -N -o '%N %t' 2>/dev/null | awk '$2 ~ /^(idle|mix|alloc)/' | wc -l)
  ((idle == N)) && break
  sleep 0.3
done
if ((idle != N)); then
  echo "setup_slurm: only $idle of $N nodes are up:"; sinfo -N -l || true
  tail -5 "$ROOT/log/slurmctld.log" "$ROOT"/log/slurmd-*.log 2>/dev/null || true
  exit 1
fi
echo "setup_slurm: ready ($N nodes: ${NODES[*]}; stop with: bash $0 stop)"
