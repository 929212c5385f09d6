#!/usr/bin/env python3
"""Writes tests/durations.json: the seconds each test file took, from the JUnit XML of a full run
(``pytest --junitxml=F``; several files add up: scripts/test.sh leaves its two passes in
.test-results/parallel.xml and .test-results/serial.xml).
tests/conftest.py sends the longest files to the xdist workers first with it.

Usage: python scripts/test-durations.py run.xml [serial.xml ...]
"""
import json
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def file_of(classname: str) -> str:
    """``tests.e2e.test_docker_runs.TestX`` -> ``tests/e2e/test_docker_runs.py`` (the longest
    prefix that is a file of the repository)."""
    parts = classname.split(".")
    for end in range(len(parts), 0, -1):
        path = "/".join(parts[:end]) + ".py"
        if (ROOT / path).is_file():
            return path
    return ""


def main(paths) -> int:
    totals: dict = {}
    for path in paths:
        for case in ET.parse(path).getroot().iter("testcase"):
            name = case.get("file") or file_of(case.get("classname", ""))
            if name:
                totals[name] = totals.get(name, 0.0) + float(case.get("time") or 0)
    if not totals:
        print("test-durations: no test case with a file in " + " ".join(paths), file=sys.stderr)
        return 1
    out = ROOT / "tests" / "durations.json"
    out.write_text(json.dumps({k: round(v, 1) for k, v in sorted(totals.items())}, indent=0) + "\n")
    print("test-durations: %d files, %.0f s in all -> %s" % (len(totals), sum(totals.values()), out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) if sys.argv[1:] else (print(__doc__.strip()) or 2))
