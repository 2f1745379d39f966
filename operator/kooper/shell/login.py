"""One refreshing source of the operator's credentials, shared by kopf and kooper's writes.

Every request the operator sends takes its ``Connection`` and ``Authorization``
from here, and so does kopf (its ``@kopf.on.login`` handler calls ``relogin``).
Credentials stay valid without a restart:

* a token file (the pod's projected service-account token, a kubeconfig's
  ``tokenFile``) is re-read every minute, as client-go does;
* a token that says when it expires (an exec plugin's ``expirationTimestamp``) is
  renewed ``skew`` seconds before;
* a 401 logs in again, once: the first rejected request re-runs ``load`` (the
  kubeconfig loader, the exec plugin); the others that were in flight with the same
  stale credentials find the new ones. Logins are at least ``min_interval_s`` apart,
  so a token the server keeps rejecting fails requests, not the operator (no loop).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from kooper.sdk import connection as connections
from kooper.sdk.connection import Connection

logger = logging.getLogger("kooper.login")


class Login:
    """The current credentials and the one way to renew them."""

    def __init__(self, load: Callable[[], Connection], *,
                 clock: Callable[[], float] = time.monotonic,
                 wall: Callable[[], float] = time.time,
                 min_interval_s: float = 1.0,
                 on_login: Callable[[str], None] | None = None) -> None:
        self._load = load
        self._clock = clock
        self._wall = wall
        self._min_interval_s = min_interval_s
        self._on_login = on_login
        self._lock = threading.Lock()
        self.logins = 0
        """Logins so far (the first one included): a metric, and what tests count."""
        self._connection = load()
        self._bearer = connections.Bearer(self._connection, clock=clock)
        self._at = clock()
        self._count("start")

    @classmethod
    def static(cls, connection: Connection, *,
               clock: Callable[[], float] = time.monotonic) -> Login:
        """Credentials that never change but for their token file (the emulator, tests)."""
        return cls(lambda: connection, clock=clock)

    @property
    def connection(self) -> Connection:
        """The connection requests are sent with now."""
        return self._connection

    def current(self) -> tuple[Connection, str | None]:
        """The connection and its ``Authorization`` header for the next request."""
        if self._connection.expiring(self._wall()):
            self._renew(self._connection, "expiring")
        return self._connection, self._bearer.header()

    def rejected(self, sent_with: Connection) -> bool:
        """A 401 answered a request sent with ``sent_with``: log in again unless someone
        already did. Whether the credentials changed (so resending makes sense)."""
        if sent_with is not self._connection:
            return True
        return self._renew(sent_with, "401")

    def relogin(self) -> Connection:
        """Log in again now (kopf's login handler, after a 401 on one of kopf's requests)."""
        self._renew(self._connection, "kopf")
        return self._connection

    def _renew(self, stale: Connection, why: str) -> bool:
        with self._lock:
            if stale is not self._connection:
                return True
            self._bearer.forget()
            if self._clock() - self._at < self._min_interval_s:
                return stale.token_file is not None  # re-read the file; no new login yet
            try:
                fresh = self._load()
            except Exception as exc:
                logger.warning("login (%s) failed, keeping the old credentials: %s", why, exc)
                self._at = self._clock()
                return False
            self._at = self._clock()
            self._connection = fresh
            self._bearer = connections.Bearer(fresh, clock=self._clock)
            self._count(why)
            return True

    def _count(self, why: str) -> None:
        self.logins += 1
        logger.info("logged in to %s (%s; login %d)", self._connection.server, why, self.logins)
        if self._on_login is not None:
            self._on_login(why)
