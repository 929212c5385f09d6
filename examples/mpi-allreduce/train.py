"""Data-parallel softmax regression on scikit-learn's digits, with MPI.

Run under `mpirun`; every rank:
  1. loads the same data and takes its own shard of the training set,
  2. at each step computes the gradient on a mini-batch of its shard,
  3. averages gradients with every other rank via comm.Allreduce,
  4. applies the identical SGD update, so all replicas stay in sync.

Rank 0 prints progress and writes model.npz + metrics.json into
$CLOUDTRAIN_OUTPUT_DIR (default ./output). Nothing is downloaded.
"""
import argparse
import json
import os
import time

import numpy as np
from mpi4py import MPI
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler


def softmax(z):
    z = z - z.max(axis=1, keepdims=True)  # for numerical stability
    e = np.exp(z)
    return e / e.sum(axis=1, keepdims=True)


def loss_and_grads(W, b, X, y, l2):
    """Cross-entropy loss of softmax(XW + b) and its gradients (summed, not averaged)."""
    p = softmax(X @ W + b)
    loss = -np.log(p[np.arange(len(y)), y] + 1e-12).sum()
    p[np.arange(len(y)), y] -= 1.0  # dLoss/dLogits
    gW = X.T @ p + l2 * len(y) * W
    gb = p.sum(axis=0)
    return loss, gW, gb


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--batch-size", type=int, default=32, help="per-rank batch size")
    ap.add_argument("--l2", type=float, default=1e-4)
    args = ap.parse_args()

    comm = MPI.COMM_WORLD
    rank, size = comm.Get_rank(), comm.Get_size()
    print(f"rank {rank}/{size} on {MPI.Get_processor_name()}", flush=True)

    # Same deterministic split and scaling on every rank.
    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_tr)
    X_tr, X_te = scaler.transform(X_tr), scaler.transform(X_te)

    # Each rank owns a strided shard of the training set.
    X_sh, y_sh = X_tr[rank::size], y_tr[rank::size]
    # Every rank runs the same number of steps per epoch (Allreduce is collective!).
    n_min = comm.allreduce(len(y_sh), op=MPI.MIN)
    steps_per_epoch = int(np.ceil(n_min / args.batch_size))

    # Zero init is the same everywhere; broadcast anyway to show the pattern.
    n_features, n_classes = X.shape[1], 10
    W = np.zeros((n_features, n_classes))
    b = np.zeros(n_classes)
    comm.Bcast(W, root=0)
    comm.Bcast(b, root=0)

    rng = np.random.default_rng(1234 + rank)  # per-rank shuffling, fixed seed
    # One flat buffer for [gW, gb, loss, batch size] so one Allreduce per step.
    local = np.empty(W.size + b.size + 2)
    total = np.empty_like(local)

    t_start = time.perf_counter()
    steps = 0
    for epoch in range(1, args.epochs + 1):
        order = rng.permutation(len(y_sh))
        epoch_loss, epoch_n = 0.0, 0
        for s in range(steps_per_epoch):
            idx = order[s * args.batch_size:(s + 1) * args.batch_size]
            loss, gW, gb = loss_and_grads(W, b, X_sh[idx], y_sh[idx], args.l2)
            local[:W.size], local[W.size:-2] = gW.ravel(), gb
            local[-2], local[-1] = loss, len(idx)
            comm.Allreduce(local, total, op=MPI.SUM)  # sum over all ranks
            n = total[-1]
            # Average over the global batch and take an SGD step (same on all ranks).
            W -= args.lr * total[:W.size].reshape(W.shape) / n
            b -= args.lr * total[W.size:-2] / n
            epoch_loss += total[-2]
            epoch_n += n
            steps += 1
        if rank == 0:
            print(f"epoch {epoch}/{args.epochs} loss {epoch_loss / epoch_n:.4f}", flush=True)
    train_time = time.perf_counter() - t_start

    # Sanity check: every rank must hold bit-identical weights.
    checksum = float(np.abs(W).sum() + np.abs(b).sum())
    lo, hi = comm.allreduce(checksum, op=MPI.MIN), comm.allreduce(checksum, op=MPI.MAX)
    assert lo == hi, f"ranks disagree on weights: min {lo} max {hi}"

    if rank == 0:
        acc = float((np.argmax(X_te @ W + b, axis=1) == y_te).mean())
        print(f"weights in sync on all {size} ranks (checksum {checksum:.6f})", flush=True)
        print(f"test_accuracy {acc:.4f}", flush=True)
        print(f"steps_per_sec {steps / train_time:.2f}", flush=True)
        out_dir = os.environ.get("CLOUDTRAIN_OUTPUT_DIR", "./output")
        os.makedirs(out_dir, exist_ok=True)
        np.savez(os.path.join(out_dir, "model.npz"), W=W, b=b,
                 mean=scaler.mean_, scale=scaler.scale_)
        with open(os.path.join(out_dir, "metrics.json"), "w") as f:
            json.dump({"test_accuracy": acc, "epochs": args.epochs, "world_size": size}, f, indent=2)
        print(f"saved model.npz and metrics.json to {out_dir}", flush=True)


if __name__ == "__main__":
    main()
