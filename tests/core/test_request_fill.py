"""``cloudtrain.providers.request.fill``: the one way every provider fills a render's placeholders at submit."""
import json
import shlex
import subprocess
from dataclasses import dataclass

from cloudtrain.providers.request import JsonText, Placeholder, ShellText, fill

HOSTILE = "a b'; touch /tmp/pwned-$(id -u) #\"\n`x`"


@dataclass(frozen=True)
class Req:
    script: ShellText
    env: dict
    names: tuple


def test_a_value_goes_into_each_string_as_its_format_needs_and_the_render_is_left_as_it_was():
    rendered = Req(ShellText(f"echo {Placeholder.CODE_URL}\n"), {"J": JsonText('{"u": "<code-url>"}'),
                                                                  "plain": "<code-url>"}, ("n-<spec-hash>",))
    filled = fill(rendered, {Placeholder.CODE_URL: HOSTILE, Placeholder.SPEC_HASH: "abc"})
    out = subprocess.run(["/bin/sh", "-c", filled.script], capture_output=True, text=True, check=True).stdout
    assert out == HOSTILE + "\n"  # one shell word, whatever it holds: nothing ran
    assert json.loads(filled.env["J"]) == {"u": HOSTILE}
    assert filled.env["plain"] == HOSTILE and filled.names == ("n-abc",)
    assert isinstance(filled.script, ShellText) and isinstance(filled.env["J"], JsonText)
    assert rendered.script == ShellText(f"echo {Placeholder.CODE_URL}\n")  # a copy: the render is unchanged


def test_one_pass_a_value_that_holds_a_placeholder_is_not_filled_again():
    filled = fill(["<spec-hash> <code-digest>"], {Placeholder.SPEC_HASH: "<code-digest>", Placeholder.CODE_DIGEST: "d"})
    assert filled == ["<code-digest> d"]
    assert fill(ShellText("x <run-id>"), {Placeholder.RUN_ID: "<run-id>"}) == "x " + shlex.quote("<run-id>")


def test_a_request_that_does_not_say_what_it_sends_cannot_be_made():
    import pytest
    from cloudtrain.providers.request import Request

    @dataclass(frozen=True)
    class Silent(Request):
        body: dict

    with pytest.raises(TypeError, match="artifacts"):
        Silent({})
