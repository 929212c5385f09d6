"""The platform's facts a provider class gives (docs/plugins.md, "The platform's facts"): the
registries it pulls images from (``image_registries``), its capacity and quota error codes
(``capacity_codes``, ``quota_worded_codes``, ``refused_after_create``), whether it restarts a job
and limits its run time itself (``restarts_itself``, ``has_runtime_limit``), the words of its
failures (``failure_words``) and where its credentials come from (``credential_check``).  Core
reads them and knows no platform by name, so their shapes are the contract: each is checked here
for every provider under test."""
import re

from cloudtrain.extend import plugins
from cloudtrain.orchestrate import failures
from cloudtrain.input.loading import job_from_dict
from cloudtrain.providers.images import DOCKER_HUB_HOSTS, Pulls, unpullable
from cloudtrain.testing.jobs import required_settings

HUB_IMAGE = "pytorch/pytorch:2.4.0-cuda12.1-cudnn9-runtime"
# A name that holds a secret (not a path to one, nor an id): its value must never be shown.
SECRET_NAME = re.compile(r"SECRET|TOKEN|PASSWORD|_SK$|_KEY$")
PATH_NAME = re.compile(r"_(FILE|PATH|DIR|URI|ENDPOINT)$")


def test_image_registries_name_the_platform_s_registries_and_the_fix(cloudtrain_provider):
    name = cloudtrain_provider
    pulls = plugins.get_provider_class(name).image_registries
    if pulls is None:  # it pulls from anywhere: never a warning
        assert unpullable(name, None, HUB_IMAGE) is None
        return
    assert isinstance(pulls, Pulls)
    assert pulls.what and pulls.fix and pulls.doc.startswith("https://"), "say what it pulls, the fix, the doc"
    assert pulls.hosts and all(isinstance(h, str) for h in pulls.hosts)
    for host in pulls.hosts:
        re.compile(host)  # a pattern, matched whole against the image's registry host
        hub = [h for h in DOCKER_HUB_HOSTS if re.fullmatch(host, h)]
        assert not hub, f"{host!r} matches Docker Hub ({hub}): the warning could never be given"
    warning = unpullable(name, pulls, HUB_IMAGE)
    assert warning and HUB_IMAGE in warning and pulls.doc in warning and f"providers.{name}.image" in warning


def test_capacity_codes_are_the_platform_s_own_codes(cloudtrain_provider):
    cls = plugins.get_provider_class(cloudtrain_provider)
    for attribute in ("capacity_codes", "quota_worded_codes"):
        codes = getattr(cls, attribute)
        assert isinstance(codes, frozenset), f"{attribute} must be a frozenset of the platform's error codes"
        assert all(isinstance(c, str) and c and c == c.strip() for c in codes), f"{attribute}: {sorted(codes)}"
    assert not cls.capacity_codes & cls.quota_worded_codes, "a code is in both capacity_codes and quota_worded_codes"
    assert isinstance(cls.refused_after_create, bool)
    if cls.refused_after_create:  # the watch knows a capacity failure by a code in the job's message
        assert cls.capacity_codes, "refused_after_create without capacity_codes: no failure could be recognised"


def test_restarts_and_run_time_limit_are_bools(cloudtrain_provider):
    cls = plugins.get_provider_class(cloudtrain_provider)
    assert isinstance(cls.restarts_itself, bool), "restarts_itself must be True or False"
    assert isinstance(cls.has_runtime_limit, bool), "has_runtime_limit must be True or False"


def test_failure_words_are_patterns_of_known_kinds(cloudtrain_provider):
    words = plugins.get_provider_class(cloudtrain_provider).failure_words
    assert isinstance(words, tuple), "failure_words must be a tuple of (regex, kind) pairs"
    for entry in words:
        assert isinstance(entry, tuple) and len(entry) == 2, f"not a (regex, kind) pair: {entry!r}"
        pattern, kind = entry
        assert isinstance(pattern, str) and pattern, f"not a pattern: {pattern!r}"
        re.compile(pattern)
        assert re.search(pattern, "") is None, f"{pattern!r} matches every message"
        assert kind in failures.KINDS, f"{kind!r} is not one of {failures.KINDS}"


def _options(name: str):
    job = job_from_dict({"name": "facts", "command": "true", "code": None,
                         "providers": {name: required_settings(name)}})
    return plugins.get_provider_class(name).options(job)


def test_credential_check_is_offline_and_shows_no_secret(cloudtrain_provider, offline, monkeypatch, tmp_path):
    name = cloudtrain_provider
    cls = plugins.get_provider_class(name)
    monkeypatch.setenv("HOME", str(tmp_path))  # no credential file of this machine's user
    first = cls.credential_check(None)  # invalid settings: the check still answers
    if first is None:  # the plugin does not say: doctor shows "not checked offline"
        assert cls.credential_check(_options(name)) is None
        return
    found, detail = first
    assert isinstance(found, bool) and isinstance(detail, str) and detail.strip()
    # every secret the check says it looked for, set to a value of its own: named at most, never shown
    secrets = {v: f"ct-canary-{i}-{v.lower()}" for i, v in enumerate(sorted(set(re.findall(r"\b[A-Z][A-Z0-9_]{3,}\b",
                                                                                             detail))))
               if SECRET_NAME.search(v) and not PATH_NAME.search(v)}
    for variable, value in secrets.items():
        monkeypatch.setenv(variable, value)
    for options in (None, _options(name)):
        found, detail = cls.credential_check(options)
        assert isinstance(found, bool) and detail.strip()
        shown = [v for v in secrets.values() if v in detail]
        assert not shown, f"{name}'s credential_check shows a secret's value: {detail}"
