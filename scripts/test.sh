#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian machine, then runs them.
#   system: Open MPI (mpirun for the mpi examples); shellcheck (the node scripts); Debian's chromium and chromium-driver
#           (the dashboard's tests, headless); Debian's docker.io, a running dockerd and
#           the locally built test image (scripts/start-dockerd.sh, scripts/build-test-image.sh)
#   python: a venv with cloudtrain[test] (with ruff and mypy, which run before pytest)
# Usage: bash scripts/test.sh [pytest args...]
set -euo pipefail
# root's tools (debootstrap, dockerd, iptables) live in /usr/sbin, which a minimal PATH lacks
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
cd "$(dirname "$0")/.."

need_apt=()
command -v mpirun >/dev/null 2>&1 || need_apt+=(openmpi-bin libopenmpi-dev)
command -v shellcheck >/dev/null 2>&1 || need_apt+=(shellcheck)   # tests/security: every node script
command -v unshare >/dev/null 2>&1 || need_apt+=(util-linux)  # tests/faults: a PID namespace of its own
{ command -v slurmctld && command -v sshd; } >/dev/null 2>&1 || need_apt+=(slurm-wlm munge openssh-server)  # tests/plugins/slurm: a real two-node Slurm, its login over ssh
{ [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; } || need_apt+=(chromium chromium-driver)  # tests/ui: a real browser
if [ ${#need_apt[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

bash scripts/start-dockerd.sh
bash scripts/build-test-image.sh   # cached by content: seconds when the image exists

VENV=${CLOUDTRAIN_VENV:-.venv}
[ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
"$VENV/bin/python" -m pip install -q -c constraints.txt -e '.[test]'

# The venv is NOT put on PATH: cloudtrain must work from a venv that is not activated (the
# Quickstart's case); tests that need a tool from the venv name it or set PATH themselves.
unset PYTHONUNBUFFERED VIRTUAL_ENV
# Lint and type check first: a finding fails the run in seconds, before the 18-minute suite.
"$VENV/bin/python" -m ruff check -q . || { echo "scripts/test.sh: ruff check found the problems above" >&2; exit 1; }
"$VENV/bin/python" -m mypy || { echo "scripts/test.sh: mypy found the problems above" >&2; exit 1; }
exec "$VENV/bin/python" -m pytest -q "$@"
