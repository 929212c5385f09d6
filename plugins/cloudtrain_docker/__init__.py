"""cloudtrain plugin ``docker``: every node a container on a private Docker network.

Imports no SDK: the Docker SDK loads when the provider first talks to the engine.

What lives where:

- ``options.py``: ``DockerOptions`` (the ``providers.docker`` section) and its ``Mount``.
- ``render.py``: pure builders: ``DockerRequest``, the typed request (the Engine API bodies of the
  job's network and of one container per node, exactly as ``create_network`` and
  ``create_container_from_config`` receive them; the run's directory and id as placeholders).
- ``provider.py``: ``DockerProvider``, the lifecycle on core's ``HostedProvider``: the image
  checked, the launcher bundle and the secrets file written, the detached supervisor started;
  ``remove_labelled`` removes what a job left.
- ``supervisor.py``: the detached supervisor: creates, follows and removes the containers.
- ``plugin.py``: the entry point's hook: registers the provider.
"""
