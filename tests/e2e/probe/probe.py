"""A small DDP job for the end-to-end tests: reports what each rank sees, then behaves as asked."""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist

p = argparse.ArgumentParser()
p.add_argument("--fail-rank", type=int, default=-1)
p.add_argument("--exit-code", type=int, default=3)
p.add_argument("--sleep", type=float, default=0.0)
p.add_argument("--fail-once", action="store_true", help="rank 0 fails on the first attempt only")
p.add_argument("--print-secret", default="")
args = p.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
total = torch.tensor([float(rank)])
dist.all_reduce(total)
seen = {k: os.environ.get(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "CLOUDTRAIN_PLATFORM",
                                       "CLOUDTRAIN_NODE_RANK", "CLOUDTRAIN_NUM_NODES", "CLOUDTRAIN_RESTART_COUNT")}
seen["allreduce"] = total.item()
if args.print_secret:
    seen["secret_present"] = bool(os.environ.get(args.print_secret))
    print(f"rank {rank} secret value: {os.environ.get(args.print_secret)}", flush=True)
print("PROBE " + json.dumps(seen, sort_keys=True), flush=True)

out = os.environ["CLOUDTRAIN_OUTPUT_DIR"]
if args.fail_once and rank == 0:
    marker = os.path.join(out, "failed-once")
    if not os.path.exists(marker):
        open(marker, "w").close()
        print("failing on purpose, first attempt", flush=True)
        sys.exit(1)
if rank == args.fail_rank:
    time.sleep(0.5)
    print(f"rank {rank} exits with {args.exit_code}", flush=True)
    sys.exit(args.exit_code)


def keep_working(seconds):
    """Where a sleeping probe's ranks spend their time (``cloudtrain stacks`` names it)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        print(f"rank {rank} working", flush=True)
        time.sleep(0.5)


keep_working(args.sleep)
dist.barrier()
dist.destroy_process_group()
