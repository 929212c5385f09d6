"""Failover along ``-p tione,ec2`` after submit: TI-ONE's double fails attempt 0 for capacity
(``ResourceInsufficient``), the controller sends attempt 1 to the next provider, ec2 on the moto
double, through the real SDKs of both; the handle of attempt 0 names the job throughout."""
import cloudtrain
from cloudtrain.api import controller as make_controller
from cloudtrain.extend import plugins
from cloudtrain.orchestrate import controller
from cloudtrain.runtime.store import Store
from conftest import EXAMPLES
from test_controller_tione import CAPACITY_WORDS, fails, make_job, provider as tione
from test_controller_tione import fake  # noqa: F401

BUCKET = "ct-code"
EC2 = {"image_id": "ami-12c6146b", "instance_profile": "cloudtrain-node", "code_s3": f"s3://{BUCKET}/code"}


def test_capacity_lost_on_tione_moves_the_job_to_ec2(fake, aws_server, monkeypatch, tmp_path, home):
    aws = aws_server.fresh(monkeypatch, BUCKET, instance_profile="cloudtrain-node")
    ec2 = plugins.get_provider("ec2", **aws.clients())
    first = tione(fake).render(make_job(tmp_path, max_restarts=2))
    second = ec2.render(cloudtrain.load_job(EXAMPLES / "digits-ddp" / "job.yaml", overrides={
        **{f"providers.ec2.{k}": v for k, v in EC2.items()}, "max_restarts": 2}))
    run = tione(fake).submit(first)
    store = Store()
    assert controller.adopt(run.handle, [first, second], store=store)
    c = make_controller(store=store, poll=0,
                        provider_for=lambda name, profile: tione(fake) if name == "tione" else ec2)
    fails(fake, run, CAPACITY_WORDS)
    for _ in range(4):
        c.tick()
    rows = store.attempts(run.handle)
    assert [(r["attempt"], r["provider"]) for r in rows] == [(0, "tione"), (1, "ec2")]
    assert rows[0]["kind"] == "capacity" and rows[1]["attempt_handle"].startswith("ec2://")
    plan = store.plan_get(run.handle)
    assert plan["preemptions"] == 1 and "restarting on ec2 after a capacity on tione (1/2)" in [
        e["detail"] for e in store.events(run.handle)]
    assert aws.count("RunInstances") == 1
    # every node of attempt 1 runs with the restart count (SSM's script carries the job's env)
    scripts = [p["Parameters"]["commands"][0] for s, a, p in aws.requests if a == "SendCommand"]
    assert scripts and all("CLOUDTRAIN_RESTART_COUNT=1" in s for s in scripts)
    ec2_id = rows[1]["attempt_handle"].split("://", 1)[1]
    instances = [i for r in aws.client("ec2").describe_instances(Filters=[
        {"Name": "tag:cloudtrain:job-id", "Values": [ec2_id.split("/")[1]]}])["Reservations"] for i in r["Instances"]]
    for inst in instances:
        command = next(t["Value"] for t in inst["Tags"] if t["Key"] == "cloudtrain:command")
        aws.finish_command(command, inst["InstanceId"], "Success", "done\n")
    for _ in range(3):
        c.tick()
    assert store.plan_get(run.handle)["state"] == "SUCCEEDED"
    assert [a["provider"] for a in controller.attempts_view(run.handle, store)] == ["tione", "ec2"]
