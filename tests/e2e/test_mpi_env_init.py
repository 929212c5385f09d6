"""Issue 28 #2: every rank of an ``mpi`` job sees torchrun's documented variables, so PyTorch's
``env://`` initialisation (and DeepSpeed over MPI, TI-ONE's documented DeepSpeed path, seed 000)
works under mpirun as under torchrun: real Open MPI, two nodes by two ranks, a gloo all-reduce.
torchrun's variables: RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT
(pytorch.org/docs/stable/elastic/run.html, "Environment Variables"); ``env://`` reads
MASTER_ADDR, MASTER_PORT, WORLD_SIZE and RANK (torch/distributed/rendezvous.py, _env_rendezvous_handler)."""
import re
import textwrap

import pytest

from conftest import run_cli, write_job
from helpers import assert_nothing_left, handle_from, run_dir

pytestmark = pytest.mark.e2e

SCRIPT = textwrap.dedent('''
    import os
    import torch
    import torch.distributed as dist
    names = ("RANK", "LOCAL_RANK", "WORLD_SIZE", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    missing = [n for n in names if not os.environ.get(n)]
    dist.init_process_group("gloo", init_method="env://")
    total = torch.tensor([float(dist.get_rank() + 1)])
    dist.all_reduce(total)
    print("rank %d/%d local %s/%s sum %d missing %s" % (dist.get_rank(), dist.get_world_size(),
          os.environ.get("LOCAL_RANK"), os.environ.get("LOCAL_WORLD_SIZE"), int(total.item()),
          ",".join(missing) or "none"), flush=True)
    dist.destroy_process_group()
''')


def test_mpi_ranks_initialise_torch_from_the_environment(home, tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "allreduce.py").write_text(SCRIPT)
    job = write_job(code, """
        name: mpi-env-init
        code: .
        command: python allreduce.py
        distribution: {type: mpi, nodes: 2, procs_per_node: 2}
        env: {OMP_NUM_THREADS: "1"}
    """)
    proc = run_cli("submit", job, timeout=600)
    assert proc.returncode == 0, f"stdout:\n{proc.stdout[-3000:]}\nstderr:\n{proc.stderr[-3000:]}"
    assert_nothing_left(run_dir(home, handle_from(proc.stderr)))
    # (both local nodes share 127.0.0.1, which mpirun sees as one host: LOCAL_RANK runs 0..3 here)
    ranks = re.findall(r"rank (\d)/4 local \d/\d sum 10 missing none", proc.stdout)
    assert sorted(ranks) == ["0", "1", "2", "3"], proc.stdout[-3000:]
