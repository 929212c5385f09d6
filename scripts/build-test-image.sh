#!/usr/bin/env bash
# Builds the Docker provider's test image, cloudtrain/test-python:latest, with no registry:
#   debootstrap --variant=minbase bookworm  +  the Debian packages below (Python, Open MPI, sshd)
#   + a venv /opt/venv with torch==2.13.0+cpu, scikit-learn, mpi4py, ray
#   -> tar | docker import  -> cloudtrain/test-python:<content hash> and :latest.
# The tag is a hash of this file: if that image exists, it prints "cached" and exits at once.
# Work files (rootfs, downloaded .debs, pip's cache) live outside the repo, in
# $CLOUDTRAIN_IMAGE_CACHE (default ${XDG_CACHE_HOME:-/var/tmp}/cloudtrain-test-image).
# Re-running after a failure resumes at the step that failed.
# Usage: bash scripts/build-test-image.sh [--force]      (root; starts dockerd if needed)
set -euo pipefail
# root's tools (debootstrap, dockerd, iptables) live in /usr/sbin, which a minimal PATH lacks
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
{ # the whole script is read before it runs: editing or checking out this file mid-build is safe

REPO=cloudtrain/test-python
SUITE=bookworm
# Debian packages on top of minbase. Not libopenmpi-dev: the mpi4py wheel needs only libmpi.so.40.
PACKAGES=(python3 python3-venv openmpi-bin openssh-server openssh-client procps iproute2 ca-certificates)
# Python packages in /opt/venv. '+cpu' makes pip take the CPU wheel (found through the machine's
# pip find-links) and fail loudly rather than fall back to the CUDA build with its nvidia-* wheels.
PIP_PACKAGES=(torch==2.13.0+cpu scikit-learn mpi4py ray)
IMAGE_PATH=/opt/venv/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

HERE=$(cd "$(dirname "$0")" && pwd)
SELF="$HERE/$(basename "$0")"
HASH=$(sha256sum "$SELF" | cut -c1-16)
TAG="$REPO:$HASH"

force=""; [ "${1:-}" = "--force" ] && force=1

T0=$(date +%s)
log() { printf '[build-test-image +%ss] %s\n' "$(( $(date +%s) - T0 ))" "$*"; }

# --- the cache check comes first, so that it costs one `docker image inspect` ---------------
docker info >/dev/null 2>&1 || bash "$HERE/start-dockerd.sh"
exit_if_cached() {
  if [ -z "$force" ] && docker image inspect "$TAG" >/dev/null 2>&1; then
    [ "$(docker image inspect -f '{{.Id}}' "$REPO:latest" 2>/dev/null)" = \
      "$(docker image inspect -f '{{.Id}}' "$TAG")" ] || docker tag "$TAG" "$REPO:latest"
    echo "cached: $TAG"
    exit 0
  fi
}
exit_if_cached

[ "$(id -u)" = 0 ] || { echo "build-test-image.sh: run as root (debootstrap, chroot, mount)" >&2; exit 2; }

CACHE=${CLOUDTRAIN_IMAGE_CACHE:-${XDG_CACHE_HOME:-/var/tmp}/cloudtrain-test-image}
ROOTFS="$CACHE/rootfs-$HASH"
DEBS="$CACHE/debs"              # debootstrap's and apt's downloaded .debs, kept across builds
PIPCACHE="$CACHE/pip"           # pip's cache, kept across builds
mkdir -p "$CACHE" "$DEBS/partial" "$PIPCACHE"

# One build at a time on this machine.
exec 9>"$CACHE/lock"
flock 9
exit_if_cached   # another build may have made it while we waited

# --- mounts: everything mounted under a rootfs is unmounted on exit and before any delete ------
mounts_under() {  # deepest first
  awk -v p="$1/" 'index($5, p) == 1 {print $5}' /proc/self/mountinfo | sort -r
}
umount_all() {
  local m
  for m in $(mounts_under "$1"); do umount "$m" 2>/dev/null || umount -l "$m"; done
  if [ -n "$(mounts_under "$1")" ]; then
    echo "build-test-image.sh: could not unmount everything under $1" >&2; return 1
  fi
}
remove_rootfs() {  # never deletes through a bind mount: refuses while anything is mounted below
  umount_all "$1"
  rm -rf --one-file-system "$1"
}
bind() {  # bind SRC DST [ro]
  mkdir -p "$2"
  mount --bind "$1" "$2"
  [ "${3:-}" = ro ] && mount -o remount,bind,ro "$2"
  return 0
}
trap 'umount_all "$ROOTFS" || true' EXIT

# Leftovers of builds of other versions of this script (their images are cached by tag).
for old in "$CACHE"/rootfs-* "$CACHE"/trash-*; do
  [ -e "$old" ] && [ "$old" != "$ROOTFS" ] && { log "removing stale $old"; remove_rootfs "$old" 2>/dev/null || true; }
done

stage() { cat "$ROOTFS/.ct-stage" 2>/dev/null || echo 0; }
stage_done() { echo "$1" >"$ROOTFS/.ct-stage"; }
in_root() { chroot "$ROOTFS" /usr/bin/env -i HOME=/root LANG=C.UTF-8 DEBIAN_FRONTEND=noninteractive \
  PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin "$@"; }

# --- the Debian mirror this machine's apt uses ---------------------------------------------
debian_mirror() {
  [ -n "${CLOUDTRAIN_DEBIAN_MIRROR:-}" ] && { echo "$CLOUDTRAIN_DEBIAN_MIRROR"; return; }
  local m=""
  # deb822 (*.sources): the paragraph whose Suites has "$SUITE" itself
  m=$(cat /etc/apt/sources.list.d/*.sources 2>/dev/null | awk -v s="$SUITE" 'BEGIN{RS=""; FS="\n"}
        { uris=""; ok=0
          for (i=1;i<=NF;i++) { if ($i ~ /^URIs:/) { sub(/^URIs:[ \t]*/, "", $i); split($i, u, " "); uris=u[1] }
                                if ($i ~ /^Suites:/) { n=split($i, w, /[ \t]+/); for (j=2;j<=n;j++) if (w[j]==s) ok=1 } }
          if (ok && uris != "") { print uris; exit } }')
  # one-line format: deb [options] URL bookworm ...
  [ -n "$m" ] || m=$(cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
        sed -E 's/\[[^]]*\]//' | awk -v s="$SUITE" '$1=="deb" && $3==s {print $2; exit}')
  echo "${m:-http://deb.debian.org/debian}"
}
MIRROR=$(debian_mirror)
SECURITY_MIRROR=$(grep -hoE '^(URIs:|deb)[^#]*https?://[^ ]*debian-security' \
  /etc/apt/sources.list.d/*.sources /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null |
  grep -oE 'https?://[^ ]*' | head -n1 || true)

# --- 1. debootstrap -----------------------------------------------------------------------
if [ "$(stage)" -lt 1 ]; then
  command -v debootstrap >/dev/null 2>&1 || {
    log "installing debootstrap"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends debootstrap >/dev/null
  }
  [ -e "$ROOTFS" ] && { log "removing a half-made $ROOTFS"; remove_rootfs "$ROOTFS"; }
  log "1/5 debootstrap --variant=minbase $SUITE from $MIRROR"
  debootstrap --variant=minbase --cache-dir="$DEBS" "$SUITE" "$ROOTFS" "$MIRROR" \
    >"$CACHE/debootstrap.log" 2>&1 || { tail -n 30 "$CACHE/debootstrap.log" >&2; exit 1; }
  stage_done 1
fi

# --- 2. Debian packages ---------------------------------------------------------------------
mount_build() {
  mountpoint -q "$ROOTFS/proc" || mount -t proc proc "$ROOTFS/proc"
  mountpoint -q "$ROOTFS/dev" || bind /dev "$ROOTFS/dev"
  mountpoint -q "$ROOTFS/var/cache/apt/archives" || bind "$DEBS" "$ROOTFS/var/cache/apt/archives"
  mountpoint -q "$ROOTFS/root/.cache/pip" || bind "$PIPCACHE" "$ROOTFS/root/.cache/pip"
  cp /etc/resolv.conf "$ROOTFS/etc/resolv.conf"
}
if [ "$(stage)" -lt 2 ]; then
  mount_build
  {
    echo "deb $MIRROR $SUITE main"
    echo "deb $MIRROR $SUITE-updates main"
    [ -n "$SECURITY_MIRROR" ] && echo "deb $SECURITY_MIRROR $SUITE-security main"
  } >"$ROOTFS/etc/apt/sources.list"
  # No service starts inside the chroot; no docs or man pages in the image.
  printf '#!/bin/sh\nexit 101\n' >"$ROOTFS/usr/sbin/policy-rc.d"; chmod 755 "$ROOTFS/usr/sbin/policy-rc.d"
  cat >"$ROOTFS/etc/dpkg/dpkg.cfg.d/cloudtrain-nodoc" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/info/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
EOF
  log "2/5 apt-get install ${PACKAGES[*]}"
  in_root apt-get update -qq
  in_root apt-get install -y -qq --no-install-recommends "${PACKAGES[@]}" >"$CACHE/apt.log" 2>&1 ||
    { tail -n 30 "$CACHE/apt.log" >&2; exit 1; }
  stage_done 2
fi

# --- 3. /opt/venv with the Python packages ---------------------------------------------------
# pip runs inside the chroot (the image's own Python 3.11). This machine's pip finds the CPU
# torch wheel through local find-links / file:// indexes in its configuration: the same
# settings are passed in, with those directories bind-mounted read-only at the same paths.
pip_settings() {  # prints NAME=VALUE lines: PIP_FIND_LINKS, PIP_[EXTRA_]INDEX_URL, PIP_CERT
  python3 - <<'EOF' 2>/dev/null || true
import ast, re, subprocess, sys
try:
    out = subprocess.run([sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True).stdout
except Exception:
    out = ""
vals, from_env = {}, set()
for line in out.splitlines():
    m = re.match(r"^([^.]*)\.(find-links|index-url|extra-index-url|cert)=(.*)$", line)
    if m and (m.group(1) == ":env:" or m.group(2) not in from_env):
        vals[m.group(2)] = ast.literal_eval(m.group(3))   # PIP_* variables win over files
        if m.group(1) == ":env:":
            from_env.add(m.group(2))
for key, val in vals.items():
    print("PIP_" + key.upper().replace("-", "_") + "=" + " ".join(val.split()))
EOF
}
local_dirs() {  # the local directories a pip setting value refers to
  local v p
  for v in $1; do
    case "$v" in file://*) p=${v#file://} ;; /*) p=$v ;; *) continue ;; esac
    p=${p%/}
    # a "simple" index links to ../../files: mount the directory above it
    [ "$(basename "$p")" = simple ] && p=$(dirname "$p")
    [ -d "$p" ] && echo "$p"
  done
}
if [ "$(stage)" -lt 3 ]; then
  mount_build
  pip_env=(PIP_DISABLE_PIP_VERSION_CHECK=1 PIP_DEFAULT_TIMEOUT="${PIP_DEFAULT_TIMEOUT:-180}")
  while IFS= read -r kv; do
    [ -n "$kv" ] || continue
    if [ "${kv%%=*}" = PIP_CERT ]; then
      # PyPI is reached through a TLS proxy whose CA only the host's bundle has: lend it to pip
      # for the build (in /tmp, emptied below), not to the image.
      [ -f "${kv#*=}" ] || continue
      cp "${kv#*=}" "$ROOTFS/tmp/host-ca.crt"; pip_env+=(PIP_CERT=/tmp/host-ca.crt); continue
    fi
    pip_env+=("$kv")
    for d in $(local_dirs "${kv#*=}"); do
      mountpoint -q "$ROOTFS$d" || bind "$d" "$ROOTFS$d" ro
    done
  done < <(pip_settings)
  log "pip settings: ${pip_env[*]}"
  rm -rf "$ROOTFS/opt/venv"
  in_root python3 -m venv /opt/venv
  log "3/5 pip install ${PIP_PACKAGES[*]}"
  in_root "${pip_env[@]}" /opt/venv/bin/pip install -q "${PIP_PACKAGES[@]}" >"$CACHE/pip.log" 2>&1 ||
    { tail -n 30 "$CACHE/pip.log" >&2; exit 1; }
  if in_root /opt/venv/bin/pip list 2>/dev/null | grep -i '^nvidia'; then
    echo "build-test-image.sh: CUDA packages ended up in the venv (above); expected the CPU torch" >&2
    exit 1
  fi
  in_root /opt/venv/bin/python -c 'import torch; assert torch.__version__.endswith("+cpu"), torch.__version__'
  stage_done 3
fi

# --- 4. sshd / ssh for mpirun between containers, and clean-up --------------------------------
if [ "$(stage)" -lt 4 ]; then
  mount_build
  log "4/5 sshd, ssh, Open MPI settings; clean-up"
  # Root logs in with a key only; the docker provider mounts a per-job key, none is baked in.
  # StrictModes no: mounted key files may have any owner/mode. UsePAM no: pam_loginuid fails in
  # an unprivileged container and would close the session. SetEnv: a non-interactive ssh
  # session (mpirun's orted and the ranks it starts) gets the image's PATH, venv first.
  cat >"$ROOTFS/etc/ssh/sshd_config.d/cloudtrain.conf" <<EOF
PermitRootLogin prohibit-password
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
StrictModes no
UsePAM no
SetEnv PATH=$IMAGE_PATH
EOF
  # Containers come and go with new host keys and addresses: never ask, never record.
  cat >"$ROOTFS/etc/ssh/ssh_config.d/cloudtrain.conf" <<'EOF'
Host *
    StrictHostKeyChecking no
    UserKnownHostsFile /dev/null
    LogLevel ERROR
EOF
  rm -f "$ROOTFS"/etc/ssh/ssh_host_*
  in_root ssh-keygen -A >/dev/null
  mkdir -p "$ROOTFS/run/sshd" && chmod 755 "$ROOTFS/run/sshd"
  # Open MPI's shared-memory transport copies between ranks with process_vm_readv, which an
  # unprivileged container forbids ("Read -1, expected ..., errno = 1"): use plain copy-in/out.
  grep -q '^btl_vader_single_copy_mechanism' "$ROOTFS/etc/openmpi/openmpi-mca-params.conf" ||
    printf '\nbtl_vader_single_copy_mechanism = none\n' >>"$ROOTFS/etc/openmpi/openmpi-mca-params.conf"
  rm -rf "$ROOTFS/root/.ssh" && install -d -m 700 "$ROOTFS/root/.ssh"
  in_root /usr/sbin/sshd -t   # the configuration parses

  umount_all "$ROOTFS"
  rm -f "$ROOTFS/usr/sbin/policy-rc.d"
  rm -rf "$ROOTFS"/var/lib/apt/lists/* "$ROOTFS"/var/cache/apt/*.bin "$ROOTFS"/var/cache/apt/archives/* \
         "$ROOTFS"/root/.cache "$ROOTFS"/tmp/* "$ROOTFS"/var/log/apt "$ROOTFS"/var/log/*.log
  : >"$ROOTFS/etc/resolv.conf"   # docker mounts its own
  # torch's C++ headers (10k files) serve only extension builds, and the image has no compiler.
  rm -rf "$ROOTFS"/opt/venv/lib/python3*/site-packages/torch/include
  stage_done 4
fi

# --- 5. import ------------------------------------------------------------------------------
umount_all "$ROOTFS"
log "5/5 docker import -> $TAG"
tar -C "$ROOTFS" --numeric-owner --exclude=./.ct-stage -c . |
  docker import \
    --change "ENV PATH=$IMAGE_PATH" \
    --change 'CMD ["python3"]' \
    --change "LABEL org.cloudtrain.test-image.hash=$HASH" \
    - "$TAG" >/dev/null
docker tag "$TAG" "$REPO:latest"
SIZE=$(docker image inspect -f '{{.Size}}' "$TAG")
log "built $TAG (:latest), $(( SIZE / 1000000 )) MB"

# Deleting the rootfs (~40k files) takes a minute on this disk (ext4 with online discard): it and
# the older builds' images go in the background, and a later build removes whatever is left.
umount_all "$ROOTFS"
TRASH="$CACHE/trash-$HASH-$$"
mv "$ROOTFS" "$TRASH"
(
  exec 9>&-
  rm -rf --one-file-system "$TRASH"
  # Older builds (best effort: an image some container still uses stays).
  for t in $(docker images --format '{{.Repository}}:{{.Tag}}' "$REPO"); do
    [ "$t" = "$TAG" ] || [ "$t" = "$REPO:latest" ] || docker rmi "$t" || true
  done
  docker image prune -f --filter "label=org.cloudtrain.test-image.hash" || true
) >"$CACHE/cleanup.log" 2>&1 </dev/null &
exit 0
}
