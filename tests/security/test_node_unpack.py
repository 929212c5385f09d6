"""A node checks the code archive's sha256, then unpacks it safely, on the oldest and the newest
Python the launcher supports and on Debian's 3.11.2 (no tarfile filters), through the very
command the cloud nodes run: ``python3 -c BOOTSTRAP --sha256 HEX ARCHIVE DEST`` (the bootstrap
checks the digest, then runs ``unpack.py`` from the checked archive).

The archives are crafted here with ``tarfile``: each carries the real ``unpack.py`` where the
launcher bundle puts it, and hostile members.  An interpreter the test needs and cannot find is
a failure that says how to get it, never a skip.
"""
from __future__ import annotations

import glob
import hashlib
import io
import os
import shutil
import stat
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest

from cloudtrain.launch import unpack as unpack_module
from cloudtrain.launch.unpack import BOOTSTRAP, SOURCE_IN_ARCHIVE, bootstrap_argv

UNPACK_SOURCE = Path(unpack_module.__file__).read_bytes()
IMAGE = "cloudtrain/test-python:latest"  # Debian bookworm's python3 3.11.2: tarfile has no filters
MiB = 1 << 20


def _interpreter(version: str) -> str:
    env = os.environ.get(f"CLOUDTRAIN_TEST_PYTHON{version.replace('.', '')}")
    found = [env] if env else sorted(glob.glob(f"/root/.pyenv/versions/{version}.*/bin/python{version}"))
    found += [p for p in [shutil.which(f"python{version}")] if p]
    for path in found:
        if path and os.access(path, os.X_OK):
            return path
    pytest.fail(f"no Python {version} for the node unpack test: install it (`pyenv install {version}`, or "
                f"a distribution's python{version}) or name it in CLOUDTRAIN_TEST_PYTHON{version.replace('.', '')}")


def _docker_runner(tmp: Path):
    if shutil.which("docker") is None or subprocess.run(["docker", "image", "inspect", IMAGE],
                                                        capture_output=True).returncode != 0:
        pytest.fail(f"the node unpack test runs Debian's Python 3.11.2 in the image {IMAGE}: start dockerd and "
                    "build it (bash scripts/start-dockerd.sh; bash scripts/build-test-image.sh)")

    def run(argv):
        # the same absolute paths inside the container, so the archive and DEST read the same
        return ["docker", "run", "--rm", "--network", "none", "-v", f"{tmp}:{tmp}", IMAGE, "python3", *argv[1:]]
    return run


@pytest.fixture(params=["3.8", "3.13", "debian-3.11.2"])
def node_python(request, tmp_path):
    """A function that turns the node's argv (python first) into the argv this test runs."""
    if request.param == "debian-3.11.2":
        return _docker_runner(tmp_path)
    python = _interpreter(request.param)
    return lambda argv: [python, *argv[1:]]


def _add(tar, name, data=b"", mode=0o644, **fields):
    info = tarfile.TarInfo(name)
    info.size, info.mode = len(data), mode
    for key, value in fields.items():
        setattr(info, key, value)
    tar.addfile(info, io.BytesIO(data) if info.isfile() else None)


def _archive(path: Path, members) -> str:
    """A gzip'd tar at ``path`` with the launcher's unpack.py and ``members`` (callables on the
    TarFile); its sha256."""
    with tarfile.open(path, "w:gz", format=tarfile.PAX_FORMAT) as tar:
        _add(tar, SOURCE_IN_ARCHIVE, UNPACK_SOURCE)
        _add(tar, "train.py", b"print('hello')\n")
        for member in members:
            member(tar)
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _unpack(node_python, tmp_path, members, sha=None, dest=None):
    archive = tmp_path / "code.tar.gz"
    digest = _archive(archive, members)
    dest = dest or tmp_path / "dest"
    argv = bootstrap_argv("python3", sha or digest, str(archive), str(dest))
    return subprocess.run(node_python(argv), capture_output=True, text=True, timeout=240), dest


def _outside(tmp_path):
    """Every file under tmp_path outside DEST and the archive: nothing may appear there."""
    return sorted(str(p.relative_to(tmp_path)) for p in tmp_path.rglob("*")
                  if not str(p.relative_to(tmp_path)).startswith("dest") and p.name != "code.tar.gz")


def test_the_bootstrap_fits_sagemakers_entrypoint_item():
    assert len(BOOTSTRAP) <= 256  # botocore: TrainingContainerEntrypointString max 256


def test_a_safe_archive_unpacks_with_its_inner_links(node_python, tmp_path):
    result, dest = _unpack(node_python, tmp_path, [
        lambda t: _add(t, "pkg/model.py", b"X = 1\n"),
        lambda t: _add(t, "run.sh", b"#!/bin/sh\n", mode=0o755),
        lambda t: _add(t, "model.py", type=tarfile.SYMTYPE, linkname="pkg/model.py"),
        lambda t: _add(t, "pkg/again.py", type=tarfile.SYMTYPE, linkname="../pkg/model.py"),
    ])
    assert result.returncode == 0, result.stderr
    assert (dest / "train.py").read_text() == "print('hello')\n"
    assert os.readlink(dest / "model.py") == "pkg/model.py" and (dest / "model.py").read_text() == "X = 1\n"
    assert (dest / "pkg" / "again.py").read_text() == "X = 1\n"
    assert stat.S_IMODE((dest / "run.sh").stat().st_mode) == 0o755


def test_a_changed_archive_writes_nothing(node_python, tmp_path):
    result, dest = _unpack(node_python, tmp_path, [], sha="0" * 64)
    assert result.returncode != 0
    assert "sha256 differs" in result.stderr
    assert not dest.exists() or not any(dest.iterdir())


@pytest.mark.parametrize("name", ["../evil.py", "pkg/../../evil.py", "/ABS/evil.py"])
def test_a_name_outside_the_tree_refuses_the_archive(node_python, tmp_path, name):
    name = name.replace("/ABS", str(tmp_path))
    result, dest = _unpack(node_python, tmp_path, [lambda t: _add(t, name, b"pwned")])
    assert result.returncode != 0 and "outside" in result.stderr
    assert _outside(tmp_path) == []


@pytest.mark.parametrize("kind", [tarfile.LNKTYPE, tarfile.FIFOTYPE, tarfile.CHRTYPE, tarfile.BLKTYPE])
def test_hard_links_and_special_files_refuse_the_archive(node_python, tmp_path, kind):
    extra = {"linkname": "train.py"} if kind == tarfile.LNKTYPE else {"devmajor": 1, "devminor": 3}
    result, dest = _unpack(node_python, tmp_path, [lambda t: _add(t, "odd", type=kind, **extra)])
    assert result.returncode != 0
    assert not os.path.lexists(dest / "odd")


def test_links_that_leave_the_tree_are_skipped_and_never_written_through(node_python, tmp_path):
    (tmp_path / "secret").mkdir()
    (tmp_path / "secret" / "key").write_text("kept")
    result, dest = _unpack(node_python, tmp_path, [
        lambda t: _add(t, "abs", type=tarfile.SYMTYPE, linkname=str(tmp_path / "secret")),
        lambda t: _add(t, "up", type=tarfile.SYMTYPE, linkname="../secret"),
        # a chain: sub/top is DEST itself (allowed), esc goes one further up through it
        lambda t: _add(t, "sub/top", type=tarfile.SYMTYPE, linkname=".."),
        lambda t: _add(t, "esc", type=tarfile.SYMTYPE, linkname="sub/top/../secret"),
        lambda t: _add(t, "esc2", type=tarfile.SYMTYPE, linkname="sub/top/.."),
        # a file through a link's name: written inside DEST, never into secret/
        lambda t: _add(t, "up/key", b"pwned"),
    ])
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "secret" / "key").read_text() == "kept"
    assert sorted(p.name for p in (tmp_path / "secret").iterdir()) == ["key"]
    for name in ("abs", "esc", "esc2"):
        assert not os.path.lexists(dest / name), name
    assert not (dest / "up").is_symlink() and (dest / "up" / "key").read_text() == "pwned"
    assert os.path.realpath(dest / "sub" / "top") == os.path.realpath(dest)
    assert "abs" in result.stderr and "esc" in result.stderr


def test_a_link_already_in_dest_is_never_written_through(node_python, tmp_path):
    (tmp_path / "secret").mkdir()
    (tmp_path / "victim").write_text("kept")
    dest = tmp_path / "dest"
    dest.mkdir()
    (dest / "dir").symlink_to(tmp_path / "secret")
    (dest / "file").symlink_to(tmp_path / "victim")
    result, _ = _unpack(node_python, tmp_path, [lambda t: _add(t, "file", b"new")], dest=dest)
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "victim").read_text() == "kept" and not (dest / "file").is_symlink()
    assert (dest / "file").read_text() == "new"
    result, _ = _unpack(node_python, tmp_path, [lambda t: _add(t, "dir/pwned", b"x")], dest=dest)
    assert result.returncode != 0 and "symbolic link" in result.stderr
    assert list((tmp_path / "secret").iterdir()) == []


def test_setuid_setgid_sticky_and_group_write_are_stripped(node_python, tmp_path):
    result, dest = _unpack(node_python, tmp_path, [
        lambda t: _add(t, "suid", b"#!/bin/sh\n", mode=0o6777),
        lambda t: _add(t, "sticky", b"x", mode=0o1666),
    ])
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE((dest / "suid").stat().st_mode) == 0o755
    assert stat.S_IMODE((dest / "sticky").stat().st_mode) == 0o644


@pytest.mark.parametrize("version", ["3.8", "3.13"])
def test_a_large_member_is_streamed(tmp_path, version):
    """A 300 MiB member (a few hundred KiB packed): the unpacking process stays under 100 MB."""
    python = _interpreter(version)
    archive = tmp_path / "code.tar.gz"
    size = 300 * MiB

    class Zeros(io.RawIOBase):
        left = size

        def readable(self):
            return True

        def readinto(self, b):
            n = min(len(b), self.left)
            b[:n] = bytes(n)
            self.left -= n
            return n

    with tarfile.open(archive, "w:gz", compresslevel=1) as tar:
        _add(tar, SOURCE_IN_ARCHIVE, UNPACK_SOURCE)
        info = tarfile.TarInfo("weights.bin")
        info.size = size
        tar.addfile(info, io.BufferedReader(Zeros()))
    digest = hashlib.sha256(archive.read_bytes()).hexdigest()
    # Linux keeps a peak RSS across exec and a forked child starts with its parent's pages: a
    # small interpreter forks the unpacker, so its peak is its own, not this test process's
    peak = ("import os, sys\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    os.execvp(sys.argv[1], sys.argv[1:])\n"
            "_, status, usage = os.wait4(pid, 0)\n"
            "print(usage.ru_maxrss)\n"
            "sys.exit(os.waitstatus_to_exitcode(status))\n")
    proc = subprocess.run([sys.executable, "-S", "-c", peak,
                           *bootstrap_argv(python, digest, str(archive), str(tmp_path / "dest"))],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "dest" / "weights.bin").stat().st_size == size
    kib = int(proc.stdout.split()[-1])
    assert kib * 1024 < 100 * 1000 * 1000, f"peak RSS {kib} KiB"
