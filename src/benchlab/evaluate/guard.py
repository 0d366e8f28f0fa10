"""Serving under connection abuse: bounded request time, connections per client and in total, quiet logs.

uvicorn keeps a connection whose request headers never finish for as long as
the client likes. A thousand of them exhaust the process's file descriptors:
``accept()`` then fails on every turn of the loop, ``/health`` times out, and
asyncio logs "Too many open files" as fast as it can. ``serve`` runs uvicorn
with a connection guard in front of its HTTP protocol:

- a connection has ``header_timeout_secs`` to send a request's headers (the
  first request, and each next one on a kept-alive connection), else it is closed;
  then ``body_timeout_secs`` to send its body: the application answers 408 when
  the body it reads is late (``server.BodyLimit``), and the connection is closed
  a second later whether or not anything read the body;
- one client address holds at most ``max_connections_per_client`` connections;
  more are closed at once;
- all clients together hold at most ``max_connections`` (and never more than
  the descriptor limit leaves after the server's own needs). At the cap, a new
  connection replaces the oldest one whose request has not fully arrived (its
  headers or its body still coming): the half-open connections and slow bodies
  of a flood are the cheapest to drop, and ``/health`` keeps answering. Only
  when every connection is busy with a whole request is a new one refused;
- a log line repeated within ``REPEAT_WINDOW_SECS`` is written once, then
  counted; the next one after the window says how many were left out.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from collections import Counter
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from benchlab.evaluate.config import EvalConfig

logger = logging.getLogger("benchlab.evaluate")

REPEAT_WINDOW_SECS = 10.0
# Descriptors kept for the server's own work: the ledger, logs, sandboxes and math workers.
_RESERVED_FDS = 64
# asyncio accepts up to this many connections per turn of its loop, before the guard sees any of them.
ACCEPT_BACKLOG = 32
# A flood keeps descriptors in flight beyond the admitted connections: a connection is accepted on one
# turn of the loop, reaches the guard (connection_made) two turns later, and the connection it replaces
# is closed on the turn after that, while every turn accepts another batch. Up to three batches are open
# that the guard has not counted or has already let go.
_BATCHES_IN_FLIGHT = 3


class RepeatFilter(logging.Filter):
    """Lets a message (logger and format string) through once per ``window`` seconds, counting the rest."""

    def __init__(self, window: float = REPEAT_WINDOW_SECS, clock: Any = time.monotonic) -> None:
        super().__init__()
        self.window = window
        self.clock = clock
        self._last: dict[tuple[str, str], float] = {}
        self._dropped: Counter[tuple[str, str]] = Counter()

    def filter(self, record: logging.LogRecord) -> bool:
        key = (record.name, str(record.msg))
        now = self.clock()
        last = self._last.get(key)
        if last is not None and now - last < self.window:
            self._dropped[key] += 1
            return False
        self._last[key] = now
        dropped = self._dropped.pop(key, 0)
        if dropped:
            record.msg = f"{record.msg} [{dropped} more like this in the last {self.window:g}s not logged]"
        if len(self._last) > 1024:  # messages with varying text must not grow this without end
            self._last.clear()
        return True


class ConnectionGuard:
    """The connections of one server: how many per client, which still wait for headers."""

    def __init__(self, max_connections: int, per_client: int, header_timeout: float,
                 body_timeout: float | None = None) -> None:
        self.max_connections = max_connections
        self.per_client = per_client
        self.header_timeout = header_timeout
        # The application answers 408 at body_timeout; a second later the connection goes regardless.
        self.body_timeout = (body_timeout if body_timeout is not None else header_timeout) + 1.0
        self.by_client: Counter[str] = Counter()
        self.total = 0
        self.waiting: dict[GuardedH11Protocol, float] = {}  # no whole request yet; oldest first
        self.refused = 0
        self.timed_out = 0

    def admit(self, conn: GuardedH11Protocol, client: str) -> bool:
        if self.by_client[client] >= self.per_client:
            self.refused += 1
            logger.warning("refusing connections from %s over the per-client limit of %d",
                           client, self.per_client)
            return False
        if self.total >= self.max_connections:
            oldest = next(iter(self.waiting), None)
            if oldest is None:
                self.refused += 1
                logger.warning("refusing connections: all %d are busy with requests", self.max_connections)
                return False
            logger.warning("at the limit of %d connections: closing the oldest ones that sent no request",
                           self.max_connections)
            oldest.drop()
        self.by_client[client] += 1
        self.total += 1
        return True

    def release(self, client: str) -> None:
        self.by_client[client] -= 1
        if self.by_client[client] <= 0:
            del self.by_client[client]
        self.total -= 1


class GuardedH11Protocol(H11Protocol):
    """uvicorn's h11 protocol, with the connection guard of its server (``guard``, set per server)."""

    guard: ConnectionGuard

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._admitted = False
        self._header_timer: asyncio.TimerHandle | None = None
        self._body_timer: asyncio.TimerHandle | None = None
        self._client_host = self.client[0] if self.client else "?"
        if not self.guard.admit(self, self._client_host):
            transport.abort()
            return
        self._admitted = True
        self._await_headers()

    def connection_lost(self, exc: Exception | None) -> None:
        if getattr(self, "_admitted", False):
            self._admitted = False
            self._headers_arrived()
            self.guard.release(self._client_host)
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        state = self.conn.their_state
        if state is h11.SEND_BODY:
            self._await_body()  # headers in, body still coming: still the cheapest to drop
        elif state is not h11.IDLE:
            self._headers_arrived()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
            self._await_headers()  # a kept-alive connection has the same time for its next request

    def drop(self) -> None:
        self._headers_arrived()
        self.transport.abort()

    def _await_headers(self) -> None:
        if self._header_timer is None:
            self.guard.waiting[self] = time.monotonic()
            self._header_timer = self.loop.call_later(self.guard.header_timeout, self._headers_too_slow)

    def _await_body(self) -> None:
        if not self._admitted or self._body_timer is not None:
            return
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        self.guard.waiting.setdefault(self, time.monotonic())
        self._body_timer = self.loop.call_later(self.guard.body_timeout, self._body_too_slow)

    def _headers_arrived(self) -> None:
        self.guard.waiting.pop(self, None)
        if self._header_timer is not None:
            self._header_timer.cancel()
            self._header_timer = None
        if self._body_timer is not None:
            self._body_timer.cancel()
            self._body_timer = None

    def _body_too_slow(self) -> None:
        self._body_timer = None
        self.guard.timed_out += 1
        logger.warning("closing connections that sent no complete request body within %gs",
                       self.guard.body_timeout)
        self.drop()

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        self.guard.timed_out += 1
        logger.warning("closing connections that sent no complete request headers within %gs",
                       self.guard.header_timeout)
        self.drop()


def connection_limit(config: EvalConfig) -> int:
    """``server.max_connections``, lowered to what the descriptor limit leaves after the server's own needs."""
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    judge = config.judge.concurrency if config.judge is not None else 0
    in_flight = _BATCHES_IN_FLIGHT * ACCEPT_BACKLOG
    spare = soft - _RESERVED_FDS - in_flight - config.model.concurrency - judge - 2 * config.sandbox.concurrency
    if soft == resource.RLIM_INFINITY:
        return config.server.max_connections
    return max(1, min(config.server.max_connections, spare))


def build_server(app: Any, config: EvalConfig, host: str, port: int, log_level: str = "info") -> Any:
    """A uvicorn server for ``app`` with the connection guard and repeat-limited logs."""
    import uvicorn

    guard = ConnectionGuard(connection_limit(config), config.server.max_connections_per_client,
                            config.server.header_timeout_secs, config.server.body_timeout_secs)
    protocol = type("GuardedH11", (GuardedH11Protocol,), {"guard": guard})
    uv_config = uvicorn.Config(app, host=host, port=port, log_level=log_level, access_log=False,
                               http=protocol, timeout_keep_alive=5, backlog=ACCEPT_BACKLOG)
    # uvicorn set its logging up in Config(): filter every handler there is now.
    repeat = RepeatFilter()
    for name in ("", "uvicorn", "uvicorn.error", "asyncio", "benchlab.evaluate"):
        for handler in logging.getLogger(name).handlers:
            handler.addFilter(repeat)
    server = uvicorn.Server(uv_config)
    server.connection_guard = guard  # type: ignore[attr-defined]
    return server
