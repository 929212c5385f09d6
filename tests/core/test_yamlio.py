"""yamlio: what cloudtrain writes reads back as the same data, and scripts read as scripts."""
import pytest
import yaml

from cloudtrain.spec import yamlio

TRICKY = [
    "#!/bin/sh\nset -eu\necho hi\n",
    "no trailing newline\nsecond line",
    "two trailing newlines\n\n",
    "trailing space \nafter it\n",
    "  leading indent\nnext\n",
    "\ttab first\n\tand again\n",
    "windows\r\nline\r\n",
    "unicode ✓ 模型\nline two\n",
    "key: value\n- item\n# not a comment\n",
    "",
    "single line",
    "yes",
    "0123",
]


@pytest.mark.parametrize("text", TRICKY)
def test_every_string_reads_back_exactly(text):
    data = {"data": {"file": text}, "list": [text, {"k": text}]}
    out = yamlio.dump(data)
    assert yaml.safe_load(out) == data
    assert yamlio.load(out) == data


def test_multi_line_strings_are_literal_blocks():
    out = yamlio.dump({"script": "#!/bin/sh\necho one\necho two\n"})
    assert out == "script: |\n  #!/bin/sh\n  echo one\n  echo two\n"


def test_read_gives_the_data_the_lines_and_the_texts_as_written():
    doc = yamlio.read("name: a\ndistribution:\n  nodes: 2\nenv: {V: 1.10, M: on, P: 0755, R: no, Q: '1.10'}\n")
    assert doc.data == {"name": "a", "distribution": {"nodes": 2},
                        "env": {"V": 1.1, "M": True, "P": 493, "R": False, "Q": "1.10"}}
    assert doc.lines[("distribution",)] == 2 and doc.lines[("distribution", "nodes")] == 3
    assert doc.lines[()] == 1
    assert doc.texts == {("distribution", "nodes"): "2", ("env", "V"): "1.10", ("env", "M"): "on",
                         ("env", "P"): "0755", ("env", "R"): "no"}
    assert yamlio.read("").data is None


def test_read_agrees_with_pyyaml_on_plain_yaml():
    text = ("a: [1, 2.5, -3, 0x1f, true, null, ~, 'q', \"d\"]\nb:\n  - {c: d}\n  - |\n    block\n"
            "e: >\n  folded\n  text\nf: !!str 0755\n")
    assert yamlio.read(text).data == yaml.safe_load(text)


def test_keys_are_strings_and_dates_stay_text():
    doc = yamlio.read("on: 1\nyes: 2\n3: 4\nday: 2024-01-01\n")
    assert doc.data == {"on": 1, "yes": 2, "3": 4, "day": "2024-01-01"}  # PyYAML: True, True, 3, date


def test_merge_keys_work_and_keep_their_lines_and_texts():
    doc = yamlio.read("base: &b\n  x: 0755\n  y: 1\nother:\n  <<: *b\n  y: 2\n")
    assert doc.data["other"] == {"x": 493, "y": 2}
    assert doc.texts[("other", "x")] == "0755" and doc.texts[("other", "y")] == "2"
    assert doc.lines[("other", "x")] == 2 and doc.lines[("other", "y")] == 6


def test_a_key_given_twice_is_reported_with_both_lines():
    doc = yamlio.read("env:\n  A: 1\n  B: 2\n  A: 3\n")
    assert doc.duplicates == [(("env", "A"), 4, 2)]
    assert not yamlio.read("a: &a {x: 1}\nb:\n  <<: *a\n  x: 2\n").duplicates  # overriding a merge is fine


BOMB = "a: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"{n}: &{n} [{', '.join([f'*{p}'] * 9)}]\n" for p, n in zip("abcdefghi", "bcdefghij"))


@pytest.mark.parametrize("text,line,words", [
    (BOMB, 6, "more than 100000 values"),  # 9**10 values once expanded; the budget ends at f
    ("a: &a [*a]\n", 1, "recursive alias"),
    ("a: &a {b: {c: *a}}\n", 1, "recursive alias"),
    ("a: *nowhere\n", 1, "refers to no anchor"),
    ("x: 1\nlist: " + "[" * 100_000 + "]" * 100_000 + "\n", 2, "nested more than 64 levels"),
    ("x: 1\ny:\n" + "".join("  " * i + f"k{i}:\n" for i in range(1, 80)), 66, "nested more than 64 levels"),
    ("a: &a " + "[" * 40 + "]" * 40 + "\nb: " + "[" * 30 + "*a" + "]" * 30 + "\n", 2, "nested more than 64"),
    ("a: 1\n---\nb: 2\n", 2, "a second YAML document"),
    ("a: !!python/object/apply:os.system ['true']\n", 1, "the tag !!python/object/apply:os.system is not allowed"),
    ("a: !!python/name:os.system\n", 1, "the tag !!python/name:os.system is not allowed"),
    ("a: !!binary aGVsbG8=\n", 1, "the tag !!binary is not allowed"),
    ("a: !!set {x}\n", 1, "the tag !!set is not allowed"),
    ("a: !custom x\n", 1, "the tag !custom is not allowed"),
    ("!!python/object:os.system x: 1\n", 1, "the tag !!python/object:os.system is not allowed"),
    ("a: !!int abc\n", 1, "'abc' is not a valid !!int"),
    ("? [a, b]\n: 1\n", 1, "a list is used as a mapping key"),
    ("x: 1\ny: a\x00b\n", 2, "a NUL byte"),
    ("x: 1\ny: \x1b[31m\n", 2, "the control character '\\x1b'"),
    ("a: [1\n", 2, "invalid YAML"),
])
@pytest.mark.parametrize("parser", ["installed", "pure-python", "strict-libyaml"])
def test_hostile_or_broken_yaml_is_refused_at_its_line(text, line, words, parser, monkeypatch):
    # The same message whichever parser PyYAML has: libyaml (whose own limits vary by release:
    # 0.2.6 refuses flow nesting past 1000 levels itself), PyYAML's pure-Python one (no libyaml),
    # or a libyaml that refuses the text first in words of its own ("strict-libyaml").
    if parser == "pure-python":
        monkeypatch.setattr(yamlio, "_Reader", yamlio._PyReader)
    elif parser == "strict-libyaml":
        monkeypatch.setattr(yamlio, "_Reader", _RefusesDeepFlow)
    with pytest.raises(yamlio.YamlProblem) as info:
        yamlio.read(text)
    assert info.value.line == line and words in info.value.message, (info.value.line, info.value.message)


class _RefusesDeepFlow(yamlio._PyReader):
    """A parser that, like libyaml 0.2.6's scanner, refuses deep flow nesting in its own words
    before handing out a single event (the wording here is made up on purpose)."""

    def get_event(self):
        if "[" * 20 in self.buffer:
            raise yaml.scanner.ScannerError("while scanning", None, "depth past the parser's own limit",
                                            self.get_mark())
        return super().get_event()


def test_a_text_only_libyaml_refuses_is_still_one_problem(monkeypatch):
    monkeypatch.setattr(yamlio, "_Reader", _RefusesDeepFlow)
    assert yamlio.read("a: " + "[" * 30 + "]" * 30 + "\n").data["a"]  # PyYAML's parser reads it


def test_no_tag_constructs_anything(tmp_path):
    marker = tmp_path / "constructed"
    payload = f"a: !!python/object/apply:builtins.open [{str(marker)!r}, w]\n"
    yaml.unsafe_load(payload)  # the payload is live: PyYAML's unsafe loader runs it
    assert marker.exists()
    marker.unlink()
    with pytest.raises(yamlio.YamlProblem, match="is not allowed"):
        yamlio.read(payload)
    assert not marker.exists()
