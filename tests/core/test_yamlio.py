"""yamlio: what cloudtrain writes reads back as the same data, and scripts read as scripts."""
import pytest
import yaml

from cloudtrain import yamlio

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


def test_parse_gives_the_nodes_line_marks_and_the_data_from_one_parse():
    node, data = yamlio.parse("name: a\ndistribution:\n  nodes: 2\n")
    assert data == {"name": "a", "distribution": {"nodes": 2}}
    [(_, _), (key, value)] = node.value
    assert key.value == "distribution" and key.start_mark.line == 1
    assert value.value[0][0].start_mark.line == 2
    assert yamlio.parse("") == (None, None)
