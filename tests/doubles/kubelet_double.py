"""The kubelet's expansion of ``$(VAR)`` in a container's ``command`` and ``args``, as the tests
apply it before they run a rendered command: what the process really receives.

The rules are those of kubernetes' third_party/forked/golang/expansion/expand.go (read, and
written again here from its documented behaviour), one pass left to right:

- ``$$`` is one ``$``;
- ``$(NAME)`` is NAME's value when the container's env defines NAME, else stays ``$(NAME)``;
- ``$(`` with no ``)`` after it is written ``$$(`` (expand.go's "incomplete reference");
- ``$`` before any other character, or last, stays as it is.
"""
from typing import Mapping


def kubelet_expand(text: str, env: Mapping[str, str]) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] != "$" or i + 1 >= len(text):
            out.append(text[i])
            i += 1
            continue
        nxt = text[i + 1]
        if nxt == "$":
            out.append("$")
            i += 2
        elif nxt == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$$(")
                i += 2
            else:
                name = text[i + 2:close]
                out.append(env[name] if name in env else f"$({name})")
                i = close + 1
        else:
            out.append("$" + nxt)
            i += 2
    return "".join(out)
