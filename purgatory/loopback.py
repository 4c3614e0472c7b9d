"""Loopback hosts: the only names a loopback-bound server answers to by default, and the
only targets the load generator's attacks accept."""

from __future__ import annotations

import ipaddress


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any loopback address (``127.0.0.0/8``, ``::1``, bracketed
    or not)."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
