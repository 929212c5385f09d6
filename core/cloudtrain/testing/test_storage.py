"""``storage.inputs`` / ``storage.output``: a provider takes the schemes it declares
(``Provider.storage_schemes``) and refuses any other at the field's line, naming what it takes;
a provider that declares none refuses every storage URI at its line."""
import pytest

from cloudtrain.extend import plugins
from cloudtrain.spec.errors import JobFileError
from cloudtrain.input.loading import load_job
from cloudtrain.testing.jobs import required_settings

SCHEMES = ("s3", "gs", "obs", "cos", "azureml", "pvc", "file", "hdfs")


def foreign_uri(name):
    takes = set(plugins.get_provider_class(name).storage_schemes or ())
    scheme = next(s for s in SCHEMES if s not in takes)
    return "/data/train" if scheme == "file" else f"{scheme}://team/data/train"


@pytest.mark.parametrize("field,line", [("inputs", 6), ("output", 5)])
def test_a_scheme_the_provider_does_not_take_is_refused_at_its_line(cloudtrain_provider, tmp_path, field, line):
    name = cloudtrain_provider
    uri = foreign_uri(name)
    value = f"\n    train: {uri}" if field == "inputs" else f" {uri}"
    path = tmp_path / "job.yaml"
    settings = "".join(f"\n    {k}: {v!r}" for k, v in required_settings(name).items()) or " {}"
    path.write_text(f"name: st\ncommand: python t.py\nimage: registry.example/i:1\nstorage:\n  {field}:{value}\n"
                    f"providers:\n  {name}:{settings}\n")
    with pytest.raises(JobFileError) as info:
        plugins.get_provider(name).render(load_job(path))
    message = str(info.value)
    assert message.startswith(f"{path}:{line}:") and f"storage.{field}" in message, message
    takes = plugins.get_provider_class(name).storage_schemes or ()
    assert not takes or any(f"{scheme}://" in message or scheme == "file" for scheme in takes), \
        f"the error names no scheme {name} takes ({', '.join(takes)}): {message}"
