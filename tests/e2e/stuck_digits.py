"""examples/digits-ddp/train.py, with rank 1 stuck after epoch 2 on the first attempt: it stops
at the end of that epoch and waits forever (as a rank stuck in a collective that never
completes), so rank 0 waits for it in epoch 3's and prints nothing more.  Every later attempt
runs as the example does."""
import os
import sys
import threading
import time

sys.path.insert(0, os.environ["DIGITS_DIR"])
import train  # noqa: E402

real_sleep = time.sleep
epochs = [0]


def sleep(seconds):
    epochs[0] += 1
    if epochs[0] == 2 and os.environ.get("RANK") == "1" and os.environ.get("CLOUDTRAIN_RESTART_COUNT") == "0":
        print("rank 1: stuck after epoch 2", flush=True)
        threading.Event().wait()
    real_sleep(seconds)


time.sleep = sleep
sys.argv = ["train.py", *sys.argv[1:]]
train.main()
