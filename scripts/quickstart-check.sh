#!/usr/bin/env bash
# Runs the README's Quickstart command exactly as written, as a new user would: from the
# repository root, no venv activated, and a PATH whose python has no torch. Fails unless the
# command exits 0 and the job printed test_accuracy >= 0.9.
# Usage: bash scripts/quickstart-check.sh          (CI runs it in a fresh clone; see .ci/run)
set -euo pipefail
cd "$(dirname "$0")/.."

# The first line of the first ```bash block under "## Quickstart".
cmd=$(awk '/^## Quickstart/{q=1; next} q && /^## /{exit} q && /^```bash/{getline; print; exit}' README.md)
[ -n "$cmd" ] || { echo "quickstart-check: no \`\`\`bash block under ## Quickstart in README.md" >&2; exit 1; }

# A new user's shell: no venv activated, nothing of ours on PATH.
unset VIRTUAL_ENV PYTHONPATH PYTHONHOME CONDA_PREFIX
clean_path=""
IFS=: read -r -a dirs <<< "${PATH}"
for d in "${dirs[@]}"; do
  case "$d" in */.venv/bin|*/venv/bin|"") continue ;; esac
  clean_path="${clean_path:+$clean_path:}$d"
done
export PATH="$clean_path"
for py in python python3; do
  if command -v "$py" >/dev/null 2>&1 && "$py" -c "import torch" >/dev/null 2>&1; then
    echo "quickstart-check: '$py' on PATH ($(command -v "$py")) has torch; the check needs a PATH whose python has none" >&2
    exit 1
  fi
done

log=$(mktemp)
echo "quickstart-check: running, as written: $cmd"
set +e
bash -c "$cmd" 2>&1 | tee "$log"
code=${PIPESTATUS[0]}
set -e
accuracy=$(sed -n 's/.*test_accuracy \([0-9.]*\).*/\1/p' "$log" | tail -1)
rm -f "$log"
if [ "$code" != 0 ]; then
  echo "quickstart-check: FAILED: the Quickstart exited $code" >&2
  exit 1
fi
if [ -z "$accuracy" ] || ! awk -v a="$accuracy" 'BEGIN{exit !(a >= 0.9)}'; then
  echo "quickstart-check: FAILED: test_accuracy '${accuracy:-missing}' is not >= 0.9" >&2
  exit 1
fi
echo "quickstart-check: passed (exit 0, test_accuracy $accuracy)"
