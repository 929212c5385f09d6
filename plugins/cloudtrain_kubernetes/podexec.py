"""``cloudtrain exec`` into a node's pod: the pod's ``exec`` subresource through the official
client's stream (``kubernetes.stream.stream`` over ``connect_get_namespaced_pod_exec``: the
kubelet's websocket, channel 1 stdout, 2 stderr, 3 the final Status, whose exit code
``WSClient.returncode`` reads), the command run in the pod's first container.
"""
from __future__ import annotations

import sys
from typing import BinaryIO, List, Optional


def run(core, pod: dict, command: List[str], out: Optional[BinaryIO] = None, err: Optional[BinaryIO] = None) -> int:
    """Run ``command`` in ``pod``; its output on ``out`` / ``err`` as it comes; its exit code."""
    from kubernetes.stream import stream
    out = out or sys.stdout.buffer
    err = err or sys.stderr.buffer
    meta = pod["metadata"]
    ws = stream(core.connect_get_namespaced_pod_exec, meta["name"], meta["namespace"],
                container=pod["spec"]["containers"][0]["name"], command=command, stderr=True, stdin=False,
                stdout=True, tty=False, _preload_content=False, binary=True)
    try:
        while True:
            was_open = ws.is_open()
            ws.update(timeout=1)
            if ws.peek_stdout():
                out.write(ws.read_stdout())
                out.flush()
            if ws.peek_stderr():
                err.write(ws.read_stderr())
                err.flush()
            if not was_open:
                break
        return int(ws.returncode or 0)
    finally:
        ws.close()
