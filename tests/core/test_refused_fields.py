"""A neutral field a provider's platform has no place for is exit 2 at its line, naming why
(issue 28 item 5: never dropped in silence); its default is no problem."""
import pytest

from cloudtrain.spec.errors import BadInput
from cloudtrain.input.loading import load_job
from cloudtrain_local.provider import LocalProvider


class NoShm(LocalProvider):
    refused_fields = {"resources.shm_gb": "its request has no /dev/shm size", "max_restarts": "no retries there"}


def job(tmp_path, extra=""):
    (tmp_path / "job.yaml").write_text("name: j\ncode: .\ncommand: python t.py\n" + extra)
    return load_job(tmp_path / "job.yaml", [], provider="local")


def test_a_refused_field_set_is_exit_2_at_its_line_with_the_reason(tmp_path):
    with pytest.raises(BadInput) as refused:
        NoShm().validate(job(tmp_path, "resources:\n  shm_gb: 8\nmax_restarts: 2\n"))
    text = str(refused.value)
    assert "job.yaml:5: resources.shm_gb" in text and "/dev/shm" in text
    assert "job.yaml:6: max_restarts" in text and "no retries there" in text
    assert refused.value.exit_code == 2


def test_a_refused_field_at_its_default_is_fine(tmp_path):
    NoShm().validate(job(tmp_path, "max_restarts: 0\n"))
