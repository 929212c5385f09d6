"""Which files of the code directory travel, and the nodes' working copies."""
import os

from cloudtrain.transfer.codetree import CodeSelection, working_copies


def tree(root, files):
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def selected(root, **kw):
    return sorted(rel for rel, _ in CodeSelection(root, **kw).files())


def test_builtin_exclusions_without_an_ignore_file(tmp_path):
    root = tree(tmp_path / "c", {"train.py": "", "pkg/m.py": "", ".git/HEAD": "", "pkg/__pycache__/m.pyc": "",
                                 ".venv/bin/python": "", "output/model.pt": ""})
    assert selected(root) == ["pkg/m.py", "train.py"]


def test_cloudtrainignore_in_gitignore_syntax(tmp_path):
    root = tree(tmp_path / "c", {"train.py": "", "data/big.bin": "", "data/keep.txt": "", "logs/a.log": "",
                                 "sub/logs/b.log": "", "notes.md": "",
                                 ".cloudtrainignore": "# comment\ndata/*\n!data/keep.txt\n*.log\n/notes.md\n"})
    assert selected(root) == [".cloudtrainignore", "data/keep.txt", "train.py"]


def test_gitignore_is_used_when_there_is_no_cloudtrainignore(tmp_path):
    root = tree(tmp_path / "c", {"train.py": "", "ckpt/1.pt": "", ".gitignore": "ckpt/\n"})
    assert selected(root) == [".gitignore", "train.py"]
    (root / ".cloudtrainignore").write_text("")  # the project's own file wins over .gitignore
    assert selected(root) == [".cloudtrainignore", ".gitignore", "ckpt/1.pt", "train.py"]


def test_cloudtrain_home_inside_the_code_is_never_taken(tmp_path, monkeypatch):
    root = tree(tmp_path / "c", {"train.py": "", "state/runs/x/node-0/code/train.py": ""})
    monkeypatch.setenv("CLOUDTRAIN_HOME", str(root / "state"))
    assert selected(root) == ["train.py"]


def test_working_copies_share_one_copy_by_hard_links(tmp_path):
    root = tree(tmp_path / "c", {"train.py": "print(1)\n", "pkg/m.py": "", "empty/.keep": ""})
    os.symlink("train.py", root / "link.py")
    nodes = [tmp_path / f"node-{i}" for i in range(3)]
    working_copies(root, nodes)
    inodes = {(n / "pkg" / "m.py").stat().st_ino for n in nodes}
    assert len(inodes) == 1 and (root / "pkg" / "m.py").stat().st_ino not in inodes
    assert all(os.readlink(n / "link.py") == "train.py" for n in nodes)
    assert all((n / "train.py").read_text() == "print(1)\n" for n in nodes)


def test_the_credential_rules_mean_the_same_with_and_without_an_ignore_file():
    """Without an ignore file the rules are matched by codetree itself (no pathspec import on a
    local job's start); with one, as .gitignore lines before the user's: the same paths."""
    import pathspec
    from cloudtrain.transfer.codetree import _RULES, is_credential
    spec = pathspec.GitIgnoreSpec.from_lines([rule.gitignore for rule in _RULES])
    paths = [".env", "a/.env.prod", ".envrc", "environment.yml", ".aws/credentials", "x/.aws/config", ".aws",
             ".ssh/id_rsa.pub", "id_rsa", "keys/id_ed25519", "k/server.pem", "a.key", "keyboard.py", ".netrc",
             ".docker/config.json", "docker/config.json", ".config/gcloud/credentials.db", ".config/other/x",
             "sa/credentials.json", "client_secret_123.json", "state/prod.tfstate", ".kube/config", "train.py",
             ".cache/huggingface/token", "huggingface/tokenizer.json", ".tccli/default.credential", "a/b/c.p12"]
    assert [is_credential(p) for p in paths] == [spec.match_file(p) for p in paths]
    assert is_credential(".aws/credentials") and not is_credential("keyboard.py") and not is_credential(".aws")


def test_a_bang_line_ships_one_credential_file_and_the_rest_stay(tmp_path):
    root = tree(tmp_path / "c", {"train.py": "", ".env": "", ".aws/credentials": "", ".aws/config": "",
                                 "certs/ca.pem": "", "certs/server.pem": "",
                                 ".cloudtrainignore": "!.aws/config\n!certs/ca.pem\n"})
    selection = CodeSelection(root)
    assert sorted(rel for rel, _ in selection.files()) == [".aws/config", ".cloudtrainignore", "certs/ca.pem",
                                                           "train.py"]
    assert selection.kept_back == [".env", ".aws/credentials", "certs/server.pem"]
    (root / ".cloudtrainignore").write_text(".env\n")  # the user's own line: kept back, and not told again
    selection = CodeSelection(root)
    list(selection.files())
    assert ".env" not in selection.kept_back and ".aws/credentials" in selection.kept_back


def test_a_directory_cloudtrain_outputs_downloaded_into_never_ships(tmp_path):
    from cloudtrain.transfer.codetree import OUTPUTS_MARKER
    root = tree(tmp_path / "c", {"train.py": "", "results/run1/model.bin": "", "results/run1/" + OUTPUTS_MARKER: "",
                                 "outputs/x/y.bin": "", "results/notes.md": ""})
    assert selected(root) == ["results/notes.md", "train.py"]


def test_the_docs_list_every_credential_rule():
    from pathlib import Path
    from cloudtrain.transfer.codetree import CREDENTIALS
    page = (Path(__file__).resolve().parents[2] / "docs" / "security.md").read_text()
    assert [p for p, _ in CREDENTIALS if f"| `{p}` |" not in page] == []
