"""Which local interface and address reach the master?  (stdlib only, Linux first.)"""
from __future__ import annotations

import socket
import struct
import time
from typing import Optional

SIOCGIFADDR = 0x8915


def resolve(host: str, timeout: float = 0.0) -> str:
    """IPv4 address of ``host``, retrying for up to ``timeout`` seconds (peer DNS may lag)."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            return socket.getaddrinfo(host, None, socket.AF_INET)[0][4][0]
        except socket.gaierror:
            if time.monotonic() >= deadline:
                raise
            time.sleep(0.5)


def is_loopback(addr: str) -> bool:
    """Is ``addr`` (an IP address) a loopback one (127.0.0.0/8, ::1)?  A name is not."""
    import ipaddress
    try:
        return ipaddress.ip_address(addr).is_loopback
    except ValueError:
        return False


def local_ip_towards(addr: str) -> str:
    """The local IPv4 address the kernel would use to reach ``addr`` (no packet is sent)."""
    if addr.startswith("127."):
        return "127.0.0.1"
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        s.connect((addr, 9))
        return s.getsockname()[0]
    except OSError:
        return "127.0.0.1"
    finally:
        s.close()


def interface_addresses() -> dict:
    """``{ifname: ipv4}`` for every interface that has an IPv4 address (Linux)."""
    result = {}
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not Linux
        return result
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        for _, name in socket.if_nameindex():
            try:
                packed = fcntl.ioctl(s.fileno(), SIOCGIFADDR, struct.pack("256s", name[:15].encode()))
            except OSError:
                continue
            result[name] = socket.inet_ntoa(packed[20:24])
    finally:
        s.close()
    return result


def interface_for(ip: str) -> Optional[str]:
    """Name of the interface that holds ``ip`` (``lo`` for loopback addresses)."""
    if ip.startswith("127."):
        return "lo"
    for name, addr in interface_addresses().items():
        if addr == ip:
            return name
    return None
