"""Shipping a 50 MB code tree: time and bytes per provider path, first and second submit.

    python bench/bench_shipping.py [--mb 50] [--rounds 3]

Each path runs the provider's own ``ship_code`` (what ``submit`` and ``cloudtrain stage`` call)
through the real SDK against the loopback double the plugin's tests use: S3 through boto3 and
moto's server (sagemaker; the Kubernetes providers' ``code_store``), COS through cos-python-sdk-v5
(tione), OBS through esdk-obs-python (modelarts).  Side by side, the alternative a user has
without cloudtrain: upload the tree file by file with the same SDK (``aws s3 cp --recursive``,
``coscli cp -r``, ``obsutil cp -r``), once, and again for the second submit.  The inline path
(a Kubernetes ConfigMap) is measured on the same tree: it is refused, at render, for its size.

Bytes are what the store's ``put`` or ``put_file`` was given (the request bodies), counted around
the real call.
On loopback the network costs nothing, so the times here are packing and SDK overhead; over a
real link the bytes dominate, and they are what the last column compares.  A "second submit" is
a new process: it packs again (to learn the archive's name) and sends nothing.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Callable, Dict, List, Tuple

REPO = Path(__file__).resolve().parents[1]
for sub in ("core", "plugins", "tests", "tests/support"):
    sys.path.insert(0, str(REPO / sub))

from cloudtrain.transfer import objectstore  # noqa: E402
from cloudtrain.spec.errors import CloudtrainError  # noqa: E402
from cloudtrain.input.loading import job_from_dict  # noqa: E402
from cloudtrain.transfer.objectstore import ObjectStore, ObjectUrl  # noqa: E402

WORDS = ("def", "return", "self", "import", "torch", "tensor", "model", "loss", "batch", "for", "in",
         "if", "else", "None", "True", "optimizer", "step", "grad", "x", "y", "data", "config", "=", "(", ")")


def make_tree(root: Path, mb: float) -> int:
    """A code tree of ``mb`` MB: source-like text files (about 4:1 under gzip) and one binary
    asset of a fifth of the size (incompressible), as a repository with a small model file has."""
    rng = random.Random(7)
    (root / "assets").mkdir(parents=True)
    binary = int(mb * 1e6 / 5)
    (root / "assets" / "tokenizer.bin").write_bytes(os.urandom(binary))
    left, i = int(mb * 1e6) - binary, 0
    while left > 0:
        d = root / "src" / f"pkg{i % 40}"
        d.mkdir(parents=True, exist_ok=True)
        text = "\n".join(" ".join(rng.choice(WORDS) for _ in range(12)) for _ in range(400)) + "\n"
        (d / f"mod{i}.py").write_text(text)
        left -= len(text)
        i += 1
    (root / "train.py").write_text("print('hi')\n")
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


class Counted:
    """Counts the bytes and calls every store's ``put`` is given, around the real call."""

    def __init__(self):
        self.bytes = self.puts = 0

    def __enter__(self):
        counter = self

        def wrap(cls):
            original, original_file = cls.put, cls.put_file

            def put(store, url, data, content_type="application/octet-stream"):
                counter.bytes += len(data)
                counter.puts += 1
                return original(store, url, data, content_type)

            def put_file(store, url, path, content_type="application/octet-stream"):  # an archive, from its file
                counter.bytes += os.path.getsize(path)
                counter.puts += 1
                return original_file(store, url, path, content_type)
            cls.put, cls.put_file = put, put_file
            return cls, original, original_file
        self.patched = [wrap(cls) for cls in _store_classes()]
        return self

    def __exit__(self, *exc):
        for cls, original, original_file in self.patched:
            cls.put, cls.put_file = original, original_file


def _store_classes():
    out = []
    for scheme in objectstore.stores():
        try:
            out.append(objectstore.store_class(scheme))
        except CloudtrainError:
            pass
    return out


def timed(fn: Callable[[], object]) -> Tuple[float, int, int]:
    with Counted() as c:
        start = time.perf_counter()
        fn()
        return time.perf_counter() - start, c.bytes, c.puts


def per_file(store: ObjectStore, prefix: ObjectUrl, root: Path) -> None:
    """The alternative: every file of the tree, one PUT each (cp -r)."""
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        store.put(prefix.child(path.relative_to(root).as_posix()), path.read_bytes())


# -- the paths ----------------------------------------------------------------------------------
def s3_paths(stack: ExitStack, code: Path) -> List[tuple]:
    from doubles.aws_double import AwsDouble
    from cloudtrain.extend.plugins import get_provider
    aws = stack.enter_context(AwsDouble())
    for bucket in ("ct-ship", "ct-alt"):
        aws.client("s3").create_bucket(Bucket=bucket)
    s3 = objectstore.open_store(ObjectUrl("s3", "ct-alt"), client=aws.client("s3"))
    alt = lambda: per_file(s3, ObjectUrl.parse("s3://ct-alt/tree"), code)  # noqa: E731
    out = []
    sm = get_provider("sagemaker", **aws.clients())
    job = job_from_dict({"name": "ship", "code": str(code), "command": "python train.py", "image": "img:1",
                         "providers": {"sagemaker": {"role_arn": "arn:aws:iam::123456789012:role/t",
                                                     "output_s3": "s3://ct-ship/runs", "region": "us-east-1"}}})
    out.append(("sagemaker → S3 (boto3, moto)", lambda: sm.ship_code(sm.render(job)), alt))
    # a Kubernetes job too large for its ConfigMap: code_store, any S3-compatible endpoint
    for name, value in {**aws.env(), "AWS_ENDPOINT_URL": aws.endpoint}.items():
        os.environ[name] = value
    kf = get_provider("kubeflow")
    kjob = job_from_dict({"name": "ship", "code": str(code), "command": "python train.py", "image": "img:1",
                          "providers": {"kubeflow": {"code_store": "s3://ct-ship/kube",
                                                     "code_store_endpoint": aws.endpoint}}})
    out.append(("kubeflow → code_store S3 (boto3, moto)", lambda: kf.ship_code(kf.render(kjob)), alt))
    return out


def cos_paths(stack: ExitStack, code: Path) -> List[tuple]:
    from doubles.cos_double import CosDouble
    from tencentcloud.common.credential import Credential
    from doubles.tione_double import SECRET_ID, SECRET_KEY
    from cloudtrain_tione.provider import TioneProvider
    cos = stack.enter_context(CosDouble(buckets=("train-1250000000",)))
    provider = TioneProvider(credential=Credential(SECRET_ID, SECRET_KEY), endpoint="http://127.0.0.1:9",
                             cos_endpoint=cos.url, poll=0)
    job = job_from_dict({"name": "ship", "code": str(code), "command": "python train.py", "image": "img:1",
                         "providers": {"tione": {"region": "ap-shanghai", "instance_type": "TI.S.LARGE.POST",
                                                 "code_store": "cos://train-1250000000/ship"}}})
    store = provider.cos("ap-shanghai")
    alt = lambda: per_file(store, ObjectUrl.parse("cos://train-1250000000/alt"), code)  # noqa: E731
    return [("tione → COS (cos-python-sdk-v5)", lambda: provider.ship_code(provider.render(job)), alt)]


def fresh_process() -> None:
    """Forget what this process packed and sent, as a new ``cloudtrain`` process starts."""
    from cloudtrain.transfer import shipping
    shipping._PACKED.clear()
    objectstore.forget_uploads()


def obs_paths(stack: ExitStack, code: Path) -> List[tuple]:
    from doubles.obs_double import AK, SK, ObsDouble
    from cloudtrain_modelarts.obsstore import ObsStore
    from cloudtrain.extend.plugins import get_provider
    obs = stack.enter_context(ObsDouble())
    obs.create_bucket("team-obs")
    os.environ.update({"HUAWEICLOUD_SDK_AK": AK, "HUAWEICLOUD_SDK_SK": SK,
                       "HUAWEICLOUD_SDK_REGION_OBS_CN_NORTH_4": obs.endpoint})
    provider = get_provider("modelarts")
    job = job_from_dict({"name": "ship", "code": str(code), "command": "python train.py", "image": "img:1",
                         "providers": {"modelarts": {"region": "cn-north-4", "flavor_id": "modelarts.vm.cpu.8u",
                                                     "code_store": "obs://team-obs/ship"}}})
    store = ObsStore(region="cn-north-4")
    alt = lambda: per_file(store, ObjectUrl.parse("obs://team-obs/alt"), code)  # noqa: E731
    return [("modelarts → OBS (esdk-obs-python)", lambda: provider.ship_code(provider.render(job)), alt)]


PATHS: Dict[str, Callable] = {"s3": s3_paths, "cos": cos_paths, "obs": obs_paths}


def inline(code: Path) -> str:
    """The ConfigMap path on the same tree: what render says."""
    from cloudtrain.extend.plugins import get_provider
    job = job_from_dict({"name": "ship", "code": str(code), "command": "python train.py", "image": "img:1"})
    start = time.perf_counter()
    try:
        get_provider("kubeflow").render(job)
        return f"rendered in {time.perf_counter() - start:.2f} s"
    except CloudtrainError as exc:
        return f"refused in {time.perf_counter() - start:.2f} s: {str(exc)[:160]}…"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=50)
    p.add_argument("--rounds", type=int, default=3)
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="ct-bench-ship-") as tmp, ExitStack() as stack:
        code = Path(tmp) / "code"
        size = make_tree(code, args.mb)
        from cloudtrain.transfer import shipping
        start = time.perf_counter()
        packed = shipping.archive(job_from_dict({"name": "ship", "code": str(code), "command": "python t.py"}))
        pack_s = time.perf_counter() - start
        files = sum(1 for p in code.rglob("*") if p.is_file())
        print(f"tree: {size / 1e6:.1f} MB in {files} files; "
              f"archive: {len(packed) / 1e6:.1f} MB, packed in {pack_s:.2f} s")
        print(f"inline (kubeflow ConfigMap): {inline(code)}\n")
        print("| path | cloudtrain first submit | second submit | file by file (cp -r) | again "
              "| bytes sent, first / second |")
        print("|---|---|---|---|---|---|")
        for make in PATHS.values():
            for name, ship, alt in make(stack, code):
                firsts, seconds, alts, agains = [], [], [], []
                for _ in range(args.rounds):
                    fresh_process()
                    firsts.append(timed(ship))
                    fresh_process()  # a second `cloudtrain submit`: packs again, finds the object
                    seconds.append(timed(ship))
                    alts.append(timed(alt))
                    agains.append(timed(alt))
                # the object exists after round 1: rounds 2+ of "first" find it (HEAD, no PUT)
                first = firsts[0]
                med = lambda runs: statistics.median(r[0] for r in runs)  # noqa: E731
                print(f"| {name} | {first[0]:.2f} s, {first[1] / 1e6:.1f} MB in {first[2]} PUT | "
                      f"{med(seconds):.2f} s, {seconds[0][1] / 1e6:.1f} MB in {seconds[0][2]} PUT | "
                      f"{med(alts):.2f} s, {alts[0][1] / 1e6:.1f} MB in {alts[0][2]} PUTs | "
                      f"{med(agains):.2f} s, {agains[0][1] / 1e6:.1f} MB | "
                      f"{first[1] / max(alts[0][1], 1):.2f}× / "
                      f"{seconds[0][1] / max(agains[0][1], 1):.2f}× the file-by-file bytes |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
