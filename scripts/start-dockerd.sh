#!/usr/bin/env bash
# Makes sure a Docker engine answers on this machine; starts one if not.
#   - `docker info` already works            -> nothing to do
#   - no dockerd                              -> apt-get install docker.io (Debian's engine)
#   - then dockerd in the background, logging to $CLOUDTRAIN_DOCKERD_LOG, and wait for it.
# Idempotent, safe to run twice or concurrently with another engine already up.
# Usage: bash scripts/start-dockerd.sh            (needs root, or sudo)
set -euo pipefail

LOG=${CLOUDTRAIN_DOCKERD_LOG:-/var/log/cloudtrain-dockerd.log}
TIMEOUT=${CLOUDTRAIN_DOCKERD_TIMEOUT:-60}
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
# Debian installs dockerd (and the iptables it runs) in /usr/sbin, which a minimal PATH lacks
# (`env -i PATH=/usr/local/bin:/usr/bin:/bin`): found there, not reported as missing once installed.
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"

engine_version() { docker version --format '{{.Server.Version}}' 2>/dev/null; }

if docker info >/dev/null 2>&1; then
  echo "docker engine already running: $(engine_version)"
  exit 0
fi

if ! command -v dockerd >/dev/null 2>&1; then
  echo "installing Debian's docker.io ..."
  # The package's postinst would start the engine through /etc/init.d (there is no systemd
  # here) with flags we do not control; a temporary policy-rc.d stops that, and we start it below.
  policy_added=""
  if [ ! -e /usr/sbin/policy-rc.d ]; then
    printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
    $SUDO chmod 755 /usr/sbin/policy-rc.d
    policy_added=1
  fi
  trap '[ -n "$policy_added" ] && $SUDO rm -f /usr/sbin/policy-rc.d' EXIT
  $SUDO apt-get update -qq
  # docker.io pulls in containerd, runc, tini and iptables; no recommends (no git, xz, cgroupfs-mount ...).
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends docker.io >/dev/null
  [ -n "$policy_added" ] && $SUDO rm -f /usr/sbin/policy-rc.d
  policy_added=""
fi

# Flags. Defaults everywhere (overlay2 storage on ext4, iptables, docker0 bridge, cgroupfs on
# this host's cgroup v1 hierarchy all work as they are), except:
#   --ip-forward=false  dockerd would otherwise switch the host's net.ipv4.ip_forward on, the
#                       thing that lets containers route out through the host. Our containers only
#                       talk to each other on one bridge (same L2 segment, no forwarding needed),
#                       so leaving forwarding off keeps every packet on this machine.
#                       The provider can also create its networks with internal=True. Expected
#                       side effect: the CLI's `docker run` prints "WARNING: IPv4 forwarding is
#                       disabled. Networking will not work." (it means: not beyond this machine).
# Extra flags can be passed with CLOUDTRAIN_DOCKERD_FLAGS.
# shellcheck disable=SC2206
flags=(--ip-forward=false ${CLOUDTRAIN_DOCKERD_FLAGS:-})

# A dockerd may be starting (another caller) or stuck: only start ours if none is running.
if ! pgrep -x dockerd >/dev/null 2>&1; then
  $SUDO mkdir -p "$(dirname "$LOG")"
  echo "starting dockerd ${flags[*]} (log: $LOG)"
  # setsid: its own session, so it outlives this script and a Ctrl-C aimed at the caller.
  $SUDO setsid dockerd "${flags[@]}" >>"$LOG" 2>&1 </dev/null &
fi

for _ in $(seq "$TIMEOUT"); do
  if docker info >/dev/null 2>&1; then
    echo "docker engine $(engine_version) is up"
    exit 0
  fi
  sleep 1
done
echo "dockerd did not answer within ${TIMEOUT}s; last lines of $LOG:" >&2
tail -n 30 "$LOG" >&2 || true
exit 1
