"""Registers the slurm plugin's provider (entry point ``slurm = "cloudtrain_slurm.plugin"``)."""
from cloudtrain.extend.hookspecs import hookimpl


@hookimpl
def cloudtrain_register_providers(register):
    # by name: the provider's module loads only when the provider is used
    register("cloudtrain_slurm.provider:SlurmProvider", name="slurm")
