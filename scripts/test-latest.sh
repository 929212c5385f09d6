#!/usr/bin/env bash
# The tests that talk to the SDKs and libraries cloudtrain depends on, against the newest
# releases its ranges allow (no constraints.txt), so a new release that breaks cloudtrain is
# noticed here before a user meets it. The Tests command (scripts/test.sh) runs every test on
# the pinned versions; this runs the unit, contract and plugin tests in a venv of their own,
# .venv-latest, upgraded on every run: cloudtrain[all,examples] (every SDK, and torch for the
# launcher's hooks), not Ray, DeepSpeed or MPI.
# On a failure it prints what differs from constraints.txt: the suspects.
# Usage: bash scripts/test-latest.sh [pytest args...]   (default: tests/core tests/contract tests/plugins)
#        bash scripts/test-latest.sh --prepare   only make the venv (.ci/run does it beside the
#                                                Quickstart, then runs the tests with --prepared)
#        bash scripts/test-latest.sh --prepared [pytest args...]   the venv --prepare made, as is
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${CLOUDTRAIN_LATEST_VENV:-.venv-latest}
mode=${1:-}
case $mode in --prepare|--prepared) shift ;; esac
if [ "$mode" != --prepared ]; then
  [ -x "$VENV/bin/python" ] || python3 -m venv "$VENV"
  "$VENV/bin/python" -m pip install -q --upgrade pip >/dev/null
  # cloudtrain[all,examples] and the test tools, newest (--upgrade --upgrade-strategy eager), not [train].
  "$VENV/bin/python" -m pip install -q --upgrade --upgrade-strategy eager -e '.[all,examples]' \
    'moto[server]>=5' 'pytest>=8' 'pytest-timeout>=2.2' 'pytest-xdist>=3.6' 'jsonschema>=4' 'mkdocs>=1.6'
fi
[ "$mode" != --prepare ] || { echo "test-latest: $VENV is ready"; exit 0; }

newer=$(comm -13 <(grep -v '^#' constraints.txt | LC_ALL=C sort -f) \
                 <("$VENV/bin/python" -m pip freeze --exclude-editable | LC_ALL=C sort -f) || true)
echo "test-latest: newer than constraints.txt: ${newer:-(nothing)}" | tr '\n' ' '; echo

unset PYTHONUNBUFFERED VIRTUAL_ENV
[ $# -gt 0 ] || set -- tests/core tests/contract tests/plugins
set +e
# two workers, a file to one worker whole (tests/conftest.py), as scripts/test.sh; the serial
# tests (tests/e2e, tests/faults) are not among the default paths nor CI's
"$VENV/bin/python" -m pytest -q -p no:cacheprovider --durations=25 -n "${CLOUDTRAIN_TEST_WORKERS:-2}" --dist loadgroup "$@"
code=$?
set -e
if [ $code != 0 ]; then
  echo "test-latest: FAILED on the newest releases; the suspects are the packages listed above as newer" >&2
fi
exit $code
