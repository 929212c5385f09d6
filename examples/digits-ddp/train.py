"""Data-parallel training of a small MLP on scikit-learn's digits with PyTorch DDP.

Launched by `torchrun` (one process per rank). Everything we need comes from
environment variables set by the launcher:

  RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT   (standard torchrun)
  CLOUDTRAIN_NODE_RANK      which node this process runs on (for the log line)
  CLOUDTRAIN_OUTPUT_DIR     where rank 0 writes model.pt and metrics.json
  CLOUDTRAIN_CHECKPOINT_DIR (when the job sets storage.checkpoint) where rank 0 saves a
                            checkpoint after every epoch; a restarted job resumes from it

Rank 0 reports its progress after every epoch with `cloudtrain.launch.report` (one
CLOUDTRAIN_PROGRESS line on stderr), which `cloudtrain status` shows.

Nothing is downloaded: the digits data set ships with scikit-learn.
"""
import argparse
import json
import os
import sys
import time

import torch
import torch.distributed as dist
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset

try:  # the launcher puts cloudtrain.launch on every node's path; plain torchrun may not have it
    from cloudtrain.launch import flush_report, report
except ImportError:
    def report(**progress):
        """Without cloudtrain: no progress lines."""

    def flush_report():
        """Without cloudtrain: nothing to write."""


def parse_args():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--batch-size", type=int, default=32, help="per-process batch size")
    p.add_argument("--seed", type=int, default=0)
    # Test hooks: make one rank crash, or slow every epoch down.
    p.add_argument("--fail-rank", type=int, default=-1,
                   help="global rank that exits with code 3 after the first epoch")
    p.add_argument("--sleep-per-epoch", type=float, default=0.0,
                   help="seconds to sleep at the end of each epoch")
    return p.parse_args()


def load_data():
    """Same deterministic 80/20 split and scaling on every rank."""
    X, y = load_digits(return_X_y=True)
    X_train, X_test, y_train, y_test = train_test_split(
        X, y, test_size=0.2, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_train)  # fit on the training split only
    to_x = lambda a: torch.tensor(scaler.transform(a), dtype=torch.float32)
    to_y = lambda a: torch.tensor(a, dtype=torch.long)
    return (TensorDataset(to_x(X_train), to_y(y_train)),
            TensorDataset(to_x(X_test), to_y(y_test)))


def load_checkpoint(path, rank):
    """Rank 0 reads the last checkpoint (None without one) and hands it to every rank, so all
    of them resume alike even where only rank 0's node sees the file."""
    state = [torch.load(path) if rank == 0 and path and os.path.exists(path) else None]
    dist.broadcast_object_list(state, src=0)
    return state[0]


def save_checkpoint(path, epoch, model, opt):
    """Atomically: a rank killed mid-write leaves the previous checkpoint whole."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    partial = path + ".partial"
    torch.save({"epoch": epoch, "model": model.module.state_dict(), "optimizer": opt.state_dict()}, partial)
    os.replace(partial, path)


def main():
    args = parse_args()

    # 1. Join the process group. torchrun's env vars (MASTER_ADDR, MASTER_PORT,
    #    RANK, WORLD_SIZE) are read by the default "env://" init method.
    dist.init_process_group(backend="gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    node = os.environ.get("CLOUDTRAIN_NODE_RANK", os.environ.get("GROUP_RANK", "0"))
    print(f"rank {rank}/{world} local_rank {local_rank} on node {node}", flush=True)

    # 2. Same seed everywhere -> identical initial weights (DDP also broadcasts
    #    rank 0's weights at construction, so this is belt and braces).
    torch.manual_seed(args.seed)
    train_set, test_set = load_data()

    # 3. DistributedSampler gives each rank a disjoint shard of the training set.
    sampler = DistributedSampler(train_set, num_replicas=world, rank=rank,
                                 shuffle=True, seed=args.seed)
    loader = DataLoader(train_set, batch_size=args.batch_size, sampler=sampler)

    model = DDP(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)))
    opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()

    ckpt_dir = os.environ.get("CLOUDTRAIN_CHECKPOINT_DIR")
    ckpt_path = os.path.join(ckpt_dir, "digits-ddp.pt") if ckpt_dir else None
    last = load_checkpoint(ckpt_path, rank) if ckpt_path else None
    first_epoch = 1
    if last is not None:
        model.module.load_state_dict(last["model"])
        opt.load_state_dict(last["optimizer"])
        first_epoch = last["epoch"] + 1
        if rank == 0:
            print(f"resumed from epoch {last['epoch']} (restart {os.environ.get('CLOUDTRAIN_RESTART_COUNT', '0')})",
                  flush=True)

    steps, train_time = 0, 0.0
    for epoch in range(first_epoch, args.epochs + 1):
        sampler.set_epoch(epoch)  # reshuffle differently each epoch
        model.train()
        t0 = time.perf_counter()
        # Running sums [loss * n, correct, n] for this rank's shard.
        stats = torch.zeros(3)
        for xb, yb in loader:
            opt.zero_grad()
            out = model(xb)
            loss = loss_fn(out, yb)
            loss.backward()  # DDP all-reduces (averages) gradients here
            opt.step()
            steps += 1
            stats += torch.tensor([loss.item() * len(yb),
                                   (out.argmax(1) == yb).sum().item(), len(yb)])
        train_time += time.perf_counter() - t0

        # 4. Combine the per-rank sums so rank 0 reports global numbers.
        dist.all_reduce(stats, op=dist.ReduceOp.SUM)
        if rank == 0:
            print(f"epoch {epoch}/{args.epochs} loss {stats[0] / stats[2]:.4f} "
                  f"train_acc {stats[1] / stats[2]:.4f}", flush=True)
            elapsed = time.perf_counter() - t0
            report(step=epoch * len(loader), total_steps=args.epochs * len(loader), epoch=epoch,
                   total_epochs=args.epochs, loss=round(float(stats[0] / stats[2]), 4),
                   train_acc=round(float(stats[1] / stats[2]), 4),
                   samples_per_s=round(float(stats[2]) / max(elapsed, 1e-9), 1))

        if rank == 0 and ckpt_path:
            save_checkpoint(ckpt_path, epoch, model, opt)
        if epoch == 1 and rank == args.fail_rank:
            print(f"rank {rank}: failing on purpose (--fail-rank)", flush=True)
            sys.exit(3)
        if args.sleep_per_epoch > 0:
            time.sleep(args.sleep_per_epoch)

    # 5. Rank 0 evaluates on the held-out split and saves the outputs.
    if rank == 0:
        model.eval()
        xt, yt = test_set.tensors
        with torch.no_grad():
            acc = (model(xt).argmax(1) == yt).float().mean().item()
        print(f"test_accuracy {acc:.4f}", flush=True)
        # Throughput of this rank's optimizer steps (one step = one global step).
        print(f"step_time_ms {1000 * train_time / max(steps, 1):.3f} "
              f"steps_per_sec {steps / max(train_time, 1e-9):.2f}", flush=True)

        out_dir = os.environ.get("CLOUDTRAIN_OUTPUT_DIR", "./output")
        os.makedirs(out_dir, exist_ok=True)
        # Save the plain model (model.module), not the DDP wrapper.
        torch.save(model.module.state_dict(), os.path.join(out_dir, "model.pt"))
        with open(os.path.join(out_dir, "metrics.json"), "w") as f:
            json.dump({"test_accuracy": acc, "epochs": args.epochs,
                       "world_size": world}, f, indent=2)
        print(f"saved model.pt and metrics.json to {out_dir}", flush=True)

    # 6. Shut down: every rank waits here until rank 0 has saved, then the group goes.
    dist.barrier()
    dist.destroy_process_group()
    # DDP keeps gloo's context alive after destroy_process_group (its socket-loop and work
    # threads keep running, with a connection to every peer), so a normal interpreter exit
    # tears gloo down while those threads run and the peers close their sockets; that can
    # abort the process ("terminate called without an active exception", SIGABRT) after the
    # job has in fact finished.  Everything is written: leave without interpreter teardown.
    leave(0)


def leave(code: int) -> None:
    """Exit at once, without interpreter teardown (output flushed first)."""
    flush_report()  # the newest progress report, which os._exit would lose
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    main()
