"""`cloudtrain launch` as a node runs it: detection, stdlib only, Python 3.8 syntax, liveness."""
import ast
import json
import os
import subprocess
import sys
import threading

import pytest

from cloudtrain.launch import detectors, liveness
from conftest import ROOT

LAUNCH_FILES = sorted((ROOT / "core/cloudtrain/launch").glob("*.py")) + [
    ROOT / "core/cloudtrain/__init__.py"] + sorted(ROOT.glob("plugins/*/detect.py"))


@pytest.mark.parametrize("path", LAUNCH_FILES, ids=lambda p: p.name)
def test_launcher_code_is_python_38_syntax(path):
    ast.parse(path.read_text(), filename=str(path), feature_version=(3, 8))


def launch(args, env, site=False):
    """Run the launcher with no site-packages at all (-S): proves it needs the stdlib only.
    The interpreter's folder leads PATH, so a bare ``python`` in a command stays as written
    whatever the caller's PATH holds (with none, the launcher names its interpreter instead)."""
    base = {"PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
            "PYTHONPATH": f"{ROOT / 'core'}{os.pathsep}{ROOT / 'plugins'}"}
    cmd = [sys.executable] + ([] if site else ["-S"]) + ["-m", "cloudtrain.launch", *args]
    return subprocess.run(cmd, env={**base, **env}, capture_output=True, text=True, timeout=60)


def test_print_runs_on_the_standard_library_alone():
    env = {"CLOUDTRAIN_NUM_NODES": "2", "CLOUDTRAIN_NODE_RANK": "1", "CLOUDTRAIN_MASTER_ADDR": "127.0.0.1",
           "CLOUDTRAIN_MASTER_PORT": "29400", "CLOUDTRAIN_HOSTS": "127.0.0.1,127.0.0.1"}
    proc = launch(["--print", "--type", "ddp", "--nproc-per-node", "2", "--", "python", "train.py"], env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == ("python -m torch.distributed.run --nnodes 2 --nproc-per-node 2 --node-rank 1 "
                                   "--master-addr 127.0.0.1 --master-port 29400 --tee 3 train.py")


def test_type_defaults_to_the_environment_then_ddp():
    env = {"CLOUDTRAIN_NUM_NODES": "1", "CLOUDTRAIN_DISTRIBUTION": "none"}
    assert launch(["--print", "--", "echo", "hi"], env).stdout.strip() == "echo hi"
    assert "torch.distributed.run" in launch(["--print", "--", "python", "t.py"], {"CLOUDTRAIN_NUM_NODES": "1"}).stdout


def test_show_topology_of_the_platform_given_by_name():
    env = {"NODE_LIST": "a:1,b:1", "INDEX": "1", "MASTER_ADDR": "a", "MASTER_PORT": "23456", "WORLD_SIZE": "2",
           "RANK": "1", "PYTHONPATH": f"{ROOT / 'core'}:{ROOT / 'plugins'}:{ROOT / 'tests/support'}",
           "CLOUDTRAIN_DETECTORS": "fakeone=ct_fakeone.detect:detect"}
    proc = launch(["--show-topology", "--platform", "fakeone"], env, site=True)
    assert proc.returncode == 0, proc.stderr
    topo = json.loads(proc.stdout)
    assert (topo["platform"], topo["node_rank"], topo["num_nodes"], topo["hosts"]) == ("fakeone", 1, 2, ["a", "b"])


def test_bad_platform_and_bad_values_exit_2_with_one_line():
    proc = launch(["--platform", "nowhere", "--", "python", "t.py"], {})
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "unknown platform 'nowhere'" in proc.stderr
    proc = launch(["--print", "--", "python", "t.py"], {"CLOUDTRAIN_NUM_NODES": "2", "CLOUDTRAIN_NODE_RANK": "5"})
    assert proc.returncode == 2 and "node_rank 5 is outside 0..1" in proc.stderr


def test_missing_command_exits_127(tmp_path):
    env = {"CLOUDTRAIN_NUM_NODES": "1", "CLOUDTRAIN_OUTPUT_DIR": str(tmp_path)}
    proc = launch(["--type", "none", "--", "no-such-command-xyz"], env)
    assert proc.returncode == 127 and "no-such-command-xyz: command not found" in proc.stderr


def test_none_type_execs_with_the_neutral_environment(tmp_path):
    env = {"CLOUDTRAIN_NUM_NODES": "2", "CLOUDTRAIN_NODE_RANK": "1", "CLOUDTRAIN_HOSTS": "127.0.0.1,127.0.0.1",
           "CLOUDTRAIN_MASTER_ADDR": "127.0.0.1", "CLOUDTRAIN_OUTPUT_DIR": str(tmp_path / "out")}
    code = ("import os, json; print(json.dumps({k: v for k, v in os.environ.items() "
            "if k.startswith(('CLOUDTRAIN_', 'RANK', 'WORLD', 'GLOO'))}))")
    proc = launch(["--type", "none", "--", sys.executable, "-c", code], env)
    seen = json.loads(proc.stdout)
    assert seen["RANK"] == "1" and seen["WORLD_SIZE"] == "2" and seen["GLOO_SOCKET_IFNAME"] == "lo"
    assert seen["CLOUDTRAIN_PLATFORM"] == "local" and (tmp_path / "out").is_dir()


def test_detection_order_prefers_platforms_over_the_generic_detector():
    environ = {"NODE_LIST": "a:1,b:1", "INDEX": "0", "MASTER_ADDR": "a", "MASTER_PORT": "1", "WORLD_SIZE": "2",
               "CLOUDTRAIN_NUM_NODES": "5", "CLOUDTRAIN_DETECTORS": "fakeone=ct_fakeone.detect:detect"}
    assert [n for n, _ in detectors.registered(environ)][-1] == "local"
    assert detectors.detect(environ).platform == "fakeone"
    assert detectors.detect(environ, platform="local").num_nodes == 5
    assert detectors.detect({}).platform == "standalone"
    assert detectors.detect({"PET_NNODES": "1:4", "PET_NODE_RANK": "3"}).num_nodes == 4


def test_a_broken_detector_does_not_stop_auto_detection():
    environ = {"CLOUDTRAIN_DETECTORS": "broken=no_such_module_xyz:detect", "CLOUDTRAIN_NUM_NODES": "1"}
    assert detectors.detect(environ).platform == "local"
    with pytest.raises(detectors.DetectionError, match="cannot load detector"):
        detectors.detect(environ, platform="broken")


def test_two_plugins_naming_one_platform_are_said_once_and_the_first_is_used(tmp_path):
    """A third-party plugin that names a built-in platform (here ``sagemaker``) with its own
    detector: the node does not stop, keeps the built-in (the entry points come first) and says
    the clash in one line, once, however often detection runs."""
    (tmp_path / "ct_clash").mkdir()
    (tmp_path / "ct_clash" / "__init__.py").write_text("")
    (tmp_path / "ct_clash" / "detect.py").write_text(
        "from cloudtrain.launch.platform import Platform\n"
        "def detect(environ):\n"
        "    raise AssertionError('the ignored detector ran')\n"
        "PLATFORMS = (Platform('sagemaker', detect, priority=100),)\n")
    code = ("from cloudtrain.launch import detectors, platform\n"
            "for _ in range(3):\n"
            "    found = [p.target for p in platform.installed() if p.name == 'sagemaker']\n"
            "print(found)\n"
            "print(detectors.detect({'CLOUDTRAIN_NUM_NODES': '1'}).platform)\n")
    env = {**os.environ, "CLOUDTRAIN_PLUGINS": "ct_clash",
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "core"), str(ROOT / "plugins")])}
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split("\n")[:2] == ["['cloudtrain_aws.detect:detect_sagemaker']", "local"], proc.stdout
    warnings = [line for line in proc.stderr.splitlines() if "sagemaker" in line]
    assert len(warnings) == 1 and "ct_clash.detect:detect is ignored" in warnings[0], proc.stderr


def test_liveness_tells_waiting_nodes_the_exit_code():
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = liveness.LivenessServer(port, expected=2, host="127.0.0.1")
    codes = []
    threads = [threading.Thread(target=lambda: codes.append(liveness.wait_for_launcher("127.0.0.1", port, 10)))
               for _ in range(2)]
    for t in threads:
        t.start()
    assert server.wait_for_peers(10)
    server.finish(7, grace=1)
    for t in threads:
        t.join(10)
    assert codes == [7, 7]


def test_waiting_node_gives_up_when_node_zero_never_answers():
    with pytest.raises(TimeoutError):
        liveness.wait_for_launcher("127.0.0.1", 1, timeout=0.5)


def test_the_shipped_bundle_runs_on_the_standard_library_alone(tmp_path):
    from cloudtrain.launch.bundle import write_bundle
    write_bundle(tmp_path / "b", ["ct_fakeone.detect:detect"])
    assert (tmp_path / "b" / "entry.sh").read_text().startswith("#!/bin/sh")
    assert not (tmp_path / "b" / "cloudtrain" / "launch" / "__init__" ).exists()
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": str(tmp_path / "b"), "NODE_LIST": "a:0,b:0", "INDEX": "1",
           "MASTER_ADDR": "a", "MASTER_PORT": "23456", "WORLD_SIZE": "2", "RANK": "1",
           "CLOUDTRAIN_DETECTORS": "fakeone=ct_fakeone.detect:detect"}
    proc = subprocess.run([sys.executable, "-S", "-m", "cloudtrain.launch", "--show-topology"], env=env,
                          capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["platform"] == "fakeone"


def test_secrets_file_is_exported_to_the_command(tmp_path):
    secrets = tmp_path / "secrets.json"
    secrets.write_text(json.dumps({"API_TOKEN": "v-123"}))
    env = {"CLOUDTRAIN_NUM_NODES": "1", "CLOUDTRAIN_OUTPUT_DIR": str(tmp_path), "CLOUDTRAIN_SECRETS_FILE": str(secrets)}
    proc = launch(["--type", "none", "--", sys.executable, "-c", "import os; print(os.environ['API_TOKEN'])"], env)
    assert proc.stdout.strip() == "v-123"
    proc = launch(["--print", "--", "x"], {**env, "CLOUDTRAIN_SECRETS_FILE": str(tmp_path / "missing.json")})
    assert proc.returncode == 2 and "missing.json" in proc.stderr


def test_mpirun_starts_only_once_the_peers_sshd_answers(tmp_path):
    """Issue 21 #8: with $CLOUDTRAIN_WAIT_SSH, node 0 waits until every host's sshd port accepts
    before mpirun (an MPIJob launcher of mpi-operator 0.4.0 starts before its workers)."""
    import socket
    import time
    from cloudtrain.launch import main as launch_module
    free = socket.socket()
    free.bind(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    opened = []

    def open_later():
        time.sleep(1.0)
        server = socket.socket()
        server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        server.bind(("127.0.0.1", port))
        server.listen(4)
        opened.append(time.monotonic())
        time.sleep(3)
        server.close()
    threading.Thread(target=open_later, daemon=True).start()
    launch_module.wait_ports([("127.0.0.1", port)], timeout=30)
    assert opened and time.monotonic() >= opened[0]  # returned only after the port opened
    time.sleep(3.5)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match="127.0.0.1:%d did not open within 1s" % port):
        launch_module.wait_ports([("127.0.0.1", port)], timeout=1)
    assert time.monotonic() - started >= 1


def test_launch_sshd_starts_the_images_sshd_before_the_command(tmp_path):
    """Issue 21 #3: ``cloudtrain launch --sshd`` (ModelArts Standard mpi/horovod, like SageMaker's
    prelude) starts the node's /usr/sbin/sshd first, then runs the plan."""
    marker, fake = tmp_path / "sshd-started", tmp_path / "sshd"
    fake.write_text("#!/bin/sh\necho started > %s\n" % marker)
    fake.chmod(0o755)
    code = ("import os, sys; from cloudtrain.launch import sshd; sshd.SSHD = %r; os.geteuid = lambda: 0; "
            "from cloudtrain.launch.main import main; sys.exit(main(sys.argv[1:]))" % str(fake))
    env = {"PATH": os.environ["PATH"], "PYTHONPATH": f"{ROOT / 'core'}{os.pathsep}{ROOT / 'plugins'}",
           "CLOUDTRAIN_NUM_NODES": "1", "CLOUDTRAIN_NODE_RANK": "0", "CLOUDTRAIN_OUTPUT_DIR": str(tmp_path / "out")}
    probe = "import os, sys; print('sshd first:', os.path.exists(sys.argv[1]))"
    out = subprocess.run([sys.executable, "-c", code, "--sshd", "--type", "none", "--", sys.executable, "-c", probe,
                          str(marker)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "sshd first: True" in out.stdout


def test_a_master_that_never_resolves_fails_the_node_naming_it(tmp_path):
    """Issue 28 #3.  After 60 s the launcher kept the name, local_ip_towards() fell back to
    127.0.0.1 and the node exported GLOO_SOCKET_IFNAME=lo: its ranks could reach no peer while
    the others waited for them.  Now it waits up to the peer timeout, then fails with one line
    that names the address (a ``.invalid`` name never resolves: RFC 6761 section 6.4), and runs
    nothing."""
    ran = tmp_path / "ran"
    env = {"CLOUDTRAIN_NUM_NODES": "2", "CLOUDTRAIN_NODE_RANK": "1", "CLOUDTRAIN_MASTER_ADDR": "node-0.ct-test.invalid",
           "CLOUDTRAIN_OUTPUT_DIR": str(tmp_path / "out"), "CLOUDTRAIN_PEER_TIMEOUT": "1"}
    proc = launch(["--type", "ddp", "--", "touch", str(ran)], env)
    assert proc.returncode == 1, proc.stderr
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("cloudtrain launch: ")
    assert "node-0.ct-test.invalid" in proc.stderr and "CLOUDTRAIN_PEER_TIMEOUT" in proc.stderr
    assert not ran.exists()
    # --print runs nothing and waits for nothing: it keeps the name
    shown = launch(["--print", "--type", "none", "--", "true"], env)
    assert shown.returncode == 0, shown.stderr


def test_a_none_job_meets_no_peer_and_does_not_wait_for_node_0s_name(tmp_path):
    """``none`` runs the command on every node, meeting no peer: node 0 may have ended already
    (a Docker container that exited leaves the network's DNS), and the others must not wait the
    peer timeout for its name (a restarted docker job hung 600 s)."""
    ran = tmp_path / "ran"
    env = {"CLOUDTRAIN_NUM_NODES": "2", "CLOUDTRAIN_NODE_RANK": "1", "CLOUDTRAIN_MASTER_ADDR": "node-0.ct-test.invalid",
           "CLOUDTRAIN_OUTPUT_DIR": str(tmp_path / "out"), "CLOUDTRAIN_PEER_TIMEOUT": "3600"}
    proc = launch(["--type", "none", "--", "touch", str(ran)], env)
    assert proc.returncode == 0, proc.stderr
    assert ran.exists()


def test_the_master_address_is_waited_for_while_its_record_is_missing(monkeypatch):
    """A pod's DNS record appears once the pod is Ready: the lookup is retried until then."""
    import socket
    from cloudtrain.launch import main as launch_module
    from cloudtrain.launch.topology import Topology
    real, calls = socket.getaddrinfo, []

    def not_yet(host, *args, **kwargs):
        calls.append(host)
        if host == "node-0.ct-test.invalid":
            if len(calls) < 3:
                raise socket.gaierror(socket.EAI_NONAME, "not yet")
            host = "127.0.0.1"
        return real(host, *args, **kwargs)

    monkeypatch.setattr(socket, "getaddrinfo", not_yet)
    monkeypatch.setattr(launch_module, "PEER_TIMEOUT", 60.0)
    topology = Topology(platform="test", node_rank=1, num_nodes=2, master_addr="node-0.ct-test.invalid")
    assert launch_module.master_address(topology) == "127.0.0.1" and len(calls) == 3
