"""The host names a local web server answers to, and the check of each request's ``Host`` header.

A page of another site whose name was made to resolve to 127.0.0.1 (DNS rebinding) sends its
requests with that site's name in ``Host``; refusing every name the server is not served on keeps
such a page from reading or driving it through the user's browser. The dashboard (``benchlab ui``)
and the evaluation server without a token (``benchlab serve --no-auth``) both check this way.
"""

from __future__ import annotations

import ipaddress
import json
import socket
from collections.abc import Sequence
from typing import Any


def served_hosts(bind: str, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The host names a server bound to ``bind`` answers to: the address itself and, for a
    loopback address, ``localhost``; for a wildcard address (``0.0.0.0``, ``::``) this machine's
    names and loopback too; and ``extra`` (names a proxy or DNS gives it)."""
    names = {bind.strip("[]").lower(), "localhost", "127.0.0.1", "::1"}
    try:
        wildcard = ipaddress.ip_address(bind.strip("[]")).is_unspecified
    except ValueError:
        wildcard = False
    if wildcard:
        names |= {socket.gethostname().lower(), socket.getfqdn().lower()}
    names |= {e.lower() for e in extra}
    # An IPv6 address is matched as the Host header writes it, with or without brackets.
    names |= {f"[{n}]" for n in names if ":" in n}
    return sorted(names)


def host_name(header: str | None) -> str | None:
    """The host part of a ``Host`` header, lower case (an IPv6 address keeps its brackets); None if malformed."""
    if not header:
        return None
    value = header.strip().lower()
    if value.startswith("["):
        end = value.find("]")
        rest = value[end + 1 :] if end > 0 else ""
        if end <= 0 or (rest and not (rest.startswith(":") and rest[1:].isdigit())):
            return None
        return value[: end + 1]
    name, colon, port = value.partition(":")
    if not name or (colon and not port.isdigit()):
        return None
    return name


class HostCheck:
    """ASGI middleware: 400, one JSON line naming the ``Host`` header, for a name not in ``allowed``."""

    def __init__(self, app: Any, allowed_hosts: Sequence[str]) -> None:
        self.app = app
        self.allowed = {h.lower() for h in allowed_hosts}

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        header = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"host"), None)
        if host_name(header) in self.allowed:
            await self.app(scope, receive, send)
            return
        message = (f"Invalid host header: {(header or '')[:100]!r} is not a name this server is served on "
                   f"({', '.join(sorted(self.allowed))})")
        body = json.dumps({"error": message, "detail": message}).encode()
        await send({"type": "http.response.start", "status": 400,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
