"""No neutral field is dropped in silence (docs/job-file.md: a field is rendered, or the job is
refused saying why).

Every field of the neutral job model (``cloudtrain.spec.job.JobSpec`` and its parts, walked from the
model itself, so a field added there fails ``test_every_neutral_field_has_a_probe`` until it has a
probe in probes.py) is set to a value other than its default and rendered on every cloud provider
under test (every ``CloudProvider``; local and docker run the job themselves).  Each outcome must be
one of:

- the rendered request differs from the same job without the value;
- a validation error (``BadInput``) whose field or message names the field;
- a warning (``CloudtrainWarning``) whose text names the field, saying what the platform does not do.

A render identical to the job without the value, with no error or warning naming the field, is a
silent drop and fails.  ``max_hourly_cost`` is in no request: cloudtrain applies it before submit
(``BEFORE_SUBMIT``); ``restart_on`` and ``max_cost`` are the controller's while the job runs
(``AFTER_SUBMIT``).  What each built-in provider does with a field is pinned to the platform's
source in cloudtrain's own tests/contract/test_drops_pinned.py.
"""
import pytest

from cloudtrain.testing.jobs import required_settings as settings
from cloudtrain.testing.probes import (AFTER_SUBMIT, PROBES, base_job, cloud_providers, names_field, neutral_fields,
                                       outcome, refused_at_setting, refuses, with_values)


def providers_here(names):
    return cloud_providers(names)


def test_every_neutral_field_has_a_probe():
    assert set(neutral_fields()) == set(PROBES), "a neutral field without a probe here (or a probe of no field)"


@pytest.mark.parametrize("field", sorted(PROBES))
def test_a_field_is_rendered_or_refused_or_warned_about(cloudtrain_provider, field, code_dir, monkeypatch):
    provider = cloudtrain_provider
    monkeypatch.setenv("CT_PROBE_SECRET_SOURCE", "probe-secret-value")
    values, shared = PROBES[field]
    base = with_values(dict(base_job(str(code_dir)), providers={provider: settings(provider)}), shared)
    before, error, _ = outcome(provider, base)
    # the job without the field renders, or is refused for what the probe needs (ps needs ps-worker)
    assert error is None or refuses(error, shared), f"the job without {field} must render on {provider}: {error}"
    silent, at_setting = [], False
    for value in values:
        after, error, warned = outcome(provider, with_values(base, {field: value}))
        if error is not None:
            assert refuses(error, [field, *shared]), \
                f"{field}={value!r} on {provider}: refused for another reason: {error}"
            at_setting = at_setting or refused_at_setting(error, provider)
        elif after == before and not any(names_field(text, field) for text in warned) and field not in AFTER_SUBMIT:
            silent.append(value)
    if at_setting:  # the unchanged values agree with the provider's setting, which the refused ones broke
        silent = []
    assert not silent, f"{provider} drops {field} in silence (render unchanged, no error, no warning) for {silent}"
