#!/usr/bin/env bash
# Sets up everything the tests need on a fresh Debian machine, then runs them.
#   system: Open MPI (mpirun for the mpi examples); shellcheck (the node scripts); Debian's chromium and chromium-driver
#           (the dashboard's tests, headless); Debian's docker.io, a running dockerd and
#           the locally built test image (scripts/start-dockerd.sh, scripts/build-test-image.sh)
#   python: a venv with cloudtrain[test] (with ruff and mypy, which run before pytest)
# Usage: bash scripts/test.sh [pytest args...]
# pytest runs twice: every test not marked `serial` on two workers (pytest-xdist, a file to one
# worker whole: tests/conftest.py), then the `serial` ones alone (a bound on wall time, a root-level
# fault). Each pass prints its 25 slowest tests; each step prints its wall time ("[time] ...").
# CLOUDTRAIN_TEST_WORKERS=N sets the workers (1: no xdist); a `-m` of your own runs one pass.
set -euo pipefail
started=$SECONDS
step_started=$SECONDS
took() { echo "[time] scripts/test.sh: $1: $((SECONDS - step_started)) s"; step_started=$SECONDS; }
# root's tools (debootstrap, dockerd, iptables) live in /usr/sbin, which a minimal PATH lacks
export PATH="$PATH:/usr/local/sbin:/usr/sbin:/sbin"
cd "$(dirname "$0")/.."

need_apt=()
command -v mpirun >/dev/null 2>&1 || need_apt+=(openmpi-bin libopenmpi-dev)
command -v shellcheck >/dev/null 2>&1 || need_apt+=(shellcheck)   # tests/security: every node script
command -v ccache >/dev/null 2>&1 || need_apt+=(ccache)  # DeepSpeed's JIT op compiles once per machine (tests/conftest.py)
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
took setup

# The venv is NOT put on PATH: cloudtrain must work from a venv that is not activated (the
# Quickstart's case); tests that need a tool from the venv name it or set PATH themselves.
unset PYTHONUNBUFFERED VIRTUAL_ENV
# Lint and type check first: a finding fails the run in seconds, before the suite.
"$VENV/bin/python" -m ruff check -q . || { echo "scripts/test.sh: ruff check found the problems above" >&2; exit 1; }
took ruff
# mypy's cache lives beside pip's, outside the clone: a fresh clone of the same code (CI's) checks
# in seconds; mypy checks every cached module against its source's hash, so a change is never missed
export MYPY_CACHE_DIR=${MYPY_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/cloudtrain/mypy}
"$VENV/bin/python" -m mypy || { echo "scripts/test.sh: mypy found the problems above" >&2; exit 1; }
took mypy

# each pass leaves its JUnit XML in .test-results/ (git-ignored): `python scripts/test-durations.py
# .test-results/*.xml` refreshes tests/durations.json, the order the workers take the files in
mkdir -p .test-results
pytest=("$VENV/bin/python" -m pytest -q --durations=25)
workers=${CLOUDTRAIN_TEST_WORKERS:-2}
own_marks=no
for arg in "$@"; do case $arg in -m|-m*) own_marks=yes ;; esac; done
set +e
if [ "$own_marks" = yes ] || [ "$workers" -le 1 ]; then
  "${pytest[@]}" --junitxml=.test-results/all.xml "$@"; code=$?
  took pytest
else
  "${pytest[@]}" -n "$workers" --dist loadgroup -m "not serial" --junitxml=.test-results/parallel.xml "$@"; parallel=$?
  took "pytest, $workers workers"
  "${pytest[@]}" -m serial --junitxml=.test-results/serial.xml "$@"; serial=$?
  took "pytest, serial"
  # 5 is "no test selected": fine for one pass when the other ran tests
  if [ $parallel = 5 ] && [ $serial = 5 ]; then code=5
  elif [ $parallel = 5 ]; then code=$serial
  elif [ $serial = 5 ] || [ $serial = 0 ]; then code=$parallel
  else code=$serial; fi
fi
set -e
echo "[time] scripts/test.sh: total: $((SECONDS - started)) s"
exit $code
