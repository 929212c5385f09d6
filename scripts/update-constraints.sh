#!/usr/bin/env bash
# Rebuilds constraints.txt: the exact versions the Tests command installs (scripts/test.sh passes
# it to pip with -c), so a CI run on a bare machine gets the packages the last green run had.
# It resolves cloudtrain[test] afresh, newest first, in a throw-away venv, and writes the result.
# Run it when scripts/test-latest.sh reports that a newer release passes (or to take a fix), then
# run the Tests command and commit constraints.txt with the change that needed it.
# Usage: bash scripts/update-constraints.sh
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 -m venv "$tmp/venv"
"$tmp/venv/bin/python" -m pip install -q --upgrade pip >/dev/null
"$tmp/venv/bin/python" -m pip install -q -e '.[test]'
{
  echo "# The versions scripts/test.sh installs (pip -c). Made by scripts/update-constraints.sh on"
  echo "# $(date -u +%Y-%m-%d) with $("$tmp/venv/bin/python" -V); do not edit by hand."
  "$tmp/venv/bin/python" -m pip freeze --exclude-editable | LC_ALL=C sort -f
} > constraints.txt
echo "constraints.txt: $(grep -vc '^#' constraints.txt) packages"
