"""The client's address, the one rule for the login lockout, the API throttles, the audit of
token writes and the /metrics network check.

``X-Forwarded-For`` is believed only from the proxies the deployer trusts
(``ARBITER_TRUSTED_PROXIES``: addresses or networks): when the connecting peer is one of them,
the header is read from its right end, skipping the trusted hops, and the first address not
trusted is the client (what nginx's ``real_ip_recursive`` does). Anyone else's header is
ignored, so a client cannot choose the address it is counted under.
"""

import ipaddress
from functools import cache
from typing import Any

from django.conf import settings

Network = ipaddress.IPv4Network | ipaddress.IPv6Network


@cache
def _networks(entries: tuple[str, ...]) -> tuple[Network, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


def trusted_networks() -> tuple[Network, ...]:
    """``ARBITER_TRUSTED_PROXIES`` parsed (settings check each entry at start-up)."""
    return _networks(tuple(settings.ARBITER_TRUSTED_PROXIES))


def _address(value: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    value = value.strip()
    if value.startswith("[") and "]" in value:  # [v6]:port
        value = value[1 : value.index("]")]
    elif value.count(":") == 1:  # v4:port
        value = value.split(":", 1)[0]
    try:
        return ipaddress.ip_address(value)
    except ValueError:
        return None


def _trusted(address: Any, networks: tuple[Network, ...]) -> bool:
    return any(address.version == net.version and address in net for net in networks)


def client_address(request: Any) -> str | None:
    """The client's address: the peer's, or, behind a trusted proxy, the forwarded one."""
    meta = request.META
    peer = _address(meta.get("REMOTE_ADDR") or "")
    if peer is None:
        return None
    networks = trusted_networks()
    if not networks or not _trusted(peer, networks):
        return str(peer)
    client = peer
    for hop in reversed((meta.get("HTTP_X_FORWARDED_FOR") or "").split(",")):
        address = _address(hop)
        if address is None:
            break  # a malformed hop: believe no further
        client = address
        if not _trusted(address, networks):
            break
    return str(client)
