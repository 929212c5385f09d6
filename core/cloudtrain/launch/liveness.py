"""A tiny TCP channel from the launcher node to the others.

Launchers such as ``mpirun`` or a Ray head run on node 0 only; the other nodes must stay up
while it runs and end when it ends.  Node 0 listens on ``master_port + 1``; every other node
connects, and learns the exit code when node 0's command ends.  Nothing but this node's
peers ever connects, and no data but ``exit <code>`` is sent.
"""
from __future__ import annotations

import socket
import threading
import time
from typing import List, Optional


class LivenessServer:
    def __init__(self, port: int, expected: int, host: str = ""):
        self.expected = expected
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self._sock.listen(max(16, expected))
        self._clients: List[socket.socket] = []
        self._lock = threading.Lock()
        self._joined = threading.Condition(self._lock)
        self._code: Optional[int] = None
        self._served = 0
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                if self._code is not None:
                    self._send(conn, self._code)
                    self._served += 1
                else:
                    self._clients.append(conn)
                self._joined.notify_all()

    @staticmethod
    def _send(conn: socket.socket, code: int) -> None:
        try:
            conn.sendall(b"exit %d\n" % code)
        except OSError:
            pass
        finally:
            conn.close()

    def wait_for_peers(self, timeout: float) -> bool:
        """Block until every other node has connected (True) or ``timeout`` passes (False)."""
        deadline = time.monotonic() + timeout
        with self._lock:
            while len(self._clients) < self.expected:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._joined.wait(left)
        return True

    def finish(self, code: int, grace: float = 10.0) -> None:
        """Tell every peer the exit code; keep answering late joiners for ``grace`` seconds."""
        deadline = time.monotonic() + grace
        with self._lock:
            self._code = code
            for conn in self._clients:
                self._send(conn, code)
            self._served += len(self._clients)
            self._clients = []
            while self._served < self.expected and time.monotonic() < deadline:
                self._joined.wait(max(0.0, deadline - time.monotonic()))
        self._sock.close()


def wait_for_launcher(host: str, port: int, timeout: float, on_connect=None) -> int:
    """Connect to node 0 (retrying until ``timeout``) and return the exit code it reports."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            conn = socket.create_connection((host, port), timeout=5)
            break
        except OSError:
            if time.monotonic() >= deadline:
                raise TimeoutError("node 0 (%s:%d) did not answer within %.0fs" % (host, port, timeout))
            time.sleep(0.2)
    if on_connect is not None:
        on_connect()
    conn.settimeout(None)
    data = b""
    with conn:
        while True:
            chunk = conn.recv(64)
            if not chunk:
                break
            data += chunk
    text = data.decode("ascii", "replace").strip()
    if text.startswith("exit "):
        try:
            return int(text.split()[1])
        except ValueError:
            pass
    return 0


def port_open(host: str, port: int) -> bool:
    try:
        socket.create_connection((host, port), timeout=1).close()
        return True
    except OSError:
        return False
