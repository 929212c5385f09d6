"""A first Ray job: an actor, concurrent calls, and tasks pinned to nodes.

The launcher has already started the Ray cluster and exported RAY_ADDRESS, so
`ray.init()` (no arguments) connects to it instead of starting a new one.
Each node advertises a custom resource "Rank:<node_rank>": 1, which lets us
place a task on a particular node.
"""
import os
import time

import ray


@ray.remote(num_cpus=0)  # reserve no CPU: keeps the footprint small
class Counter:
    """An actor: a stateful worker process. Calls on it run one at a time."""

    def __init__(self):
        self.value = 0

    def increment(self):
        self.value += 1
        return self.value


@ray.remote(num_cpus=0)
def which_node():
    """Runs on a worker; reports the node rank the raylet was started with."""
    return os.environ.get("CLOUDTRAIN_NODE_RANK")


def alive_nodes():
    return [n for n in ray.nodes() if n["Alive"]]


def cluster_ready(expected):
    """All nodes joined, and each advertises its "Rank:<i>" resource."""
    resources = ray.cluster_resources()
    return (len(alive_nodes()) >= expected
            and all(f"Rank:{i}" in resources for i in range(expected)))


def main():
    ray.init()  # connects to RAY_ADDRESS set by the launcher
    expected = int(os.environ.get("CLOUDTRAIN_NUM_NODES", "1"))

    # 1. Fire 10 increments at once; the actor serialises them, so the
    #    results come back as 1..10 in submission order.
    counter = Counter.remote()
    refs = [counter.increment.remote() for _ in range(10)]
    print(f"counter results: {ray.get(refs)}", flush=True)

    # 2. Worker nodes may still be joining: wait up to 60 s for all of them.
    deadline = time.time() + 60
    while not cluster_ready(expected) and time.time() < deadline:
        time.sleep(1)
    n_alive = len(alive_nodes())
    assert cluster_ready(expected), (
        f"cluster not ready after 60 s: {n_alive}/{expected} nodes alive, "
        f"resources {sorted(r for r in ray.cluster_resources() if r.startswith('Rank:'))}")

    # 3. Pin one task to each node with its "Rank:<i>" resource (a tiny
    #    fraction, so it never blocks other work) and check where it ran.
    refs = {i: which_node.options(resources={f"Rank:{i}": 0.001}).remote()
            for i in range(expected)}
    for i, ref in refs.items():
        ran_on = ray.get(ref, timeout=60)
        print(f"task on Rank:{i} ran on node {ran_on}", flush=True)
        assert ran_on == str(i), f"task for Rank:{i} ran on node {ran_on}"

    print(f"ray nodes: {n_alive}", flush=True)
    ray.shutdown()


if __name__ == "__main__":
    main()
