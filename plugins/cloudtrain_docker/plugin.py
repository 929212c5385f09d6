"""Registers the ``docker`` provider (entry point ``docker = "cloudtrain_docker.plugin"``)."""
from cloudtrain.extend.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    # by name: the provider's module (and its pydantic models) load only when it is used
    register("cloudtrain_docker.provider:DockerProvider", name="docker")
