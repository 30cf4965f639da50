"""Serving the dashboard: on its own (``toolcards dashboard``), beside MCP on one port
(``toolcards serve --transport http --dashboard``), or from a thread of your own program.

The server binds 127.0.0.1 by default; another address logs a warning (the page shows the
team's plan, graph and audit trail to whoever signs in from there).
"""

from __future__ import annotations

import functools
import logging
import socket
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from toolcards.core.threads import background_thread
from toolcards.stores.base import DEFAULT_TEAM
from toolcards.stores.sqlite.approvals import SqliteApprovalStore
from toolcards.surfaces.dashboard.app import Dashboard
from toolcards.surfaces.http.guard import server_config
from toolcards.surfaces.http.limits import HttpLimits
from toolcards.surfaces.http.ports import DASHBOARD_PORT, listen, local_names, url_host
from toolcards.surfaces.http.server import GuardedServer

if TYPE_CHECKING:
    from toolcards.governance.policy.policy import Policy
    from toolcards.surfaces.http.tokens import TokenTable
    from toolcards.surfaces.runtime import SurfaceRuntime

log = logging.getLogger(__name__)

DEFAULT_PORT = DASHBOARD_PORT


def warn_if_exposed(host: str) -> None:
    if local_names(host) is None:
        log.warning(
            "serving the dashboard on %s: reachable beyond this machine; anyone holding a "
            "viewer token can read the team's plan, graph and audit trail",
            host,
        )


def dashboard_for(
    runtime: SurfaceRuntime,
    *,
    host: str = "127.0.0.1",
    approvals_file: str | Path | None = None,
    tokens: TokenTable | None = None,
    base_path: str | None = None,
) -> Dashboard:
    """The dashboard of a surfaces runtime: its team, audit log, approval broker and tokens.

    ``approvals_file`` shares pending approvals with other processes through a SQLite file
    (the runtime's broker then keeps them there). ``tokens``: one-time sign-in tokens
    instead of the runtime's (see :mod:`.first_sign_in`). ``base_path``: the secret path it
    is served under (default: a new random one; see :class:`Dashboard`)."""
    broker = runtime.executor.approvals
    if approvals_file is not None:
        team = runtime.team.team_id if runtime.team is not None else DEFAULT_TEAM
        broker.store = SqliteApprovalStore(approvals_file, team)
    return Dashboard(
        team=runtime.team,
        audit=runtime.audit,
        approvals=broker,
        tokens=runtime.tokens if tokens is None else tokens,
        one_time_tokens=tokens is not None,
        host=host,
        limits=runtime.http_limits,
        policy_error=functools.partial(policy_problem, runtime.policy),
        budgets=functools.partial(runtime.executor.budgets.report, runtime.policy),
        base_path=base_path,
    )


def policy_problem(policy: Policy) -> str | None:
    """Why the policy file does not load (re-read first if it changed), None while it does."""
    policy.check_reload()
    return policy.error


def uvicorn_server(app: Any, host: str, port: int, limits: HttpLimits | None = None) -> Any:
    """A uvicorn server of ``app``, its clients bounded by ``limits`` (see
    :mod:`toolcards.surfaces.http.guard`)."""
    return GuardedServer(server_config(app, host, port, limits))


async def run_dashboard(
    dashboard: Dashboard,
    *,
    host: str = "127.0.0.1",
    port: int = DEFAULT_PORT,
    sock: socket.socket | None = None,
) -> None:
    """Serve ``dashboard`` until cancelled or signalled (``sock``: a socket already bound
    to ``host:port``)."""
    warn_if_exposed(host)
    server = uvicorn_server(dashboard.app(), host, port, dashboard.limits)
    await server.serve(None if sock is None else [sock])


class BackgroundServer:
    """An ASGI app served by uvicorn on a thread of this process (a notebook, a test, a
    program that runs its own agents): ``url`` once started, :meth:`stop` to end it.

    ``url`` ends with the app's ``base_path`` when it has one (a dashboard's secret path)."""

    def __init__(
        self, app: Any, host: str = "127.0.0.1", port: int = 0, limits: HttpLimits | None = None
    ) -> None:
        self.host = host
        self.base_path: str = getattr(app, "base_path", "")
        self._sock = listen(host, port)
        self.port = self._sock.getsockname()[1]
        self.server = uvicorn_server(app, host, self.port, limits)
        self._thread = background_thread(self._run, name="toolcards-dashboard")

    @property
    def url(self) -> str:
        return f"http://{url_host(self.host)}:{self.port}{self.base_path}"

    def _run(self) -> None:
        self.server.run(sockets=[self._sock])

    def start(self, timeout: float = 10.0) -> BackgroundServer:
        warn_if_exposed(self.host)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self.server.started and self._thread.is_alive():
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the dashboard server did not start within {timeout} s")
            time.sleep(0.02)
        if not self.server.started:
            raise RuntimeError("the dashboard server failed to start (see the log)")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        self.server.should_exit = True
        if self._thread.is_alive():
            self._thread.join(timeout)
        self._sock.close()

    def __enter__(self) -> BackgroundServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
