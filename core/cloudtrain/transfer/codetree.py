"""Which files of a job's ``code`` directory reach the nodes, and the nodes' working copies.

One selection for every provider: the cloud archives (``cloudtrain.transfer.shipping``) and the local and
Docker working copies take the same files.

- Always left out: VCS data, caches, virtual environments, local outputs (``NOT_COPIED``),
  ``$CLOUDTRAIN_HOME`` when it lies inside the code directory (its runs hold copies of the code:
  copying them would recurse), and every directory ``cloudtrain outputs`` downloaded into (it
  holds ``OUTPUTS_MARKER``).
- Credential files stay home (``CREDENTIALS``: ``.env*``, ``.aws/``, ``id_rsa``, ``*.pem``...)
  unless a ``!pattern`` line of the ignore file ships one; ``warnings`` names those kept back.
- ``.cloudtrainignore`` at the top of the code directory, in ``.gitignore`` syntax, leaves out
  more; without one, the top-level ``.gitignore`` is used (as SkyPilot does with ``.skyignore``).
- A copy of the tree, never of what it points to: a symbolic link travels as a link (its target
  is never opened, so a link to ``~/.aws/credentials`` or ``/dev/zero`` ships as the link's
  text); a link to a directory is not descended; FIFOs, sockets and devices are left out.
  ``warnings`` names the links that leave the code directory (they dangle on the nodes) and the
  special files left out.
- ``working_copies`` gives every node of a local or Docker job its own directory tree: the first
  is a real copy, the others hard links to its files (a 1 GB tree costs one copy per job, not
  one per node).  The files are shared between the job's nodes, as read-only code should be:
  a script writes new files (or into ``CLOUDTRAIN_OUTPUT_DIR``), never its code in place.

Standard library, plus ``pathspec`` only when an ignore file exists (the local supervisor imports
this module on every job start).
"""
from __future__ import annotations

import fnmatch
import os
import posixpath
import re
import shutil
import stat
from pathlib import Path
from typing import Callable, Iterable, Iterator, List, NamedTuple, Optional, Tuple

# Never copied to a node: VCS data, caches, virtual environments, and local outputs.
NOT_COPIED = (".git", "__pycache__", "*.pyc", ".venv", "venv", ".tox", ".pytest_cache", ".mypy_cache", "output",
              "outputs")
IGNORE_FILES = (".cloudtrainignore", ".gitignore")
# ``cloudtrain outputs`` writes this file into every directory it downloads into: such a directory
# never ships, whatever its name or place.
OUTPUTS_MARKER = ".cloudtrain-outputs"

# Credential files that stay on this machine unless a ``!pattern`` line of the ignore file ships
# one: (pattern, what it holds).  A pattern is a file name (a glob, at any depth; as in
# ``.gitignore``, a directory of that name too), ``dir/`` (every file below a directory of that
# name, at any depth: ``!dir/file`` ships one of them) or ``dir/name`` (that path, at any depth).
# docs/security.md shows the same table.
CREDENTIALS: Tuple[Tuple[str, str], ...] = (
    (".env*", "dotenv files (.env, .env.local, .envrc): API keys and passwords"),
    (".netrc", "logins for curl, git, pip and Weights & Biases' API key"),
    ("_netrc", "the same on Windows"),
    (".git-credentials", "git's stored HTTPS credentials"),
    (".pypirc", "PyPI upload tokens"),
    (".npmrc", "npm registry tokens"),
    (".pgpass", "PostgreSQL passwords"),
    (".my.cnf", "MySQL client passwords"),
    (".databrickscfg", "Databricks tokens"),
    (".boto", "gsutil and boto credentials"),
    (".s3cfg", "s3cmd keys"),
    (".passwd-s3fs", "s3fs keys"),
    (".obsutilconfig", "Huawei Cloud obsutil AK/SK"),
    (".dockercfg", "Docker registry logins (old format)"),
    (".docker/config.json", "Docker registry logins"),
    (".aws/", "AWS CLI and SDK credentials, SSO token cache"),
    (".ssh/", "SSH keys and known hosts"),
    (".gnupg/", "GnuPG keyrings"),
    (".kube/", "kubeconfig: cluster tokens and client certificates"),
    (".azure/", "Azure CLI tokens"),
    (".config/gcloud/", "gcloud credentials and access tokens"),
    (".config/gh/", "GitHub CLI tokens"),
    (".tccli/", "Tencent Cloud TCCLI credentials"),
    (".tencentcloud/", "Tencent Cloud SDK credentials file"),
    (".hcloud/", "Huawei Cloud KooCLI profiles (AK/SK)"),
    (".huaweicloud/", "Huawei Cloud SDK credentials file"),
    (".aliyun/", "Alibaba Cloud CLI credentials"),
    (".kaggle/", "Kaggle API key"),
    (".huggingface/", "Hugging Face token (old place)"),
    ("huggingface/token", "Hugging Face token (~/.cache/huggingface/token)"),
    ("kaggle.json", "Kaggle API key"),
    ("application_default_credentials.json", "Google application default credentials"),
    ("credentials.json", "Google OAuth credentials (the quickstarts' name) and other tools'"),
    ("client_secret*.json", "Google OAuth client secrets"),
    ("service-account*.json", "Google service account keys"),
    ("service_account*.json", "Google service account keys"),
    ("*.pem", "TLS and SSH private keys and certificates"),
    ("*.key", "private keys"),
    ("*.p12", "PKCS#12 key stores"),
    ("*.pfx", "PKCS#12 key stores"),
    ("id_rsa*", "SSH keys"),
    ("id_ed25519*", "SSH keys"),
    ("id_ecdsa*", "SSH keys"),
    ("id_dsa*", "SSH keys"),
    ("*.tfstate", "Terraform state: every resource's secrets in clear"),
    ("*.tfstate.backup", "Terraform state: every resource's secrets in clear"),
    (".vault-token", "HashiCorp Vault token"),
    (".terraformrc", "Terraform CLI configuration: registry and Terraform Cloud tokens"),
    ("terraform.rc", "the same on Windows"),
    (".terraform.d/credentials.tfrc.json", "Terraform Cloud and Enterprise API tokens (terraform login)"),
    ("rclone.conf", "rclone's remotes: their keys, passwords and OAuth tokens"),
    (".streamlit/secrets.toml", "Streamlit app secrets"),
    (".mylogin.cnf", "MySQL login paths (passwords, obfuscated only)"),
    (".htpasswd", "web server password hashes"),
    ("*.jks", "Java key stores"),
    ("*.keystore", "Java and Android key stores"),
    ("*.kdbx", "KeePass password databases"),
    (".bash_history", "shell history: commands typed with passwords and tokens in them"),
    (".zsh_history", "shell history"),
    (".sh_history", "shell history"),
    (".history", "shell history (tcsh, some zsh setups)"),
    ("fish_history", "shell history (fish)"),
    (".python_history", "the Python prompt's history"),
    (".psql_history", "PostgreSQL client history"),
    (".mysql_history", "MySQL client history"),
    (".sqlite_history", "SQLite shell history"),
    (".node_repl_history", "Node.js prompt history"),
    (".rediscli_history", "Redis client history (AUTH commands with passwords)"),
)


class _Rule(NamedTuple):
    parts: Tuple[str, ...]  # glob per path component
    below: bool             # ``dir/``: the paths below a directory matching ``parts``

    @classmethod
    def parse(cls, pattern: str) -> "_Rule":
        return cls(tuple(pattern.strip("/").split("/")), pattern.endswith("/"))

    @property
    def regex(self) -> str:
        """The rule over a whole relative POSIX path: its components end the path (``dir/``:
        something follows them), after the start or a ``/``."""
        def component(glob: str) -> str:
            return "".join("[^/]*" if c == "*" else "[^/]" if c == "?" else re.escape(c) for c in glob)
        return "(?:^|/)" + "/".join(map(component, self.parts)) + ("/.+" if self.below else "") + "$"

    @property
    def gitignore(self) -> str:
        """The same rule as a ``.gitignore`` line (the user's lines come after it)."""
        joined = "/".join(self.parts)
        if self.below:
            return f"**/{joined}/**"
        return joined if len(self.parts) == 1 else f"**/{joined}"


_RULES = tuple(_Rule.parse(pattern) for pattern, _ in CREDENTIALS)
_CREDENTIAL = re.compile("|".join(f"(?:{rule.regex})" for rule in _RULES), re.DOTALL)


def is_credential(rel: str) -> bool:
    """Whether ``rel`` (a POSIX path relative to the code directory) is one of ``CREDENTIALS``."""
    return _CREDENTIAL.search(rel.strip("/")) is not None


def _home() -> Path:
    return Path(os.environ.get("CLOUDTRAIN_HOME") or Path.home() / ".cloudtrain")


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "FIFO"), (stat.S_ISSOCK, "socket"), (stat.S_ISCHR, "character device"),
                       (stat.S_ISBLK, "block device")):
        if test(mode):
            return name
    return "special file"


def leaves_tree(rel: str, target: str) -> bool:
    """Whether the link ``rel`` (relative to the code directory) with text ``target`` points outside
    the code directory: an absolute target, or one whose ``..`` climbs above it."""
    if target.startswith("/") or os.path.isabs(target):
        return True
    joined = posixpath.normpath(posixpath.join(posixpath.dirname(rel), target.replace(os.sep, "/")))
    return joined == ".." or joined.startswith("../")


def named(items: List[str], show: int = 5) -> str:
    """``a, b, c`` (the first ``show``, then ``and N more``)."""
    head = ", ".join(items[:show])
    return head if len(items) <= show else f"{head} and {len(items) - show} more"


class CodeSelection:
    """The files of ``root`` that travel: ``files()`` yields them sorted, as (relative POSIX
    path, path); ``extra_ignored`` are more name patterns (shipping adds its launcher folder).
    A file is a regular file or a symbolic link (to anything: it travels as the link).  After a
    walk, ``kept_back`` (credential files left home), ``outside_links`` and ``special`` (FIFOs,
    sockets, devices left out) say what the user should hear (``warnings``)."""

    def __init__(self, root, extra_ignored: Iterable[str] = ()):
        self.root = Path(root)
        self.names = NOT_COPIED + tuple(extra_ignored)
        self.ignore_file: Optional[Path] = next(
            (self.root / n for n in IGNORE_FILES if (self.root / n).is_file()), None)
        self._spec = None
        if self.ignore_file is not None:
            import pathspec  # only when there is a file to read
            lines = self.ignore_file.read_text(encoding="utf-8", errors="replace").splitlines()
            # the credential rules first: a `!pattern` of the user's, after them, ships one
            self._spec = pathspec.GitIgnoreSpec.from_lines([rule.gitignore for rule in _RULES] + lines)
        self.excluded = self._excluded_dirs()
        self.kept_back: List[str] = []
        self.outside_links: List[str] = []
        self.special: List[str] = []

    def _excluded_dirs(self) -> set:
        """``$CLOUDTRAIN_HOME`` (resolved) when it is inside the code directory."""
        out: set = set()
        try:
            root = self.root.resolve()
            home = _home().resolve()
        except OSError:
            return out
        if home == root or root in home.parents:
            out.add(str(home))
        return out

    def _ignored(self, name: str, rel: str, full: str, is_dir: bool) -> bool:
        if any(fnmatch.fnmatch(name, p) for p in self.names):
            return True
        if is_dir and (os.path.lexists(os.path.join(full, OUTPUTS_MARKER))
                       or self.excluded and os.path.realpath(full) in self.excluded):
            return True
        credential = is_credential(rel)
        if self._spec is None:
            ignored = credential
        else:
            found = self._spec.check_file(rel + "/" if is_dir else rel)
            ignored = found.include is True
            by_default = found.index is not None and found.index < len(_RULES)
            if ignored and by_default and not credential:
                ignored = False  # a `dir/` rule's own directory: walked, so `!dir/file` can ship one
            credential = ignored and by_default
        if ignored and credential:
            self.kept_back.append(rel + "/" if is_dir else rel)
        return ignored

    def walk(self) -> Iterator[Tuple[str, List[str], List[str]]]:
        """The tree, top-down and pruned: (relative dir, kept dirs, kept files), sorted.  A link
        (to a directory too) is a file and never descended; FIFOs, sockets and devices are left
        out (and named in ``special``)."""
        stack = [""]
        while stack:
            rel_dir = stack.pop()
            prefix = rel_dir + "/" if rel_dir else ""
            try:
                with os.scandir(os.path.join(self.root, rel_dir) if rel_dir else self.root) as found:
                    entries = sorted(found, key=lambda e: e.name)
            except OSError:
                continue  # unreadable, or gone since (os.walk's way)
            dirs, files = [], []
            for entry in entries:
                rel = prefix + entry.name
                is_dir = entry.is_dir(follow_symlinks=False)
                if self._ignored(entry.name, rel, entry.path, is_dir):
                    continue
                if is_dir:
                    dirs.append(entry.name)
                elif entry.is_symlink():
                    files.append(entry.name)
                    try:
                        target = os.readlink(entry.path)
                    except OSError:
                        continue
                    if leaves_tree(rel, target):
                        self.outside_links.append(f"{rel} -> {target}")
                elif entry.is_file(follow_symlinks=False):
                    files.append(entry.name)
                else:
                    try:
                        mode = entry.stat(follow_symlinks=False).st_mode
                    except OSError:
                        continue
                    self.special.append(f"{rel} ({_kind(mode)})")
            yield rel_dir, dirs, files
            stack.extend(prefix + d for d in reversed(dirs))

    def files(self) -> Iterator[Tuple[str, Path]]:
        for rel_dir, _, names in self.walk():
            base = self.root / rel_dir if rel_dir else self.root
            for name in names:
                yield (f"{rel_dir}/{name}" if rel_dir else name), base / name

    def warnings(self) -> List[str]:
        """One line for each thing the user should know about the selection (after a walk)."""
        out = []
        if self.kept_back:
            n = len(self.kept_back)
            out.append(f"code: {n} credential file{'s' if n > 1 else ''} in {self.root} stay{'' if n > 1 else 's'} on "
                       f"this machine: {named(self.kept_back)}; a !PATTERN line in .cloudtrainignore ships one anyway")
        if self.outside_links:
            n = len(self.outside_links)
            out.append(f"code: {n} symbolic link{'s' if n > 1 else ''} in {self.root} "
                       f"point{'' if n > 1 else 's'} outside "
                       f"the code directory and will dangle on the nodes (the link ships, never its target): "
                       f"{named(self.outside_links)}")
        if self.special:
            n = len(self.special)
            out.append(f"code: {n} file{'s' if n > 1 else ''} in {self.root} {'are' if n > 1 else 'is'} not a regular "
                       f"file, link or directory and {'are' if n > 1 else 'is'} left out: {named(self.special)}")
        return out


_warned: set = set()


def warn_about(selection: CodeSelection) -> List[str]:
    """Walk ``selection`` and show each of its ``warnings`` as a ``CloudtrainWarning``, once a
    process (validate, render and submit in one process say it once); the lines."""
    import warnings
    from ..spec.errors import CloudtrainWarning
    for _ in selection.walk():
        pass
    lines = selection.warnings()
    for line in lines:
        if line not in _warned:
            _warned.add(line)
            warnings.warn(line, CloudtrainWarning, stacklevel=2)
    return lines


def _copy_file(src: str, dest: str) -> None:
    if os.path.islink(src):
        os.symlink(os.readlink(src), dest)
    else:
        shutil.copy2(src, dest)  # refuses a FIFO that replaced the file since the walk


def _link_file(src: str, dest: str) -> None:
    if os.path.islink(src):
        os.symlink(os.readlink(src), dest)
    else:
        try:
            os.link(src, dest)
        except OSError:  # another file system, or one without hard links
            shutil.copy2(src, dest)


def copy_selected(selection: CodeSelection, dest, place: Callable[[str, str], None] = _copy_file,
                  source: Optional[Path] = None) -> None:
    """The selected tree under ``dest``; files come from ``source`` (default: the selection's
    root) by ``place`` (copy or hard link); links stay links."""
    dest, source = Path(dest), Path(source or selection.root)
    dest.mkdir(parents=True, exist_ok=True)
    for rel_dir, dirs, files in selection.walk():
        here = dest / rel_dir if rel_dir else dest
        src_dir = source / rel_dir if rel_dir else source
        for d in dirs:
            (here / d).mkdir(exist_ok=True)
        for name in files:
            place(str(src_dir / name), str(here / name))


def working_copies(root, destinations: List[Path]) -> None:
    """Every destination gets the selected code: the first a copy, the others hard links to it."""
    if not destinations:
        return
    selection = CodeSelection(root)
    first = Path(destinations[0])
    copy_selected(selection, first)
    for dest in destinations[1:]:
        copy_selected(selection, dest, place=_link_file, source=first)
