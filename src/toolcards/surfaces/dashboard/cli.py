"""``toolcards dashboard``: the command (the command line names it in its table, and imports
this module when it runs)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Annotated

import anyio
import typer

from toolcards.core.identity import Identity
from toolcards.governance.audit.log import AuditLog
from toolcards.runtime.team import Team
from toolcards.stores import StoreError, StoreLocation, StoreLockedError, UnknownStoreScheme
from toolcards.surfaces.config import new_token
from toolcards.surfaces.dashboard.app import Dashboard
from toolcards.surfaces.dashboard.first_sign_in import first_sign_in
from toolcards.surfaces.dashboard.serve import dashboard_for, run_dashboard
from toolcards.surfaces.http.ports import DASHBOARD_PORT, PortUnavailable, listen, url_host
from toolcards.surfaces.http.tokens import TokenTable
from toolcards.surfaces.outcomes import ExitCode
from toolcards.surfaces.runtime import SurfaceRuntime, opening_error

HostOpt = Annotated[str, typer.Option(help="Bind address (loopback by default).")]
PortOpt = Annotated[int, typer.Option(min=1, max=65535, help="Port.")]


def _fail(message: str, code: ExitCode) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(int(code))


def dashboard(
    ctx: typer.Context,
    config: Annotated[
        Path | None,
        typer.Option(
            "--config", "-c", help="Config file (default ./toolcards.yaml).", show_default=False
        ),
    ] = None,
    host: HostOpt = "127.0.0.1",
    port: PortOpt = DASHBOARD_PORT,
    approvals: Annotated[
        Path | None,
        typer.Option(help="SQLite file of pending approvals shared with other processes."),
    ] = None,
    store: Annotated[
        str | None,
        typer.Option(help="Without a config: the team's store (sign in with a one-time token)."),
    ] = None,
    team: Annotated[str | None, typer.Option(help="With --store: the team id.")] = None,
    audit: Annotated[Path | None, typer.Option(help="With --store: an audit log file.")] = None,
) -> None:
    """Serve the team dashboard in a browser.

    Roster, plan, graph, audit trail, approvals inbox and live events, at
    http://HOST:PORT/SECRET/ (the address printed; sign in with a viewer or approver token of
    the config)."""
    if store is not None and config is not None:
        raise _fail("give --config or --store, not both", ExitCode.USAGE)
    if store is None and (team is not None or audit is not None):
        raise _fail("--team and --audit go with --store", ExitCode.USAGE)
    opener = (
        _from_store(store, team, audit)
        if store is not None
        else _from_config(ctx, config, approvals, port)
    )
    try:  # taken or not, known before anything starts
        sock = listen(host, port)
    except PortUnavailable as exc:
        raise _fail(str(exc), ExitCode.USAGE) from None
    with sock, opener(host) as dash:
        page = f"http://{url_host(host)}:{port}{dash.base_path}/"  # its secret path: the one way in
        typer.echo(f"dashboard of {dash.title} at {page}", err=True)
        with contextlib.suppress(KeyboardInterrupt):
            anyio.run(lambda: run_dashboard(dash, host=host, port=port, sock=sock))


def _from_config(
    ctx: typer.Context, config: Path | None, approvals: Path | None, port: int
) -> Callable[[str], contextlib.AbstractContextManager[Dashboard]]:
    path = config or Path(ctx.find_root().params.get("config") or "toolcards.yaml")

    @contextlib.contextmanager
    def open_it(host: str) -> Iterator[Dashboard]:
        try:
            runtime = SurfaceRuntime.open(path, with_team=True)
        except StoreLockedError as exc:
            hint = "serve MCP and the page together: toolcards serve --transport http --dashboard"
            raise _fail(f"{exc} ({hint})", ExitCode.FAILED) from None
        except Exception as exc:
            found = opening_error(exc, path)
            if found is None:
                raise
            raise _fail(*found) from None
        try:
            sign_in = first_sign_in(runtime.tokens, runtime.local)
            one_time = sign_in.tokens if sign_in.token is not None else None
            dash = dashboard_for(runtime, host=host, approvals_file=approvals, tokens=one_time)
            link = sign_in.link(f"http://{url_host(host)}:{port}{dash.base_path}/")
            if link is not None:
                typer.echo(f"sign in as {runtime.local.id} (once) at {link}", err=True)
            elif sign_in.problem is not None:
                typer.echo(f"warning: {sign_in.problem}", err=True)
            yield dash
        finally:
            runtime.close()

    return open_it


def _from_store(
    store: str, team_id: str | None, audit_path: Path | None
) -> Callable[[str], contextlib.AbstractContextManager[Dashboard]]:
    """A config-less dashboard of a team's store: one viewer, signed in with a token printed
    here (no approvals: nothing in this process waits for them)."""
    if not team_id:
        raise _fail("--store needs --team (the team id)", ExitCode.USAGE)
    try:
        where = StoreLocation.parse(store)
    except UnknownStoreScheme as exc:
        raise _fail(str(exc), ExitCode.USAGE) from None
    if where.path is not None and not where.path.exists():
        raise _fail(f"no store at {store}", ExitCode.USAGE)
    if audit_path is not None and not audit_path.exists():
        raise _fail(f"no audit log at {audit_path}", ExitCode.USAGE)

    @contextlib.contextmanager
    def open_it(host: str) -> Iterator[Dashboard]:
        try:  # to be looked at: nothing starts, nothing is written into its log
            team = Team.open_read_only(team_id, store)
        except (LookupError, StoreLockedError, StoreError) as exc:
            raise _fail(str(exc), ExitCode.FAILED) from None
        audit = None  # nor into its trail, whose hash chain is its writer's
        if audit_path is not None:
            try:
                audit = AuditLog(audit_path, team_id=team_id, read_only=True)
            except StoreError as exc:  # one that would have to be migrated, say
                team.stop()
                raise _fail(str(exc), ExitCode.FAILED) from None
        token = new_token()
        tokens = TokenTable.from_tokens([(token, Identity("local", "user", ["viewer"]))])
        typer.echo(f"sign in with this one-time token: {token}", err=True)
        try:
            yield Dashboard(team=team, audit=audit, tokens=tokens, host=host, one_time_tokens=True)
        finally:
            team.stop()
            if audit is not None:
                audit.close()

    return open_it
