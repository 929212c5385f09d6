"""Hostile and broken job files, through the real command line: each one exits 2 with one line
naming the file and line, no traceback, and nothing is started."""
import pytest
import yaml

from conftest import run_cli

HEAD = b"name: hostile\ncommand: python train.py\n"
BOMB = "env:\n  a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"  {n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefghi", "bcdefghij"))

CASES = {
    # name: (file content, line, words of the message)
    "billion-laughs": (HEAD + BOMB.encode(), 9, "more than 100000 values"),  # at f: (9**6 values)
    "self-reference": (HEAD + b"env: &e {A: *e}\n", 3, "recursive alias"),
    "deep-nesting": (HEAD + b"providers:\n  local: " + b"[" * 200_000 + b"]" * 200_000 + b"\n", 4,
                     "nested more than 64 levels"),
    "duplicate-key": (HEAD + b"env:\n  A: '1'\n  A: '2'\n", 5, "env.A: given twice in one mapping (also at line 4)"),
    "two-documents": (HEAD + b"---\n" + HEAD, 3, "a second YAML document"),
    "python-tag": (HEAD + b"image: !!python/object/apply:os.system ['true']\n", 3,
                   "the tag !!python/object/apply:os.system is not allowed"),
    "nul-byte": (HEAD + b"image: a\x00b\n", 3, "a NUL byte"),
    "invalid-utf8": (HEAD + b"image: caf\xe9\n", 3, "not UTF-8 text (byte 0xe9)"),
    # 0x80 is on line 2
    "binary": (b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 64, 2, "not UTF-8 text (byte 0x80)"),
}


def write(tmp_path, content: bytes):
    path = tmp_path / "job.yaml"
    path.write_bytes(content)
    return path


def assert_refused(proc, path, line, words):
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr  # one line
    assert proc.stderr.startswith(f"cloudtrain: error: {path}:{line}: "), proc.stderr
    assert words in proc.stderr, proc.stderr


@pytest.mark.parametrize("name", sorted(CASES))
def test_validate_refuses_it_in_one_line(tmp_path, name):
    content, line, words = CASES[name]
    path = write(tmp_path, content)
    assert_refused(run_cli("validate", path, timeout=60), path, line, words)


@pytest.mark.parametrize("name", ["billion-laughs", "self-reference", "deep-nesting", "python-tag"])
def test_render_and_submit_refuse_it_and_start_nothing(tmp_path, home, name):
    content, line, words = CASES[name]
    path = write(tmp_path, content)
    assert_refused(run_cli("render", "-p", "local", path, timeout=60), path, line, words)
    assert_refused(run_cli("submit", path, "--detach", timeout=60), path, line, words)
    assert not (home / "runs").exists() and not (home / "state.db").exists()


def test_a_python_tag_constructs_nothing(tmp_path, home):
    marker = tmp_path / "constructed"
    payload = f"image: !!python/object/apply:builtins.open [{str(marker)!r}, w]\n"
    yaml.unsafe_load(payload)  # the payload is live: PyYAML's unsafe loader creates the file
    assert marker.exists()
    marker.unlink()
    path = write(tmp_path, HEAD + payload.encode())
    assert_refused(run_cli("submit", path, timeout=60), path, 3, "is not allowed")
    assert not marker.exists()


def test_a_set_value_gets_the_same_protection(tmp_path):
    path = write(tmp_path, HEAD)
    proc = run_cli("validate", path, "--set", "env.A=!!python/object/apply:os.system ['true']")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert proc.stderr.startswith("cloudtrain: error: --set env.A=!!python/object/apply:os.system ['true']: "
                                  "the tag !!python/object/apply:os.system is not allowed"), proc.stderr
    proc = run_cli("validate", path, "--set", "env=" + "{a: " * 100 + "1" + "}" * 100)
    assert proc.returncode == 2 and "nested more than 64 levels" in proc.stderr and "Traceback" not in proc.stderr
