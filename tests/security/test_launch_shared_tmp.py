"""``cloudtrain launch`` on a machine another local user shares (issue 39, item 1).

Run with no ``CLOUDTRAIN_LOG_DIR`` and the master on loopback (the documented standalone case),
the launcher writes a ``sitecustomize`` first on the ranks' ``PYTHONPATH`` and, for a DeepSpeed
job of several nodes, its hostfile.  A second user (``nobody``) makes every name the victim (root)
could use in the shared temporary directory first: the old fixed names
(``cloudtrain-<job>-node<i>-site`` with a ``json.py`` in it, ``cloudtrain-<job>-node<i>.hostfile``
as a link to a file of the victim's) and the victim's private directory's name
(``cloudtrain-<uid>``, open to all, with the same plants).  The victim's launch imports none of it,
writes through no link and goes on (no PermissionError).
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from otheruser import as_other_user, shared_tmp

PLANT = textwrap.dedent("""
    import os, sys
    shared, uid, target = sys.argv[1], int(sys.argv[2]), sys.argv[3]
    evil = "import os\\nopen(os.environ['PWNED'], 'w').write('pwned')\\n"
    def plant(folder):
        os.makedirs(folder, exist_ok=True)
        os.chmod(folder, 0o777)
        for name in ("json.py", "sitecustomize.py"):
            with open(os.path.join(folder, name), "w") as f:
                f.write(evil)
    # the names of the launcher before issue 39
    plant(os.path.join(shared, "cloudtrain-cloudtrain-node0-site"))
    os.symlink(target, os.path.join(shared, "cloudtrain-cloudtrain-node0.hostfile"))
    # the victim's private directory's name, made first and open to all
    private = os.path.join(shared, "cloudtrain-%d" % uid)
    plant(os.path.join(private, "cloudtrain-node0-site"))
    os.symlink(target, os.path.join(private, "cloudtrain-node0.hostfile"))
""")

PROBE = "import json, sys; print('JSON_FROM', json.__file__); print('SITE', sys.modules.get('sitecustomize'))"


def _launch(tmp_path, shared, distribution, nodes):
    env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(shared), "CLOUDTRAIN_NUM_NODES": str(nodes),
           "CLOUDTRAIN_NODE_RANK": "0", "CLOUDTRAIN_MASTER_ADDR": "127.0.0.1",
           "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "core"), "PWNED": str(tmp_path / "pwned")}
    return subprocess.run([sys.executable, "-m", "cloudtrain.launch", "--type", distribution, "--",
                           "python3", "-c", PROBE], capture_output=True, text=True, cwd=tmp_path, env=env, timeout=120)


def _planted(shared, tmp_path):
    target = tmp_path / "victims-file"
    target.write_text("the victim's own content\n")
    os.chmod(tmp_path, 0o755)  # the other user may name the target (not write it)
    as_other_user(PLANT, str(shared), str(os.getuid()), str(target))
    return target


def test_a_loopback_launch_imports_nothing_another_user_planted(tmp_path):
    with shared_tmp() as shared:
        _planted(shared, tmp_path)
        proc = _launch(tmp_path, shared, "none", 1)
        assert proc.returncode == 0, proc.stderr
        assert not (tmp_path / "pwned").exists(), "a module the other user planted ran as the victim"
        loaded = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if line.startswith(("JSON_FROM", "SITE")))
        assert not loaded["JSON_FROM"].startswith(str(shared)), loaded
        planted = [p for p in shared.iterdir() if p.lstat().st_uid != os.getuid()]
        assert not any(str(p) + "/" in loaded["SITE"] for p in planted), loaded
        assert "Permission" not in proc.stderr
        # the launch said it did not use the other user's directory, and used one of its own
        assert f"cloudtrain-{os.getuid()} is not a private directory of this user" in proc.stderr
        own = [p for p in shared.iterdir() if p.lstat().st_uid == os.getuid()]
        assert len(own) == 1 and own[0].lstat().st_mode & 0o077 == 0, own


def test_a_deepspeed_hostfile_is_never_written_through_a_planted_link(tmp_path):
    with shared_tmp() as shared:
        target = _planted(shared, tmp_path)
        proc = _launch(tmp_path, shared, "deepspeed", 2)
        # deepspeed is not installed here: the launch gets as far as starting it, after its files
        assert "deepspeed: command not found" in proc.stderr, proc.stderr
        assert "Permission" not in proc.stderr and "Traceback" not in proc.stderr
        assert target.read_text() == "the victim's own content\n"
        hostfiles = [p for p in shared.rglob("*.hostfile") if not p.is_symlink()]
        assert len(hostfiles) == 1 and hostfiles[0].read_text() == "node0 slots=1\nnode1 slots=1\n"
        assert hostfiles[0].parent.owner() == "root" and hostfiles[0].parent.stat().st_mode & 0o077 == 0


def test_a_launch_with_no_other_user_keeps_its_files_in_its_private_directory(tmp_path):
    with shared_tmp() as shared:
        proc = _launch(tmp_path, shared, "deepspeed", 2)
        assert "deepspeed: command not found" in proc.stderr, proc.stderr
        private = shared / f"cloudtrain-{os.getuid()}"
        assert private.is_dir() and private.stat().st_mode & 0o777 == 0o700
        assert sorted(p.name for p in private.iterdir()) == ["cloudtrain-node0-site", "cloudtrain-node0.hostfile"]
        assert [p.name for p in shared.iterdir()] == [private.name]


def test_two_users_launch_one_after_the_other_and_both_run(tmp_path):
    """The victim (root) launched first; then the other user's own launch must not die on the
    files the first one left (before issue 39 it met root's fixed-name directory: PermissionError)."""
    from otheruser import OTHER
    with shared_tmp() as shared:
        first = _launch(tmp_path, shared, "deepspeed", 2)
        assert "deepspeed: command not found" in first.stderr, first.stderr
        theirs = shared / "their-work"  # the other user's working directory (pytest's tmp_path is root's only)
        theirs.mkdir()
        os.chown(theirs, OTHER.pw_uid, OTHER.pw_gid)
        env = {"PATH": "/usr/bin:/bin", "TMPDIR": str(shared), "CLOUDTRAIN_NUM_NODES": "2",
               "CLOUDTRAIN_NODE_RANK": "0", "CLOUDTRAIN_MASTER_ADDR": "127.0.0.1",
               "PYTHONPATH": str(Path(__file__).resolve().parents[2] / "core")}
        second = subprocess.run(["setpriv", f"--reuid={OTHER.pw_uid}", f"--regid={OTHER.pw_gid}", "--clear-groups",
                                 sys.executable, "-m", "cloudtrain.launch", "--type", "deepspeed", "--",
                                 "python3", "-c", PROBE], capture_output=True, text=True, cwd=theirs, env=env,
                                timeout=120)
        assert "deepspeed: command not found" in second.stderr, second.stderr
        assert "Permission" not in second.stderr and "Traceback" not in second.stderr
        assert (shared / f"cloudtrain-{OTHER.pw_uid}" / "cloudtrain-node0.hostfile").is_file()
