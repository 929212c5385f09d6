"""A job's pod logs through the official client: each pod's log read at once, or streamed as it
grows (one thread per pod), prefixed ``[node<i>]`` in node order.

``KubernetesProvider._log_chunks`` uses it under ``CloudProvider.logs``' loop: every poll it
starts a stream for each pod that has started and hands over the lines that arrived; once the
job has ended it waits for the streams to close (a pod's stream closes when its container ends).
"""
from __future__ import annotations

import queue
import threading
import time
from typing import Callable, Dict, Iterator, List, Optional

from cloudtrain.spec.errors import PlatformError

# A pod's log can be read once its container has started.
STARTED = ("Running", "Succeeded", "Failed")
# How long the last read waits for the streams of a job that has ended to close.
CLOSE_GRACE = 30.0


def pod_lines(core, pod: dict, index: int, follow: bool,
              api_error: Callable[[Exception, str], PlatformError]) -> Iterator[str]:
    """``[node<index>] line`` for each line of ``pod``'s first container (``follow``: as it
    grows, until the container ends); nothing for a pod that has not started or is gone."""
    from kubernetes.client.exceptions import ApiException
    meta = pod["metadata"]
    container = pod["spec"]["containers"][0]["name"]
    try:
        resp = core.read_namespaced_pod_log(meta["name"], meta["namespace"], container=container,
                                            follow=follow, _preload_content=False)
    except ApiException as exc:
        if exc.status in (400, 404):  # not started yet, or gone
            return
        raise api_error(exc, f"reading the log of pod {meta['name']}") from None
    try:
        for raw in resp.stream(4096) if follow else [resp.data]:
            for line in raw.decode("utf-8", "replace").splitlines():
                yield f"[node{index}] {line}"
    finally:
        resp.release_conn()


class PodStreams:
    """The streams of one followed job: one per pod that has started, feeding one queue."""

    def __init__(self, core, api_error: Callable[[Exception, str], PlatformError]):
        self.core, self.api_error = core, api_error
        self.lines: "queue.Queue[Optional[str]]" = queue.Queue()
        self.threads: Dict[str, threading.Thread] = {}

    def start(self, pods: List[dict]) -> None:
        """A stream for each pod (in node order) that has started and has none yet."""
        for index, pod in enumerate(pods):
            name = pod["metadata"]["name"]
            if name not in self.threads and (pod.get("status") or {}).get("phase") in STARTED:
                thread = threading.Thread(target=self._pump, args=(pod, index), daemon=True)
                self.threads[name] = thread
                thread.start()

    def _pump(self, pod: dict, index: int) -> None:
        try:
            for line in pod_lines(self.core, pod, index, True, self.api_error):
                self.lines.put(line)
        finally:
            self.lines.put(None)

    def take(self, final: bool, until: float = 0.0) -> Iterator[str]:
        """The lines that arrived, each as soon as it arrives until the ``until`` deadline
        (``time.monotonic()``; a follower sees lines as the pods write them, not in batches per
        poll); ``final``: first wait (up to ``CLOSE_GRACE``) for every stream to close."""
        if final:
            deadline = time.monotonic() + CLOSE_GRACE
            for thread in self.threads.values():
                thread.join(max(0.0, deadline - time.monotonic()))
            until = 0.0
        while True:
            wait = until - time.monotonic()
            try:
                line = self.lines.get(timeout=wait) if wait > 0 else self.lines.get_nowait()
            except queue.Empty:
                return
            if line is not None:
                yield line
