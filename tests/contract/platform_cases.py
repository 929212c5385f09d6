"""What each platform's injected environment means, pinned as (environ, expected topology).

A provider registered under a name here must detect every case exactly.  Test doubles that
implement a platform's semantics are mapped to it in SEMANTICS, so the cases run today even
before the platform's own plugin exists.
"""
import json

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
    # Kubeflow's training operator (PyTorchJob): RANK = PET_NODE_RANK = the *node* index, WORLD_SIZE
    # counts processes (not used), hosts follow the operator's pod names from MASTER_ADDR.
    "kubeflow": [
        ({"MASTER_ADDR": "digits-master-0", "MASTER_PORT": "23456", "RANK": "2", "WORLD_SIZE": "12",
          "PET_NNODES": "3", "PET_NODE_RANK": "2", "PET_NPROC_PER_NODE": "4", "PET_MASTER_ADDR": "digits-master-0",
          "PET_MASTER_PORT": "23456", "PYTHONUNBUFFERED": "0"},
         {"node_rank": 2, "num_nodes": 3, "master_addr": "digits-master-0", "master_port": 23456, "nproc_per_node": 4,
          "hosts": ["digits-master-0", "digits-worker-0", "digits-worker-1"]}),
        # TFJob: TF_CONFIG (chief, ps, worker); the operator's own TF_CONFIG is kept
        ({"TF_CONFIG": '{"cluster": {"ps": ["tf-ps-0.ns.svc:2222"], "worker": ["tf-worker-0.ns.svc:2222", '
                       '"tf-worker-1.ns.svc:2222"]}, "task": {"type": "worker", "index": 1}}'},
         {"node_rank": 2, "num_nodes": 3, "master_addr": "tf-ps-0.ns.svc",
          "hosts": ["tf-ps-0.ns.svc", "tf-worker-0.ns.svc", "tf-worker-1.ns.svc"]}),
    ],
    # Kubeflow Trainer v2 (TrainJob), torch-distributed: the torch plugin's PET_* only -- PET_NODE_RANK from
    # the Indexed Job's completion index, PET_MASTER_ADDR = <trainjob>-node-0-0.<trainjob> and PET_MASTER_PORT
    # = 29500 (constants.ContainerTrainerPort), PET_NPROC_PER_NODE a number or "auto"; no MASTER_ADDR (that is
    # v1's PyTorchJob).  Hosts are the JobSet's pod names <trainjob>-node-0-<i>.<trainjob> (kubeflow/trainer
    # pkg/runtime/framework/plugins/torch/torch.go EnforceMLPolicy).
    "kubeflow-trainer": [
        ({"PET_NNODES": "3", "PET_NPROC_PER_NODE": "4", "PET_NODE_RANK": "2", "JOB_COMPLETION_INDEX": "2",
          "PET_MASTER_ADDR": "digits-node-0-0.digits", "PET_MASTER_PORT": "29500",
          "CLOUDTRAIN_TRAINER_RUNTIME": "torch-distributed"},
         {"node_rank": 2, "num_nodes": 3, "master_addr": "digits-node-0-0.digits", "master_port": 29500,
          "nproc_per_node": 4,
          "hosts": ["digits-node-0-0.digits", "digits-node-0-1.digits", "digits-node-0-2.digits"]}),
        # numProcPerNode unset, no GPUs: "auto" (torchrun's own choice), the launcher's --nproc-per-node rules
        ({"PET_NNODES": "2", "PET_NPROC_PER_NODE": "auto", "PET_NODE_RANK": "0",
          "PET_MASTER_ADDR": "tj-node-0-0.tj", "PET_MASTER_PORT": "29500"},
         {"node_rank": 0, "num_nodes": 2, "master_addr": "tj-node-0-0.tj", "nproc_per_node": None,
          "hosts": ["tj-node-0-0.tj", "tj-node-0-1.tj"]}),
    ],
    # Volcano's svc + env plugins: VC_TASK_INDEX is the index *within the task*; node ranks run
    # over the tasks in order (master first), host lists come from VC_<TASK>_HOSTS.
    "volcano": [
        ({"VC_TASK_INDEX": "1", "VK_TASK_INDEX": "1", "VC_MASTER_HOSTS": "vj-master-0.vj", "VC_MASTER_NUM": "1",
          "VC_WORKER_HOSTS": "vj-worker-0.vj,vj-worker-1.vj", "VC_WORKER_NUM": "2", "HOSTNAME": "vj-worker-1"},
         {"node_rank": 2, "num_nodes": 3, "master_addr": "vj-master-0.vj", "master_port": 29500,
          "hosts": ["vj-master-0.vj", "vj-worker-0.vj", "vj-worker-1.vj"]}),
    ],
    # Seed 002 / reference §4.5, Azure ML.  PyTorch distribution: WORLD_SIZE counts *processes*
    # and RANK is the process rank; NODE_RANK is the node.  cloudtrain submits one process per
    # node (process_count_per_instance: 1), so WORLD_SIZE is the node count there, and the
    # launcher takes the node's process count from --nproc-per-node (Azure does not say it).
    "azure": [
        ({"AZUREML_RUN_ID": "digits-ddp-1a2b3c4d5e", "MASTER_ADDR": "10.0.0.4", "MASTER_PORT": "6105",
          "WORLD_SIZE": "4", "NODE_RANK": "2", "RANK": "2", "LOCAL_RANK": "0",
          "AZ_BATCH_HOST_LIST": "10.0.0.4,10.0.0.5,10.0.0.6,10.0.0.7"},
         {"node_rank": 2, "num_nodes": 4, "master_addr": "10.0.0.4", "master_port": 6105, "nproc_per_node": None,
          "hosts": ["10.0.0.4", "10.0.0.5", "10.0.0.6", "10.0.0.7"]}),
        # PyTorch without a host list (Azure's docs promise none): torchrun needs none.
        ({"AZUREML_EXPERIMENT_ID": "e1", "MASTER_ADDR": "10.0.0.4", "MASTER_PORT": "6105",
          "WORLD_SIZE": "2", "NODE_RANK": "0", "RANK": "0", "LOCAL_RANK": "0"},
         {"node_rank": 0, "num_nodes": 2, "master_addr": "10.0.0.4", "master_port": 6105, "hosts": []}),
        # MPI distribution, one process per node: the *world* rank is the node rank;
        # OMPI_COMM_WORLD_NODE_RANK is 0 on every node and is not.  AZ_BATCH_MASTER_NODE=addr:port.
        ({"AZUREML_RUN_ID": "mpi-allreduce-0f0f0f0f0f", "OMPI_COMM_WORLD_RANK": "1", "OMPI_COMM_WORLD_SIZE": "2",
          "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1", "OMPI_COMM_WORLD_NODE_RANK": "0",
          "AZ_BATCH_MASTER_NODE": "10.0.0.4:6000", "AZ_BATCH_HOST_LIST": "10.0.0.4,10.0.0.5"},
         {"node_rank": 1, "num_nodes": 2, "master_addr": "10.0.0.4", "master_port": 6000,
          "hosts": ["10.0.0.4", "10.0.0.5"]}),
        # MPI on a single node: only AZ_BATCHAI_MPI_MASTER_NODE (an address, no port).
        ({"AZUREML_RUN_ID": "r", "OMPI_COMM_WORLD_RANK": "0", "OMPI_COMM_WORLD_SIZE": "1",
          "OMPI_COMM_WORLD_LOCAL_RANK": "0", "OMPI_COMM_WORLD_LOCAL_SIZE": "1",
          "AZ_BATCHAI_MPI_MASTER_NODE": "10.0.0.9"},
         {"node_rank": 0, "num_nodes": 1, "master_addr": "10.0.0.9", "master_port": 6105, "hosts": ["10.0.0.9"]}),
        # TensorFlow distribution: Azure's TF_CONFIG; parameter servers first, then workers.
        ({"AZUREML_RUN_ID": "r", "TF_CONFIG": '{"cluster": {"ps": ["10.0.0.4:2222"], "worker": ["10.0.0.5:2222", '
                                              '"10.0.0.6:2222"]}, "task": {"type": "worker", "index": 1}, '
                                              '"environment": "cloud"}'},
         {"node_rank": 2, "num_nodes": 3, "master_addr": "10.0.0.4", "master_port": 2222,
          "hosts": ["10.0.0.4", "10.0.0.5", "10.0.0.6"]}),
    ],
    # SageMaker (platforms.md §5.2): resourceconfig.json (here as the toolkit's SM_RESOURCE_CONFIG),
    # or the toolkit's SM_HOSTS / SM_CURRENT_HOST; no master port from the platform: 7777 (the SDK's).
    "sagemaker": [
        ({"SM_RESOURCE_CONFIG": '{"current_host": "algo-3", "current_instance_type": "ml.p4d.24xlarge", '
                                '"current_group_name": "homogeneousCluster", "hosts": ["algo-1", "algo-2", "algo-3"], '
                                '"network_interface_name": "eth0"}',
          "SM_NUM_GPUS": "8", "TRAINING_JOB_NAME": "digits-ddp-0123456789ab"},
         {"node_rank": 2, "num_nodes": 3, "master_addr": "algo-1", "master_port": 7777, "nproc_per_node": 8,
          "hosts": ["algo-1", "algo-2", "algo-3"], "output_dir": "/opt/ml/model",
          "env": {"NCCL_SOCKET_IFNAME": "eth0"}}),
        # Issue 21 #9: ranks follow the hosts sorted lexicographically, as SageMaker's drivers
        # rank them -- sagemaker-python-sdk src/sagemaker/modules/train/container_drivers/scripts/
        # environment.py set_env(): SM_HOSTS = sorted(hosts), SM_CURRENT_HOST_RANK =
        # sorted_hosts.index(current_host); sagemaker-training-toolkit torch_distributed.py:
        # --node_rank hosts.index(current_host), resourceconfig.json's hosts being "sorted
        # lexicographically" (environment.py read_resource_config).  algo-10 is rank 1 of 11.
        ({"SM_RESOURCE_CONFIG": json.dumps({"current_host": "algo-10", "hosts": ["algo-%d" % i for i in range(1, 12)],
                                            "network_interface_name": "eth0"})},
         {"node_rank": 1, "num_nodes": 11, "master_addr": "algo-1", "master_port": 7777,
          "hosts": sorted("algo-%d" % i for i in range(1, 12))}),
        ({"SM_HOSTS": '["algo-2", "algo-1"]', "SM_CURRENT_HOST": "algo-1"},
         {"node_rank": 0, "num_nodes": 2, "master_addr": "algo-1", "hosts": ["algo-1", "algo-2"]}),
        ({"SM_HOSTS": '["algo-1", "algo-2"]', "SM_CURRENT_HOST": "algo-2", "SM_MASTER_ADDR": "algo-1",
          "SM_MASTER_PORT": "7777", "SM_NUM_GPUS": "0", "SM_MODEL_DIR": "/opt/ml/model", "SM_HOST_COUNT": "2"},
         {"node_rank": 1, "num_nodes": 2, "master_addr": "algo-1", "master_port": 7777, "nproc_per_node": None,
          "hosts": ["algo-1", "algo-2"]}),
    ],
    # ModelArts Standard (platforms.md §3.3): MA_NUM_HOSTS nodes, VC_TASK_INDEX this node, the master
    # is the first of VC_WORKER_HOSTS, MA_NUM_GPUS cards; no master port: cloudtrain's request sets one.
    "modelarts": [
        ({"MA_NUM_HOSTS": "3", "VC_TASK_INDEX": "1", "VC_WORKER_NUM": "3", "MA_NUM_GPUS": "8", "MA_TASK_NAME": "worker",
          "MA_CURRENT_IP": "172.16.0.11", "CLOUDTRAIN_MASTER_PORT": "29500",
          "VC_WORKER_HOSTS": "job-a1-worker-0.job-a1,job-a1-worker-1.job-a1,job-a1-worker-2.job-a1"},
         {"node_rank": 1, "num_nodes": 3, "master_addr": "job-a1-worker-0.job-a1", "master_port": 29500,
          "nproc_per_node": 8,
          "hosts": ["job-a1-worker-0.job-a1", "job-a1-worker-1.job-a1", "job-a1-worker-2.job-a1"]}),
        ({"MA_NUM_HOSTS": "1", "VC_TASK_INDEX": "0", "MA_NUM_GPUS": "0", "MA_CURRENT_IP": "172.16.0.9"},
         {"node_rank": 0, "num_nodes": 1, "master_addr": "172.16.0.9", "nproc_per_node": None}),
    ],
    # ModelArts Lite, seed 001: ranktable routing renumbers the pods; NODE_RANK is RANK_AFTER_ACC (not
    # VC_TASK_INDEX) and the master is pod MA_MASTER_INDEX (${MA_VJ_NAME}-${MA_TASK_NAME}-<i>.${MA_VJ_NAME}).
    "modelarts-lite": [
        ({"VC_TASK_INDEX": "1", "VC_WORKER_HOSTS": "vj-worker-0.vj,vj-worker-1.vj,vj-worker-2.vj,vj-worker-3.vj",
          "VC_WORKER_NUM": "4", "MA_NUM_HOSTS": "4", "MA_NUM_GPUS": "8", "MA_VJ_NAME": "vj", "MA_TASK_NAME": "worker",
          "RANK_AFTER_ACC": "3", "MA_MASTER_INDEX": "2", "CLOUDTRAIN_RANK_ROUTED": "1",
          "CLOUDTRAIN_MASTER_PORT": "39888"},
         {"node_rank": 3, "num_nodes": 4, "master_addr": "vj-worker-2.vj", "master_port": 39888, "nproc_per_node": 8,
          "hosts": []}),
        ({"VC_TASK_INDEX": "2", "MA_NUM_HOSTS": "3", "MA_NUM_GPUS": "8", "MA_VJ_NAME": "vj", "MA_TASK_NAME": "worker",
          "RANK_AFTER_ACC": "2", "MA_MASTER_INDEX": "0", "CLOUDTRAIN_MASTER_PORT": "39888"},
         {"node_rank": 2, "num_nodes": 3, "master_addr": "vj-worker-0.vj", "master_port": 39888}),
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
