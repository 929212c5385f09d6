"""Benchmark 6: submission throughput against the SageMaker double.

200 distinct jobs (the digits example, each with its own `env.BENCH_JOB`, so each has its own
spec hash and job name) go to `sagemaker` through the Python API, `cloudtrain.submit` (render
and submit) on 16 threads, against moto in server mode on 127.0.0.1 (tests/doubles/aws_double.py:
real HTTP through boto3; the double counts every API call on the server side). The alternative
is the floor: boto3's `create_training_job` alone with the same requests and the same
concurrency. Then the same 200 jobs again with faults: 10% of the creates lose their response
after SageMaker created the job (the connection drops), 10% are throttled; every job must still
exist exactly once.

Goal (issue 9): one CreateTrainingJob per job and no DescribeTrainingJob while submitting.
"""
from __future__ import annotations

import statistics
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List

from benchlib import EXAMPLE, REPO, Row, Stats, compared

JOBS = 200
QUICK_JOBS = 50
CONCURRENCY = 16
ROLE = "arn:aws:iam::123456789012:role/bench"
BUCKET = "ct-bench"
CODE = ("jobs = [cloudtrain.load_job('examples/digits-ddp/job.yaml', overrides={'env.BENCH_JOB': i, "
        "'providers.sagemaker.role_arn': ROLE, 'providers.sagemaker.output_s3': 's3://ct-bench/runs'}) "
        "for i in range(N)]; ThreadPoolExecutor(16).map(lambda j: cloudtrain.submit(j, provider), jobs)")
ALT = ("ThreadPoolExecutor(16).map(lambda r: sagemaker.create_training_job(**r), requests)  "
       "# the same requests, boto3 only")


def _double():
    sys.path[:0] = [str(REPO / "tests"), str(REPO / "tests" / "support")]
    from doubles.aws_double import AwsDouble
    return AwsDouble().start()


def _jobs(n: int, start: int = 0):
    import cloudtrain
    return [cloudtrain.load_job(EXAMPLE / "job.yaml", overrides={
        "env.BENCH_JOB": str(i), "providers.sagemaker.role_arn": ROLE,
        "providers.sagemaker.output_s3": f"s3://{BUCKET}/runs"}) for i in range(start, start + n)]


def _timed(pool: ThreadPoolExecutor, fn, items) -> tuple:
    def one(item):
        t = time.perf_counter()
        result = fn(item)
        return time.perf_counter() - t, result
    t0 = time.perf_counter()
    done = list(pool.map(one, items))
    return time.perf_counter() - t0, [d[0] for d in done], [d[1] for d in done]


def run(ctx) -> List[Row]:
    import os
    os.environ.setdefault("CLOUDTRAIN_POLL_SECONDS", "0")
    import cloudtrain
    from cloudtrain.extend import plugins
    n = QUICK_JOBS if ctx.quick else JOBS
    aws = _double()
    try:
        aws.client("s3").create_bucket(Bucket=BUCKET)
        provider = plugins.get_provider("sagemaker", **aws.clients("sagemaker", "s3", "ec2", "logs"))
        sm = aws.client("sagemaker")
        # warm-up (not counted): service models, the double's EC2 data, pydantic validators
        provider.submit(_jobs(1, start=10_000)[0])
        sm.list_training_jobs()
        import cloudtrain_aws.common as common
        aws.reset(("sagemaker", "s3"))  # the measured run uploads the code and asks EC2 itself
        aws.client("s3").create_bucket(Bucket=BUCKET)
        from cloudtrain.transfer.objectstore import forget_uploads
        forget_uploads()
        common._efa.clear()
        aws.calls.clear()
        aws.requests.clear()
        jobs = _jobs(n)
        pool = ThreadPoolExecutor(CONCURRENCY)

        ctx.log(f"  cloudtrain.submit x {n} on {CONCURRENCY} threads")
        wall, lat, runs = _timed(pool, lambda j: cloudtrain.submit(j, provider), jobs)
        calls: Dict[tuple, int] = dict(aws.calls)
        created = len(aws.backend("sagemaker").training_jobs)
        requests = [p for s, a, p in aws.requests if a == "CreateTrainingJob"]
        creates = calls.get(("sagemaker", "CreateTrainingJob"), 0)
        describes = sum(v for (s, a), v in calls.items() if a.startswith("Describe") and s == "sagemaker")
        per_job = sum(calls.values()) / n
        distinct = len({r.handle for r in runs})

        # the floor: boto3 alone, the same requests under new names, same concurrency
        aws.reset(("sagemaker",))
        aws.calls.clear()
        renamed = [dict(r, TrainingJobName="raw-" + r["TrainingJobName"][-40:]) for r in requests]
        ctx.log(f"  boto3 create_training_job x {n} on {CONCURRENCY} threads")
        alt_wall, alt_lat, _ = _timed(pool, lambda r: sm.create_training_job(**r), renamed)

        # faults: lost responses and throttling; still one job per submit
        aws.reset(("sagemaker",))
        aws.calls.clear()
        aws.fail("CreateTrainingJob", "drop", n // 10)
        aws.fail("CreateTrainingJob", "throttle", n // 10)
        ctx.log(f"  cloudtrain.submit x {n} with {n // 10} lost responses and {n // 10} throttled creates")
        fault_wall, fault_lat, fault_runs = _timed(pool, lambda j: cloudtrain.submit(j, provider), _jobs(n, start=n))
        fault_created = len(aws.backend("sagemaker").training_jobs)
        fault_creates = aws.count("CreateTrainingJob")
        fault_handles = len({r.handle for r in fault_runs})
        pool.shutdown()
    finally:
        aws.stop()

    ours = Stats([x * 1000 for x in lat], "ms")
    floor = Stats([x * 1000 for x in alt_lat], "ms")
    other = "".join(f", {s}:{a} {v}" for (s, a), v in sorted(calls.items()) if a != "CreateTrainingJob")
    rows = [
        compared("sagemaker-submit", f"{n} jobs to the SageMaker double (moto server), {CONCURRENCY} threads: "
                 f"latency of one submit (render + code upload + create) vs boto3's create alone",
                 [CODE.replace("N)", f"{n})")], ours, [ALT], floor, "— (reported)", alt_name="boto3 alone",
                 note=f"wall {wall:.2f} s = {n / wall:.0f} jobs/s (boto3 alone: {alt_wall:.2f} s = {n / alt_wall:.0f} "
                 f"jobs/s); every submit renders its job, hashes the code and builds the launcher bundle's archive "
                 f"once per code digest"),
        Row("sagemaker-submit", "API calls per job, counted by the double (server side): CreateTrainingJob",
            ["(same run)"], Stats([creates / n], "calls/job"), ratio=creates / n, goal="= 1 create per job",
            passed=creates == n and created == n and distinct == n,
            note=f"{creates} creates for {n} submits, {created} jobs in the double, {distinct} distinct handles; "
                 f"all calls: {sum(calls.values())} ({per_job:.3f} per job): "
                 f"sagemaker:CreateTrainingJob {creates}{other}"),
        Row("sagemaker-submit", "API calls per job: DescribeTrainingJob (and any other SageMaker Describe) while "
            "submitting", ["(same run)"], Stats([describes / n], "calls/job"), ratio=describes / n,
            goal="0 (no redundant describes)", passed=describes == 0),
        Row("sagemaker-submit", f"{n} submits with {n // 10} lost create responses and {n // 10} throttled creates "
            "(botocore standard retries): jobs created", ["(same code, other jobs)"],
            Stats([fault_created], "jobs"), ratio=fault_created / n, goal=f"= {n}: one job per submit",
            passed=fault_created == n and fault_handles == n,
            note=f"{fault_creates} CreateTrainingJob calls ({fault_creates - n} retries; a retry after a lost "
                 f"response finds the name taken and attaches); wall {fault_wall:.2f} s, median submit "
                 f"{statistics.median(fault_lat) * 1000:.1f} ms (throttling backs off)"),
    ]
    ctx.details.append(
        f"**Submission to the SageMaker double** ({n} jobs, {CONCURRENCY} threads, moto {_moto_version()} in "
        f"server mode on 127.0.0.1, every call real HTTP): cloudtrain {wall:.2f} s ({n / wall:.0f} jobs/s), "
        f"boto3's create alone {alt_wall:.2f} s ({n / alt_wall:.0f} jobs/s). Server-side calls during the "
        f"{n} submits: " + ", ".join(f"`{s}:{a}` {v}" for (s, a), v in sorted(calls.items())) + ". The code "
        "archive is uploaded once (HEAD, then PUT when missing, remembered for the process) and EC2's "
        "`DescribeInstanceTypes` (EFA for `network.rdma: auto`) is asked once per instance type. The double "
        "runs in the benchmark's process (it counts calls and changes moto's state there), so client and server "
        "share one interpreter on the 2 cores: the latencies are mostly queueing (16 threads; Little's law: "
        "latency ≈ 16 × wall / jobs), the same for both sides.")
    return rows


def _moto_version() -> str:
    try:
        from importlib.metadata import version
        return version("moto")
    except Exception:
        return "?"
