"""Data-parallel training of a small MLP on scikit-learn's digits with DeepSpeed (CPU, gloo).

Launched by the `deepspeed` launcher (every node starts its own ranks, `--no_ssh`); the
variables are the same as under torchrun: RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR,
MASTER_PORT, plus CLOUDTRAIN_OUTPUT_DIR where rank 0 writes metrics.json.
Nothing is downloaded: the digits data set ships with scikit-learn.
"""
import argparse
import json
import os
import sys

import deepspeed
import torch
import torch.distributed as dist
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch-size", type=int, default=32, help="per-process batch size")
    args = p.parse_args()

    deepspeed.init_distributed(dist_backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    print(f"rank {rank}/{world} local_rank {os.environ.get('LOCAL_RANK')} "
          f"on node {os.environ.get('CLOUDTRAIN_NODE_RANK')}", flush=True)

    # The same deterministic split and scaling on every rank; each rank trains on its shard.
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_train)
    X_train = torch.tensor(scaler.transform(X_train), dtype=torch.float32)
    X_test = torch.tensor(scaler.transform(X_test), dtype=torch.float32)
    y_train, y_test = torch.tensor(y_train), torch.tensor(y_test)
    shard = torch.arange(rank, len(X_train), world)

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))
    config = {
        "train_micro_batch_size_per_gpu": args.batch_size,
        "gradient_accumulation_steps": 1,
        # a torch optimizer: nothing for DeepSpeed to compile
        "optimizer": {"type": "SGD", "params": {"lr": args.lr, "momentum": 0.9}},
        "steps_per_print": 10 ** 6,
    }
    engine, _, _, _ = deepspeed.initialize(model=model, model_parameters=model.parameters(), config=config)
    loss_fn = nn.CrossEntropyLoss()
    generator = torch.Generator().manual_seed(0)
    for epoch in range(1, args.epochs + 1):
        order = shard[torch.randperm(len(shard), generator=generator)]
        total = torch.zeros(2)
        for i in range(0, len(order), args.batch_size):
            idx = order[i:i + args.batch_size]
            loss = loss_fn(engine(X_train[idx]), y_train[idx])
            engine.backward(loss)
            engine.step()
            total += torch.tensor([loss.item() * len(idx), len(idx)])
        dist.all_reduce(total)
        if rank == 0:
            print(f"epoch {epoch}/{args.epochs} loss {total[0] / total[1]:.4f}", flush=True)

    # Weights must agree on every rank: gradients were averaged by DeepSpeed.
    flat = torch.cat([p.detach().flatten() for p in engine.module.parameters()])
    gathered = [torch.zeros_like(flat) for _ in range(world)]
    dist.all_gather(gathered, flat)
    assert all(torch.equal(gathered[0], g) for g in gathered), "ranks disagree on the weights"
    if rank == 0:
        with torch.no_grad():
            accuracy = (engine.module(X_test).argmax(1) == y_test).float().mean().item()
        print(f"test_accuracy {accuracy:.4f}", flush=True)
        out = os.environ.get("CLOUDTRAIN_OUTPUT_DIR", "output")
        os.makedirs(out, exist_ok=True)
        with open(os.path.join(out, "metrics.json"), "w") as f:
            json.dump({"test_accuracy": accuracy, "epochs": args.epochs, "world_size": world}, f)
    # Wait for rank 0 to finish before anyone tears the group down: a rank that leaves
    # early can make gloo abort a peer still using the group.
    dist.barrier()
    dist.destroy_process_group()
    # The engine keeps gloo's context (threads, a socket to every peer) alive past
    # destroy_process_group; a normal interpreter exit would tear it down while the peers
    # close their sockets, which can abort a finished rank (see examples/digits-ddp/train.py).
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
