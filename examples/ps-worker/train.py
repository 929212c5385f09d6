"""Parameter-server training on scikit-learn's digits with torch.distributed.rpc.

Roles come from TF_CONFIG (the TensorFlow / TI-ONE convention):

  {"cluster": {"ps": ["h0:p0", ...], "worker": ["h1:p1", ...]},
   "task": {"type": "ps" | "worker", "index": i}}

* Parameter servers (ps) own the model's parameters. With several ps, the
  parameter tensors are dealt out round-robin, so each ps holds a shard.
* Workers own a shard of the training data. Every step a worker pulls the
  current parameters from all ps, computes gradients on a mini-batch and
  pushes each gradient to the ps that owns that parameter.
* Training is synchronous: a ps applies one averaged SGD update once every
  worker has pushed its gradient for the step (like TensorFlow's
  SyncReplicasOptimizer). This makes the result independent of timing.

RPC world: rank = ps index for ps tasks, len(ps) + worker index for workers.
The rendezvous uses the address of cluster.ps[0]. TensorPipe picks the network
interface from TP_SOCKET_IFNAME (we fall back to GLOO_SOCKET_IFNAME if only
that one is set). Worker 0 evaluates at the end and writes model.pt and
metrics.json into $CLOUDTRAIN_OUTPUT_DIR (default ./output).
"""
import argparse
import json
import os
import threading
import time
import warnings

import torch
import torch.distributed.rpc as rpc
import torch.nn as nn
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split
from sklearn.preprocessing import StandardScaler

# rpc.shutdown() uses a gloo group internally, which triggers a harmless warning.
warnings.filterwarnings("ignore", message="You are using a Backend")


def make_model():
    torch.manual_seed(0)  # every process builds identical initial weights
    return nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


# ----------------------------------------------------------------------------
# Parameter-server side. These functions run on a ps, called by workers over
# RPC. The state below lives in the ps process only.
# ----------------------------------------------------------------------------
_lock = threading.Lock()
_shard = []       # the parameter tensors this ps owns
_pending = {}     # worker index -> gradients pushed for the current step
_step_done = None  # future completed when the current step's update is applied
_cfg = {}         # lr and number of workers


def init_ps_state(ps_index, num_ps, num_workers, lr):
    global _shard, _step_done
    params = [p.detach().clone() for p in make_model().parameters()]
    _shard = params[ps_index::num_ps]  # round-robin shard of the tensors
    _step_done = torch.futures.Future()
    _cfg.update(lr=lr, num_workers=num_workers)


def get_params():
    """Return a copy of this ps's parameter shard."""
    with _lock:
        return [p.clone() for p in _shard]


@rpc.functions.async_execution
def push_grads(worker_index, grads):
    """Store one worker's gradients; once all workers pushed, apply averaged SGD.

    Returns a future that completes when this step's update has been applied,
    so a worker never pulls stale parameters. (async_execution means no RPC
    thread is blocked while waiting for the other workers.)
    """
    global _step_done
    with _lock:
        _pending[worker_index] = grads
        done = _step_done
        if len(_pending) == _cfg["num_workers"]:
            for i, p in enumerate(_shard):
                # Sum in worker order so the result is bit-for-bit reproducible.
                g = sum(_pending[w][i] for w in sorted(_pending)) / _cfg["num_workers"]
                p -= _cfg["lr"] * g
            _pending.clear()
            _step_done = torch.futures.Future()
            done.set_result(None)
    return done


# ----------------------------------------------------------------------------
# Worker side.
# ----------------------------------------------------------------------------
def load_data():
    X, y = load_digits(return_X_y=True)
    X_tr, X_te, y_tr, y_te = train_test_split(X, y, test_size=0.2, random_state=0, stratify=y)
    scaler = StandardScaler().fit(X_tr)
    f = lambda a: torch.tensor(scaler.transform(a), dtype=torch.float32)
    return f(X_tr), torch.tensor(y_tr), f(X_te), torch.tensor(y_te)


def run_worker(args, index, num_workers, num_ps):
    model = make_model()
    params = list(model.parameters())
    owner = [i % num_ps for i in range(len(params))]  # which ps holds param i

    def pull():
        shards = [rpc.rpc_async(f"ps{k}", get_params) for k in range(num_ps)]
        shards = [f.wait() for f in shards]
        with torch.no_grad():
            for i, p in enumerate(params):
                p.copy_(shards[owner[i]][i // num_ps])

    X_tr, y_tr, X_te, y_te = load_data()
    X_sh, y_sh = X_tr[index::num_workers], y_tr[index::num_workers]  # my data shard
    # All workers must do the same number of steps (the ps waits for everyone).
    n_min = len(y_tr) // num_workers
    steps_per_epoch = (n_min + args.batch_size - 1) // args.batch_size
    gen = torch.Generator().manual_seed(1000 + index)
    loss_fn = nn.CrossEntropyLoss()

    t0 = time.perf_counter()
    steps = 0
    for epoch in range(1, args.epochs + 1):
        perm = torch.randperm(len(y_sh), generator=gen)[:n_min]
        total = 0.0
        for s in range(steps_per_epoch):
            idx = perm[s * args.batch_size:(s + 1) * args.batch_size]
            pull()                                   # 1. fetch current weights
            model.zero_grad()
            loss = loss_fn(model(X_sh[idx]), y_sh[idx])
            loss.backward()                          # 2. local gradients
            futs = [rpc.rpc_async(f"ps{k}", push_grads,
                                  args=(index, [p.grad for i, p in enumerate(params)
                                                if owner[i] == k]))
                    for k in range(num_ps)]
            torch.futures.wait_all(futs)             # 3. push; wait for the update
            total += loss.item()
            steps += 1
        if index == 0:
            print(f"epoch {epoch}/{args.epochs} loss {total / steps_per_epoch:.4f}", flush=True)
    train_time = time.perf_counter() - t0

    if index == 0:
        pull()  # final weights
        with torch.no_grad():
            acc = (model(X_te).argmax(1) == y_te).float().mean().item()
        print(f"test_accuracy {acc:.4f}", flush=True)
        print(f"steps_per_sec {steps / train_time:.2f}", flush=True)
        out_dir = os.environ.get("CLOUDTRAIN_OUTPUT_DIR", "./output")
        os.makedirs(out_dir, exist_ok=True)
        torch.save(model.state_dict(), os.path.join(out_dir, "model.pt"))
        with open(os.path.join(out_dir, "metrics.json"), "w") as f:
            json.dump({"test_accuracy": acc, "epochs": args.epochs,
                       "num_ps": num_ps, "num_workers": num_workers}, f, indent=2)
        print(f"saved model.pt and metrics.json to {out_dir}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--epochs", type=int, default=10)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--batch-size", type=int, default=32, help="per-worker batch size")
    args = ap.parse_args()

    tf_config = json.loads(os.environ["TF_CONFIG"])
    cluster, task = tf_config["cluster"], tf_config["task"]
    ps_hosts, worker_hosts = cluster.get("ps", []), cluster.get("worker", [])
    num_ps, num_workers = len(ps_hosts), len(worker_hosts)
    role, index = task["type"], int(task["index"])
    assert role in ("ps", "worker"), f"unsupported task type {role!r}"
    assert num_ps >= 1 and num_workers >= 1, "need at least one ps and one worker"
    rank = index if role == "ps" else num_ps + index
    world_size = num_ps + num_workers

    # TensorPipe reads TP_SOCKET_IFNAME; reuse the launcher's GLOO_SOCKET_IFNAME.
    if "GLOO_SOCKET_IFNAME" in os.environ:
        os.environ.setdefault("TP_SOCKET_IFNAME", os.environ["GLOO_SOCKET_IFNAME"])

    options = rpc.TensorPipeRpcBackendOptions(
        num_worker_threads=8, rpc_timeout=120, init_method=f"tcp://{ps_hosts[0]}")
    name = f"{role}{index}"
    if role == "ps":
        # Set up the state before joining, so no request can arrive too early.
        init_ps_state(index, num_ps, num_workers, args.lr)
    print(f"{name}: rpc rank {rank}/{world_size}, rendezvous at {ps_hosts[0]}", flush=True)
    rpc.init_rpc(name, rank=rank, world_size=world_size, rpc_backend_options=options)

    if role == "worker":
        run_worker(args, index, num_workers, num_ps)
    # A ps has nothing else to do: shutdown() waits until every process is done.
    rpc.shutdown()
    print(f"{name}: done", flush=True)


if __name__ == "__main__":
    main()
