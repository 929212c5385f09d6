"""``sitecustomize`` of a job whose nodes all live on this machine: PyTorch's store on loopback.

PyTorch's ``TCPStore`` server (torchrun's rendezvous, ``init_process_group``'s ``env://`` and
``tcp://``, ``torch.distributed.rpc``'s) binds every interface (``::`` or ``0.0.0.0``; its
libuv and classic backends alike) and has no setting for the address.  It does take a socket
the caller has bound (``master_listen_fd``).  When ``torch.distributed`` is imported, this hook
wraps ``TCPStore.__init__``: a server store gets a socket bound to the address its clients are
given (``127.0.0.1`` in a local job), so it listens there only.

The launcher writes this file as ``sitecustomize.py`` into a directory it puts first on the
job's ``PYTHONPATH`` (only when the master address is a loopback one), so every Python process
of the job (torchrun, DeepSpeed, MPI ranks, Ray workers) imports it; the hook itself imports
nothing until ``torch.distributed`` is.  A ``sitecustomize`` it shadows is run after it.

It also arms ``cloudtrain stacks`` without py-spy: when the launcher names a signal in
``CLOUDTRAIN_STACKS_SIGNAL`` (``SIGUSR2``) and the process has no handler of its own for it,
``faulthandler.register`` makes that signal write every thread's stack to the process's stderr
(the node's log) and let the process go on.
Standard library only, Python >= 3.8.
"""
import importlib.abc
import importlib.machinery
import importlib.util
import os
import socket
import sys

_ARGS = ("host_name", "port", "world_size", "is_master", "timeout", "wait_for_workers",
         "multi_tenant", "master_listen_fd", "use_libuv")


def bound_socket(host, port):
    """A TCP socket bound to ``host`` (resolved; ``127.0.0.1`` if it does not resolve) and ``port``."""
    try:
        family, _, _, _, address = socket.getaddrinfo(host, port, 0, socket.SOCK_STREAM)[0]
    except (OSError, UnicodeError):
        family, address = socket.AF_INET, ("127.0.0.1", port)
    sock = socket.socket(family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
    except BaseException:
        sock.close()
        raise
    return sock


def patch(store_class):
    """Wrap ``store_class.__init__`` (once): a server store listens on its host's address only."""
    if getattr(store_class, "_cloudtrain_loopback", False):
        return
    original = store_class.__init__

    def __init__(self, *args, **kwargs):
        given = dict(zip(_ARGS, args))
        given.update(kwargs)
        if given.get("is_master") and given.get("master_listen_fd") is None and "host_name" in given:
            try:
                sock = bound_socket(given["host_name"], int(given.get("port") or 0))
            except OSError as exc:
                # what TCPStore raises itself (DistNetworkError is a RuntimeError): torchrun's c10d
                # backend then joins, as a client, the store another node on this machine hosts
                raise RuntimeError("the server socket has failed to bind to %s:%s (%s)"
                                   % (given["host_name"], given.get("port"), exc)) from exc
            given["master_listen_fd"] = sock.detach()
        original(self, **given)

    store_class.__init__ = __init__
    store_class._cloudtrain_loopback = True


class _Finder(importlib.abc.MetaPathFinder):
    """Patches ``torch.distributed`` right after it is first imported."""

    def find_spec(self, name, path=None, target=None):
        if name != "torch.distributed":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        run = loader.exec_module

        def exec_module(module):
            run(module)
            store_class = getattr(module, "TCPStore", None)
            if store_class is not None:
                patch(store_class)

        loader.exec_module = exec_module
        return spec


def _chain():
    """Run the ``sitecustomize`` this file shadows (Debian's, a venv's), if there is one."""
    here = os.path.dirname(os.path.abspath(__file__))
    rest = [p for p in sys.path if os.path.abspath(p or ".") != here]
    spec = importlib.machinery.PathFinder.find_spec("sitecustomize", rest)
    if spec is not None and spec.loader is not None and spec.origin != os.path.abspath(__file__):
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)


STACKS_SIGNAL = "CLOUDTRAIN_STACKS_SIGNAL"


def register_stacks(environ=os.environ):
    """``faulthandler.register`` on the signal the launcher named (none: nothing); a process
    that handles that signal itself keeps its own handler."""
    import faulthandler
    import signal
    name = environ.get(STACKS_SIGNAL, "")
    sig = getattr(signal, name, None) if name.startswith("SIGUSR") else None
    if sig is None or signal.getsignal(sig) not in (signal.SIG_DFL, None):
        return False
    faulthandler.register(sig, all_threads=True, chain=False)
    return True


def install():
    if not any(isinstance(f, _Finder) for f in sys.meta_path):
        sys.meta_path.insert(0, _Finder())
    if "torch.distributed" in sys.modules:
        store_class = getattr(sys.modules["torch.distributed"], "TCPStore", None)
        if store_class is not None:
            patch(store_class)


if __name__ == "sitecustomize":  # pragma: no cover - runs in the job's processes
    install()
    register_stacks()
    _chain()
