"""The accelerators Chinese clusters run are neutral names (issue 40 item 11): H800 and A800 (TI-ONE's
resource-group card types, tencentcloud-sdk-python-tione models.ResourceConf.GpuType), H20, L20,
and Huawei's Ascend 910C (ModelArts' Snt9C)."""
import pytest

from cloudtrain.input.loading import job_from_dict
from cloudtrain.spec.accelerators import KNOWN, canonical, is_npu


@pytest.mark.parametrize("written,name", [
    ("H800", "H800"), ("nvidia_h800", "H800"), ("A800", "A800"), ("a800-80gb", "A800"), ("H20", "H20"),
    ("L20", "L20"), ("Ascend 910C", "Ascend-910C"), ("snt9c", "Ascend-910C"), ("910C", "Ascend-910C"),
])
def test_the_names_fold_to_the_neutral_ones(written, name):
    assert canonical(written) == name and name in KNOWN


def test_a_job_may_ask_for_them():
    for card in ("H800", "A800", "H20", "L20", "Ascend-910C"):
        job = job_from_dict({"name": "cn", "command": "python train.py", "code": None, "image": "i",
                             "resources": {"accelerator": card, "gpus_per_node": 8}})
        assert job.resources.accelerator == card
    assert is_npu("Ascend-910C") and not is_npu("H800")
