"""podlogs.PodStreams: a follower gets each line in the same poll it arrives in, not batched
until the next one (the provider reads the status every 2 s)."""
from __future__ import annotations

import threading
import time

from cloudtrain_kubernetes.podlogs import PodStreams


def test_a_line_that_arrives_during_a_poll_is_handed_over_in_that_poll():
    streams = PodStreams(core=None, api_error=None)
    threading.Timer(0.2, streams.lines.put, args=("[node0] epoch 1",)).start()
    # the take starts before the line exists; the old take (no waiting) returned nothing here
    got = list(_take_until_first(streams, until=time.monotonic() + 30))
    assert got == ["[node0] epoch 1"]


def test_without_a_deadline_only_what_has_arrived_is_taken():
    streams = PodStreams(core=None, api_error=None)
    streams.lines.put("[node1] ready")
    assert list(streams.take(final=False)) == ["[node1] ready"]


def _take_until_first(streams, until):
    for line in streams.take(final=False, until=until):
        yield line
        return
