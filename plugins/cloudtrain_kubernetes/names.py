"""Kubernetes' own rules for names and labels, checked at validate so that the API server never
sees a value it would refuse (and nothing is created before it would).

The rules are apimachinery's (k8s.io/apimachinery/pkg/util/validation/validation.go):
``IsDNS1123Label`` (a namespace), ``IsDNS1123Subdomain`` (an object's name: a ServiceAccount,
a Secret, a PriorityClass, a Volcano Queue, whose CRD, batch.volcano.sh_jobs.yaml, gives
``spec.queue`` the same pattern and maxLength 253), ``IsQualifiedName`` (a label's key) and
``IsValidLabelValue`` (a label's value: Kueue's queue-name and priority-class labels too).
"""
from __future__ import annotations

import re
from typing import Optional

DNS1123_LABEL_MAX = 63
DNS1123_SUBDOMAIN_MAX = 253
LABEL_VALUE_MAX = 63
QUALIFIED_NAME_MAX = 63

_DNS1123_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
DNS1123_LABEL = re.compile(f"^{_DNS1123_LABEL}$")
DNS1123_SUBDOMAIN = re.compile(rf"^{_DNS1123_LABEL}(\.{_DNS1123_LABEL})*$")
_QUALIFIED = r"([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
QUALIFIED_NAME = re.compile(f"^{_QUALIFIED}$")
LABEL_VALUE = re.compile(rf"^({_QUALIFIED})?$")


def dns1123_label(value: str) -> Optional[str]:
    """Why ``value`` is not a DNS-1123 label (a namespace), or None."""
    if len(value) > DNS1123_LABEL_MAX:
        return f"is {len(value)} characters long; a Kubernetes namespace has at most {DNS1123_LABEL_MAX}"
    if not DNS1123_LABEL.match(value):
        return ("is not a Kubernetes namespace name (RFC 1123 label): lowercase letters, digits and '-', "
                "starting and ending with a letter or digit")
    return None


def dns1123_subdomain(value: str) -> Optional[str]:
    """Why ``value`` is not a DNS-1123 subdomain (an object's name), or None."""
    if len(value) > DNS1123_SUBDOMAIN_MAX:
        return f"is {len(value)} characters long; a Kubernetes object's name has at most {DNS1123_SUBDOMAIN_MAX}"
    if not DNS1123_SUBDOMAIN.match(value):
        return ("is not a Kubernetes object name (RFC 1123 subdomain): lowercase letters, digits, '-' and '.', "
                "starting and ending with a letter or digit")
    return None


def label_value(value: str) -> Optional[str]:
    """Why ``value`` cannot be a label's value, or None."""
    if len(value) > LABEL_VALUE_MAX:
        return f"is {len(value)} characters long; a Kubernetes label value has at most {LABEL_VALUE_MAX}"
    if not LABEL_VALUE.match(value):
        return ("is not a Kubernetes label value: letters, digits, '-', '_' and '.', starting and ending with a "
                "letter or digit (or empty)")
    return None


def label_key(key: str) -> Optional[str]:
    """Why ``key`` cannot be a label's key (``[prefix/]name``), or None."""
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or dns1123_subdomain(prefix)):
        return f"label key {key!r}: its prefix must be a DNS subdomain (e.g. example.com/team)"
    if not name or len(name) > QUALIFIED_NAME_MAX or not QUALIFIED_NAME.match(name):
        return (f"label key {key!r}: its name must be 1-{QUALIFIED_NAME_MAX} letters, digits, '-', '_' and '.', "
                "starting and ending with a letter or digit")
    return None
