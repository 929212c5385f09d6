"""Issue 29 for sagemaker and ec2: each renders a typed request that submit reads (no artifact
searched by kind), the code ships through core's pipeline (``cloudtrain stage`` works for ec2
too), no provider overrides a step of ``CloudProvider``'s template, and ec2's node script is a
template file that shellcheck passes as it is."""
import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

import cloudtrain
from cloudtrain.providers.cloud import CloudProvider
from cloudtrain.providers.provider import Provider, State
from test_aws_ec2 import BUCKET, command_of, digits, job, job_instances, provider


@pytest.fixture
def aws(aws_server, monkeypatch):
    return aws_server.fresh(monkeypatch, BUCKET, instance_profile="cloudtrain-node")


def shellcheck() -> str:
    path = shutil.which("shellcheck")
    if path is None:
        pytest.fail("shellcheck is not installed: apt-get install -y shellcheck (scripts/test.sh does it)")
    return path


def test_the_ec2_node_template_passes_shellcheck_as_it_is():
    import cloudtrain_aws.render as render
    template = Path(render.__file__).with_name(render.NODE_TEMPLATE)
    proc = subprocess.run([shellcheck(), "-s", "sh", "-f", "gcc", str(template)], capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stdout
    # every slot of the template is filled: no @word@ and no `#@ block` line is left in a render
    script = render.node_script(job(), render.Ec2Options(**{"image_id": "ami-12c6146b", "code_s3": "s3://b/c"}))
    assert "#@ " not in script and "@workdir@" not in script and "@python@" not in script


def test_ec2_job_values_reach_the_script_as_one_quoted_word(tmp_path):
    """A workdir and a Python with spaces and `$`: fill quotes each one as a shell word."""
    from cloudtrain.extend.plugins import get_provider
    rendered = get_provider("ec2").render(job(options={"workdir": "/opt/my work/$HOME",
                                                       "python": "/opt/py env/python3"}))
    script = rendered.request.node_script
    assert "WORK='/opt/my work/$HOME'/\"$JOB\"\n" in script
    assert "\n  '/opt/py env/python3' -c 'import shutil" in script
    path = tmp_path / "node.sh"
    path.write_text(script)
    proc = subprocess.run([shellcheck(), "-s", "sh", "-S", "warning", "-f", "gcc", str(path)], capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout


def test_the_render_is_the_typed_request_submit_reads():
    from cloudtrain.extend.plugins import get_provider
    from cloudtrain_aws.render import Ec2Request, SageMakerRequest
    ec2 = get_provider("ec2").render(job())
    assert isinstance(ec2.request, Ec2Request)
    by_kind = {(a.kind, a.name): a.content for a in ec2.artifacts}
    assert by_kind[("ec2/RunInstances", "<job-id>")] == ec2.request.run_instances
    assert by_kind[("shell/script", "nodes")]["script"] == ec2.request.node_script
    assert ec2.request.code_upload.url == f"s3://{BUCKET}/code/<code-digest>/code.tar.gz"
    sm = get_provider("sagemaker").render(cloudtrain.load_job(
        Path(__file__).parents[3] / "examples" / "digits-ddp" / "job.yaml",
        overrides={"providers.sagemaker.role_arn": "arn:aws:iam::123456789012:role/train",
                   "providers.sagemaker.output_s3": "s3://ct-sm/runs", "providers.sagemaker.image": "img:1"}))
    assert isinstance(sm.request, SageMakerRequest)
    create = next(a.content for a in sm.artifacts if a.kind == "sagemaker/CreateTrainingJob")
    assert create == sm.request.create
    assert sm.request.code_upload.url == "s3://ct-sm/runs/cloudtrain-code/<code-digest>/code.tar.gz"


def test_no_aws_provider_overrides_a_step_of_the_submit_pipeline():
    from cloudtrain_aws.ec2 import Ec2Provider
    from cloudtrain_aws.sagemaker import SageMakerProvider
    template = ("schedule", "submit", "ship", "ship_code", "cancel", "status", "logs")
    for cls in (SageMakerProvider, Ec2Provider):
        for step in template:
            assert getattr(cls, step) is getattr(CloudProvider, step, getattr(Provider, step, None)), (cls, step)
        assert not hasattr(cls, "artifacts")  # the request is typed: render_request, its artifacts derived


def test_ec2_stage_ships_the_code_where_the_nodes_then_fetch_it(aws):
    (url,) = cloudtrain.stage(digits(), provider(aws))
    assert url.startswith(f"s3://{BUCKET}/code/") and url.endswith("/code.tar.gz")
    key = url[len(f"s3://{BUCKET}/"):]
    data = aws.client("s3").get_object(Bucket=BUCKET, Key=key)["Body"].read()
    assert hashlib.sha256(data).hexdigest() == url.split("/")[-2]  # content-addressed
    assert aws.count("S3.PUT") == 1 and aws.count("RunInstances") == 0  # nothing started
    run = provider(aws).submit(digits())
    assert aws.count("S3.PUT") == 1  # the staged archive is the one the job uses
    scripts = [p["Parameters"]["commands"][0] for _, a, p in aws.requests if a == "SendCommand"
               and "cloudtrain.launch" in p["Parameters"]["commands"][0]]
    assert scripts and all(f"/{key}?" in s and url.split("/")[-2] in s for s in scripts)
    assert run.status().state is State.RUNNING


def test_cancel_terminates_the_instances_an_ended_job_kept(aws):
    """terminate_when_done: false keeps a node's instance up after the job ended; cancel (the job
    stays SUCCEEDED) terminates it: CloudProvider's cancel with ec2's _release, no override."""
    run = provider(aws).submit(digits(**{"providers.ec2.terminate_when_done": False}))
    name = run.id.split("/")[1]
    for node in job_instances(aws, name):
        aws.finish_command(command_of(node), node["InstanceId"], "Success", "done\n", code=0)
    assert run.status().state is State.SUCCEEDED
    assert {i["State"]["Name"] for i in job_instances(aws, name)} == {"running"}
    assert run.cancel().state is State.SUCCEEDED
    assert {i["State"]["Name"] for i in job_instances(aws, name)} == {"terminated"}
    assert aws.count("TerminateInstances") == 1 and aws.count("CancelCommand") == 0


@pytest.mark.parametrize("option,value", [("workdir", "/opt/@python@"), ("python", "/opt/@fetch@/python3")])
def test_a_value_holding_a_slot_of_the_template_is_refused_at_its_line(option, value):
    """The template's slots are filled one after another: a workdir holding ``@python@`` would get
    the Python's quoted word inside its own quotes.  Such a value is exit 2 at its option."""
    from cloudtrain.spec.errors import JobFileError
    from cloudtrain.extend.plugins import get_provider
    with pytest.raises(JobFileError, match=f"providers.ec2.{option}: holds @"):
        get_provider("ec2").render(job(options={option: value, "python": "a;b" if option == "workdir" else value}))
