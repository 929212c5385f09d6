"""The lifecycle contract, over the provider's own double of its platform (``ProviderDouble``,
registered with ``cloudtrain.testing.double``): submitting the same job twice gives one job,
cancel is idempotent and ends the job, every raw state of the provider's ``states`` table maps to
its neutral state (and a raw state the table lacks to UNKNOWN), and logs are well-formed lines."""
import pytest

from cloudtrain.providers.provider import State
from cloudtrain.testing import lifecycle_providers

UNHEARD_OF = "CT-NO-SUCH-STATE"
LINES = ["epoch 1 loss 0.50", "epoch 2 loss 0.25 -- done", "test_accuracy 0.95"]
READS = 10  # a stop takes the platform a few reads (its double steps once per read)


def providers_here(names):
    return lifecycle_providers(names)


@pytest.fixture
def life(cloudtrain_provider_double):
    return cloudtrain_provider_double


def submit(life):
    return life.provider.submit(life.provider.render(life.job()))


def first_raw(life, state):
    """The first raw state of the provider's table that means ``state`` (not one of its stopping ones)."""
    cls = type(life.provider)
    raw = next((r for r, s in cls.states.items() if s is state and r not in getattr(cls, "stopping", ())), None)
    assert raw is not None, f"{cls.name}'s states table has no raw state for {state.value}"
    return raw


def test_submitting_the_same_job_twice_gives_one_job(life):
    first = submit(life)
    second = submit(life)
    assert (second.id, second.handle) == (first.id, first.handle)
    listed = [s.handle for s in life.provider.list()]
    assert listed.count(first.handle) == 1 and len(listed) == 1, listed


def test_cancel_is_idempotent_and_ends_the_job(life):
    run = submit(life)
    life.set_state(run.id, first_raw(life, State.RUNNING))
    assert life.provider.status(run.id).state is State.RUNNING
    life.provider.cancel(run.id)
    life.provider.cancel(run.id)  # again: no error
    for _ in range(READS):
        status = life.provider.status(run.id)
        if status.terminal:
            break
    assert status.state is State.CANCELLED, status
    assert life.provider.cancel(run.id).state is State.CANCELLED  # an ended job stays as it ended


def test_every_raw_state_maps_to_its_neutral_state(life):
    run = submit(life)
    wrong = {}
    for raw, state in type(life.provider).states.items():
        life.set_state(run.id, raw)
        got = life.provider.status(run.id).state
        if got is not state:
            wrong[raw] = (got.value, state.value)
    life.set_state(run.id, UNHEARD_OF)
    got = life.provider.status(run.id).state
    if got is not State.UNKNOWN:
        wrong[UNHEARD_OF] = (got.value, State.UNKNOWN.value)
    assert wrong == {}, f"raw state: (read as, its table says) {wrong}"


def test_logs_are_whole_lines(life):
    run = submit(life)
    life.set_state(run.id, first_raw(life, State.SUCCEEDED))
    life.write_log(run.id, LINES)
    items = list(life.provider.logs(run.id))
    bad = [item for item in items if not isinstance(item, str) or not item.endswith("\n") or item.count("\n") != 1]
    assert bad == [], f"log items must be one line each, ending in one newline: {bad}"
    lines = "".join(items).splitlines()
    found = [next((i for i, line in enumerate(lines) if line.endswith(want)), None) for want in LINES]
    assert None not in found and found == sorted(found), f"the job's lines, in order, not in {lines}"
