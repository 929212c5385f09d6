"""The ``docker`` provider: every node a container on a private Docker network.

Registration lives in ``cloudtrain_docker.plugin``; the Docker SDK is imported only when the
provider talks to the engine.
"""
