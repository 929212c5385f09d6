"""``cloudtrain outputs HANDLE`` for the Kubernetes providers (kubeflow, kubeflow-trainer, volcano,
eks): copy what the job's nodes wrote to ``CLOUDTRAIN_OUTPUT_DIR`` out of its output claim.

``storage.output`` there is ``pvc://CLAIM[/PATH]``, mounted at ``/cloudtrain/output`` (subPath
PATH) in every node pod (``manifests.storage_mounts``); the job object names it, so no local
record is needed.  A finished job's pods are gone or stopped, and a stopped container cannot be
exec'd into, so cloudtrain starts one short-lived pod of its own -- the job's image, the claim
mounted read-only at the same place, in the job's namespace, deleted afterwards (and ending by
itself after ``HELPER_DEADLINE`` if cloudtrain is interrupted) -- and streams a gzip'd tar of the
directory out of it through the pods/exec API, as ``kubectl cp`` does (the image's Python writes
the tar: every image cloudtrain runs has Python >= 3.8).  The archive is unpacked here with the
launcher's own unpacker (``cloudtrain.launch.unpack``: no absolute names, no ``..``, links only
inside the destination).

A job without ``storage.output`` has nothing to copy: its nodes wrote into their containers,
which are gone with the pods.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

from cloudtrain.spec.errors import BadInput, PlatformError

from . import manifests as m

LABEL_OUTPUTS = "cloudtrain.io/outputs-of"   # not cloudtrain.io/job: the helper is no node of the job
HELPER_DEADLINE = 3600                        # seconds: the helper pod ends itself (activeDeadlineSeconds)
START_TIMEOUT = 300.0                         # seconds for the helper to run (an image pull, a claim attach)
# Run in the output directory by the image's Python: a gzip'd tar of it on stdout.
TAR_SCRIPT = ("import os,sys,tarfile\n"
              "with tarfile.open(fileobj=sys.stdout.buffer,mode='w|gz') as t:\n"
              " for n in sorted(os.listdir('.')):t.add(n)\n")


def _templates(node: Any) -> Iterator[dict]:
    """Every pod spec (a dict with ``containers``) under a job object, runtime patches included."""
    if isinstance(node, dict):
        if isinstance(node.get("containers"), list):
            yield node
        for value in node.values():
            yield from _templates(value)
    elif isinstance(node, list):
        for value in node:
            yield from _templates(value)


def output_mount(obj: dict) -> Optional[Tuple[str, str]]:
    """(claim, subPath) the job's pods mount at ``/cloudtrain/output``; None without storage.output."""
    for spec in _templates(obj.get("spec") or {}):
        claims = {v.get("name"): (v.get("persistentVolumeClaim") or {}).get("claimName")
                  for v in spec.get("volumes") or []}
        for c in spec["containers"]:
            for mount in c.get("volumeMounts") or []:
                claim = claims.get(mount.get("name"))
                if mount.get("mountPath") == m.OUTPUT_DIR and claim:
                    return claim, mount.get("subPath", "")
    return None


def job_image_and_python(obj: dict) -> Tuple[str, str]:
    """The image of the job's node container (TrainJob: ``spec.trainer.image``) and the Python
    its command runs (the word after the node shell's ``cloudtrain-node``)."""
    spec = obj.get("spec") or {}
    for c in [spec.get("trainer") or {}] + [c for t in _templates(spec) for c in t["containers"]]:
        if c.get("image"):
            command = c.get("command") or []
            python = command[command.index("cloudtrain-node") + 1] if "cloudtrain-node" in command[:-1] else "python3"
            return c["image"], python
    raise PlatformError("the job object names no image; cannot start a pod to read its output claim")


def helper_pod(obj: dict, claim: str, sub_path: str, image: str, python: str, pull_secrets: List[str]) -> dict:
    """The pod that reads the claim: read-only, the job's image, no GPU, ends by itself."""
    name = obj["metadata"]["name"]
    mount: Dict[str, Any] = {"name": "output", "mountPath": m.OUTPUT_DIR, "readOnly": True}
    if sub_path:
        mount["subPath"] = sub_path
    pod: Dict[str, Any] = {
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"generateName": f"{name[:40]}-outputs-", "labels": {LABEL_OUTPUTS: name}},
        "spec": {"restartPolicy": "Never", "activeDeadlineSeconds": HELPER_DEADLINE,
                 "containers": [{"name": "outputs", "image": image, "workingDir": m.OUTPUT_DIR,
                                 "command": [python, "-c", f"import time; time.sleep({HELPER_DEADLINE})"],
                                 "volumeMounts": [mount]}],
                 "volumes": [{"name": "output", "persistentVolumeClaim": {"claimName": claim, "readOnly": True}}]}}
    if pull_secrets:
        pod["spec"]["imagePullSecrets"] = [{"name": n} for n in pull_secrets]
    return pod


def _pull_secrets(obj: dict) -> List[str]:
    for spec in _templates(obj.get("spec") or {}):
        if spec.get("imagePullSecrets"):
            return [s["name"] for s in spec["imagePullSecrets"]]
    return []


def _wait_running(core, ns: str, name: str, timeout: float, poll: float) -> None:
    deadline = time.monotonic() + timeout
    while True:
        pod = core.read_namespaced_pod(name, ns).to_dict()
        phase = (pod.get("status") or {}).get("phase")
        if phase == "Running":
            return
        if phase in ("Failed", "Succeeded"):
            raise PlatformError(f"the pod {ns}/{name} that reads the output claim ended ({phase}) before the copy")
        if time.monotonic() > deadline:
            waiting = [((cs.get("state") or {}).get("waiting") or {}).get("reason")
                       for cs in (pod.get("status") or {}).get("container_statuses") or []]
            why = ", ".join(w for w in waiting if w) or phase or "Pending"
            raise PlatformError(f"the pod {ns}/{name} that reads the output claim did not start within "
                                f"{timeout:.0f}s ({why}); a ReadWriteOnce claim can be mounted on one node only: "
                                "wait until the job's pods are gone, or use a ReadWriteMany claim")
        time.sleep(poll)


def written(archive: Path, dest: Path) -> List[Path]:
    """The regular files of ``archive`` as unpacked under ``dest``."""
    import posixpath
    import tarfile
    with tarfile.open(archive, "r:gz") as tar:
        names = [posixpath.normpath(t.name) for t in tar if t.isfile()]
    return sorted(dest.joinpath(*n.split("/")) for n in names)


def copy_out(core, obj: dict, dest: Path, poll: float = 1.0, timeout: float = START_TIMEOUT) -> List[Path]:
    """Copy the output claim's directory of job ``obj`` into ``dest``; the files written."""
    from kubernetes.stream import stream
    from cloudtrain.launch.unpack import unpack
    mount = output_mount(obj)
    ns = obj["metadata"].get("namespace") or "default"
    if mount is None:
        raise BadInput(f"{obj['metadata']['name']} has no storage.output: its nodes wrote CLOUDTRAIN_OUTPUT_DIR inside "
                       "their containers, which went with the pods; set storage.output: pvc://CLAIM/PATH (a claim "
                       "the nodes can all write) and run the job again")
    image, python = job_image_and_python(obj)
    created = core.create_namespaced_pod(ns, helper_pod(obj, mount[0], mount[1], image, python, _pull_secrets(obj)))
    name = created.metadata.name
    try:
        _wait_running(core, ns, name, timeout, poll)
        ws = stream(core.connect_get_namespaced_pod_exec, name, ns, command=[python, "-c", TAR_SCRIPT],
                    stderr=True, stdin=False, stdout=True, tty=False, _preload_content=False, binary=True)
        errors = b""
        with tempfile.TemporaryDirectory(prefix="cloudtrain-outputs-") as tmp:
            archive = Path(tmp) / "output.tar.gz"
            with open(archive, "wb") as out:
                while True:  # stream to disk: an output of any size costs no memory
                    open_ = ws.is_open()
                    ws.update(timeout=1)
                    if ws.peek_stdout():
                        out.write(ws.read_stdout())
                    if ws.peek_stderr():
                        errors += ws.read_stderr()
                    if not open_:
                        break
            code = ws.returncode
            ws.close()
            if code:
                detail = errors.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit code {code}"]
                raise PlatformError(f"reading the output claim {mount[0]} failed: {detail[0]}")
            unpack(str(archive), str(dest))
            return written(archive, dest)
    finally:
        try:
            core.delete_namespaced_pod(name, ns)
        except Exception:  # noqa: BLE001 -- best effort: the pod ends itself at its deadline
            pass
