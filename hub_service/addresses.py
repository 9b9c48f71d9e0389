"""Which IP addresses are public: the one test for addresses the Hub must not call or show."""

from __future__ import annotations

import ipaddress

__all__ = ["why_not_public"]


def why_not_public(address: str) -> str | None:
    """Why `address` is not a public one ("10.0.0.5, a private address"), or None when it is.

    An IPv6 address that carries an IPv4 one (IPv4-mapped, 6to4) is judged by the IPv4 address;
    a zone (`%eth0`) is ignored.

    Raises:
        ValueError: `address` is not an IP address.
    """
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address):
        ip = ip.ipv4_mapped or ip.sixtofour or ip
    for test, what in (
        (ip.is_loopback, "a loopback"),
        (ip.is_link_local, "a link-local"),
        (ip.is_private, "a private"),
        (ip.is_unspecified, "an unspecified"),
        (ip.is_multicast, "a multicast"),
        (ip.is_reserved, "a reserved"),
        (not ip.is_global, "a non-public"),
    ):
        if test:
            return f"{ip}, {what} address"
    return None
