"""A cloud job's logs read from another process (``cloudtrain logs`` in another shell, the
dashboard) mask its secrets too (issue 39, item 8), from what this machine kept of the job:
where each secret came from (never its value).  Driven through the real TI-ONE SDK against its
loopback double (tests/doubles/tione_double.py)."""
import json

from tencentcloud.common.credential import Credential

from cloudtrain import api
from cloudtrain.input.loading import job_from_dict
from cloudtrain.runtime import requestlog
from doubles.tione_double import SECRET_ID, SECRET_KEY
from doubles.tione_fixtures import fake  # noqa: F401

from cloudtrain_tione.provider import TioneProvider

OPTIONS = {"region": "ap-shanghai", "instance_type": "TI.S.LARGE.POST",
           "code_source": "cos://train-1250000000/code/lc/"}
VALUE = "tok-leaky-value-4711"


def provider(fake):
    return TioneProvider(credential=Credential(SECRET_ID, SECRET_KEY), endpoint=fake.url, poll=0)


def submitted(fake, tmp_path, monkeypatch):
    code = tmp_path / "code"
    code.mkdir()
    (code / "train.py").write_text("print('hi')\n")
    monkeypatch.setenv("CT_TIONE_TOKEN", VALUE)
    job = job_from_dict({"name": "lc", "code": str(code), "command": "python train.py", "image": "img:1",
                         "distribution": {"type": "ddp", "nodes": 1},
                         "secrets": {"HF_TOKEN": {"from_env": "CT_TIONE_TOKEN"}}, "providers": {"tione": OPTIONS}})
    run = api.submit(job, provider(fake))
    task = run.id.split("/")[1]
    fake.tasks[task]["script"] = ["RUNNING", "SUCCEED"]
    fake.add_log(task, 0, f"value {VALUE} printed as it is")
    fake.add_log(task, 0, "an env dump: HF_TOKEN=another-value-the-job-made")
    fake.add_log(task, 0, "a token it found: ghp_" + "a1B2c3D4" * 5)
    return run


def test_logs_from_another_process_mask_the_secrets(fake, tmp_path, monkeypatch, home):
    run = submitted(fake, tmp_path, monkeypatch)
    kept = json.loads(json.dumps(requestlog.read(run.handle)))
    assert kept["secrets"] == {"HF_TOKEN": {"from_env": "CT_TIONE_TOKEN"}}
    assert VALUE not in json.dumps(kept)  # where it came from, never the value
    text = "".join(provider(fake).logs(run.id))  # a new provider: another process, as `logs` is
    assert VALUE not in text and "another-value-the-job-made" not in text and "ghp_" not in text
    assert "value *** printed" in text and "HF_TOKEN=***" in text


def test_without_the_value_here_the_secrets_name_and_token_shapes_are_still_masked(fake, tmp_path, monkeypatch, home):
    run = submitted(fake, tmp_path, monkeypatch)
    monkeypatch.delenv("CT_TIONE_TOKEN")  # another shell, where the variable is not set
    text = "".join(provider(fake).logs(run.id))
    assert "HF_TOKEN=***" in text and "another-value-the-job-made" not in text and "ghp_" not in text
    assert VALUE in text  # what cannot be known here is not: docs/security.md says so
