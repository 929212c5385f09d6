"""cloudtrain plugin ``local``: N emulated nodes as process groups on this machine.

Its nodes see the generic platform (``cloudtrain.launch.generic``), or the platform
``providers.local.emulate`` names.

What lives where:

- ``options.py``: ``LocalOptions`` (the ``providers.local`` section).
- ``render.py``: pure builders: ``LocalRequest``, the typed request (one process spec per node:
  argv, working directory, environment; the run's directory and id as placeholders), printed as
  ``local/process`` artifacts.
- ``provider.py``: ``LocalProvider``, the lifecycle on core's ``HostedProvider``: the run's ports
  and placeholders filled in, the detached supervisor started, what a dead supervisor left released.
- ``ports.py``: the ports the nodes bind (outside the ephemeral range; one in use named first).
- ``netns.py``: the job's own network namespace (mpi, horovod and ray listen on every interface).
- ``supervisor.py``: the detached supervisor's node processes (``cloudtrain.runtime.supervise``).
- ``plugin.py``: the entry point's hook: registers the provider.
"""
