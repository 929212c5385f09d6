"""What each platform's injected environment means, pinned as (environ, expected topology).

A provider registered under a name here must detect every case exactly.  Test doubles that
implement a platform's semantics are mapped to it in SEMANTICS, so the cases run today even
before the platform's own plugin exists.
"""

CASES = {
    # Seed 000, TI-ONE DDP mode: WORLD_SIZE counts *nodes* and RANK is the *node* index.
    "tione": [
        ({"NODE_LIST": "timaker-xxxyyy-launcher.training-job.svc.cluster.local:1,"
                       "timaker-xxxyyy-worker-0.training-job.svc.cluster.local:1",
          "INDEX": "1", "MASTER_ADDR": "10.35.110.11", "MASTER_PORT": "23456",
          "WORLD_SIZE": "2", "RANK": "1", "GPU_NUM": "2", "GPU_NUM_PER_NODE": "1"},
         {"node_rank": 1, "num_nodes": 2, "master_addr": "10.35.110.11", "master_port": 23456,
          "nproc_per_node": 1,
          "hosts": ["timaker-xxxyyy-launcher.training-job.svc.cluster.local",
                    "timaker-xxxyyy-worker-0.training-job.svc.cluster.local"]}),
        ({"NODE_LIST": "a:8,b:8,c:8,d:8", "INDEX": "0", "MASTER_ADDR": "a", "MASTER_PORT": "23456",
          "WORLD_SIZE": "4", "RANK": "0", "GPU_NUM": "32", "GPU_NUM_PER_NODE": "8"},
         {"node_rank": 0, "num_nodes": 4, "master_addr": "a", "master_port": 23456, "nproc_per_node": 8,
          "hosts": ["a", "b", "c", "d"]}),
    ],
    # The generic environment: CLOUDTRAIN_* variables, or torchrun's PET_* ones.
    "local": [
        ({"CLOUDTRAIN_NUM_NODES": "3", "CLOUDTRAIN_NODE_RANK": "2", "CLOUDTRAIN_MASTER_ADDR": "h0",
          "CLOUDTRAIN_MASTER_PORT": "29400", "CLOUDTRAIN_HOSTS": "h0,h1,h2", "CLOUDTRAIN_NPROC_PER_NODE": "4"},
         {"node_rank": 2, "num_nodes": 3, "master_addr": "h0", "master_port": 29400, "nproc_per_node": 4,
          "hosts": ["h0", "h1", "h2"]}),
        ({"PET_NNODES": "2", "PET_NODE_RANK": "1", "PET_MASTER_ADDR": "10.0.0.5", "PET_MASTER_PORT": "29501",
          "PET_NPROC_PER_NODE": "2", "WORLD_SIZE": "4", "RANK": "3"},
         {"node_rank": 1, "num_nodes": 2, "master_addr": "10.0.0.5", "master_port": 29501, "nproc_per_node": 2}),
    ],
}

SEMANTICS = {"fakeone": "tione"}


def cases_for(provider: str):
    return CASES.get(provider) or CASES.get(SEMANTICS.get(provider, ""), [])
