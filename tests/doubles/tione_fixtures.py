"""Fixtures of the loopback doubles the tione tests drive the real SDKs against: TI-ONE's API
(tione_double.py) and COS (cos_double.py); each test fails if a double saw a request it refuses.
A test module takes them with ``from doubles import cos, fake  # noqa: F401``."""
import pytest

from cloudtrain.transfer import objectstore
from doubles.cos_double import CosDouble
from doubles.tione_double import FakeTione

BUCKETS = ("train-1250000000", "runs-1250000000")


@pytest.fixture
def fake():
    with FakeTione() as server:
        yield server
    assert not server.bad_requests, server.bad_requests


@pytest.fixture
def cos():
    objectstore.forget_uploads()  # a fresh store: nothing this process sent before counts
    with CosDouble(buckets=BUCKETS) as server:
        yield server
    assert not server.bad_requests, server.bad_requests
