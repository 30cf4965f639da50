"""The dashboard web app (Starlette): server-rendered panels, live updates, the approvals inbox.

::

    dash = Dashboard(team=team, audit=audit, approvals=broker, tokens=runtime.tokens)
    app = dash.app()                     # an ASGI app; serve it with uvicorn

Routes, each under the dashboard's secret :attr:`~Dashboard.base_path` (every other path
is a plain 404, which names no path): ``/`` (every panel), ``/login`` and ``/logout``,
``/panel/<name>`` (one panel's HTML, for live refresh), ``/events`` (Server-Sent Events),
``/approvals/<id>`` (one pending request in full), ``POST /approvals/<id>/grant|deny`` (a
grant may be remembered for later calls), ``POST /grants/<id>/revoke`` and ``/static/...``.
Everything but the sign-in page and static assets needs a session, whose cookie is scoped to
the base path (:mod:`.sessions` says why another server of this machine must not get it).
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

import anyio
from sse_starlette import EventSourceResponse

from toolcards.governance.audit.log import AuditRecord, made_by

try:
    import sse_starlette  # noqa: F401 - the event stream, imported where it is served
    import uvicorn  # noqa: F401 - the server, imported where it runs
    from jinja2 import ChoiceLoader, DictLoader, Environment, FileSystemLoader, StrictUndefined
    from markupsafe import Markup
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import HTMLResponse, JSONResponse, RedirectResponse, Response
    from starlette.routing import Mount, Route
    from starlette.staticfiles import StaticFiles
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        f"the dashboard needs {exc.name}: pip install 'toolcards[dashboard]'"
    ) from exc

from toolcards.core.identity import Identity
from toolcards.core.registry import registered_views
from toolcards.core.views import CardView, TeamView
from toolcards.governance.approvals.view import escape_hidden, escape_text, is_approver
from toolcards.governance.redaction.redactor import DEFAULT_REDACTOR, Redactor, canonical_json
from toolcards.surfaces.dashboard import views
from toolcards.surfaces.dashboard.filters import FILTERS
from toolcards.surfaces.dashboard.inbox import (
    BINDING,
    Decided,
    decide_shown,
    read_decision,
    remember_of,
    revoke_grant,
)
from toolcards.surfaces.dashboard.live import LiveHub
from toolcards.surfaces.dashboard.security import BodyGate, SecurityHeaders, host_name
from toolcards.surfaces.dashboard.sessions import (
    DEFAULT_VIEWER_ROLES,
    LOGIN_COOKIE,
    SESSION_COOKIE,
    Session,
    Sessions,
    SignInRefused,
    secret_path,
)
from toolcards.surfaces.dashboard.throttle import SignInThrottle
from toolcards.surfaces.http.limits import HttpLimits
from toolcards.surfaces.http.ports import local_names
from toolcards.surfaces.http.tokens import TokenTable

if TYPE_CHECKING:
    from toolcards.governance.approvals.broker import ApprovalBroker
    from toolcards.governance.audit.log import AuditLog
    from toolcards.governance.executor.budget import BudgetLine
    from toolcards.runtime.team import Team

log = logging.getLogger(__name__)

HERE = Path(__file__).parent
MAX_FORM = 64 * 1024
PANELS = {
    "team": "Team",
    "approvals": "Approvals",
    "budgets": "Budgets",
    "audit": "Audit",
    "events": "Live",
}
"""The dashboard's own panels and their titles; cards add theirs (views with a panel: see
core.views)."""
UNREADABLE: dict[str, Any] = {"available": False}
"""The data of a panel whose reader raised (see :meth:`Dashboard._guarded`)."""
SURFACE = "dashboard"


class Dashboard:
    """The dashboard of one team: its audit log, its approval broker and who may sign in.

    ``tokens`` are the surfaces config's principals; a principal holding one of
    ``viewer_roles`` may sign in, and one holding the broker's approver role may decide.
    ``host`` is what the server binds: when that is a loopback address, requests for other host
    names than ``host`` and that address are refused (DNS rebinding). Any part may be None: its
    panel says so.

    An approver sees the exact arguments of a pending call (hidden characters escaped);
    anyone else sees them redacted. The plan and the live events are redacted for everyone
    with ``redactor`` (default: the team policy's). ``policy_error`` says why the policy file
    does not load (None while it does): the page then shows it in a banner. ``budgets``
    reports what the team's budgets spent and have left (the Budgets panel).

    Every route and cookie is under ``base_path`` (a new random one unless given): build URLs
    from :attr:`base_path` (``dash.app().base_path`` too; :class:`BackgroundServer` puts it
    in its ``url``), and give the link only to whoever should sign in.
    """

    def __init__(
        self,
        *,
        tokens: TokenTable,
        team: Team | None = None,
        audit: AuditLog | None = None,
        approvals: ApprovalBroker | None = None,
        viewer_roles: Iterable[str] = DEFAULT_VIEWER_ROLES,
        host: str = "127.0.0.1",
        title: str | None = None,
        redactor: Redactor | None = None,
        limits: HttpLimits | None = None,
        one_time_tokens: bool = False,
        throttle: SignInThrottle | None = None,
        policy_error: Callable[[], str | None] | None = None,
        views: Iterable[CardView] | None = None,
        budgets: Callable[[], list[BudgetLine]] | None = None,
        base_path: str | None = None,
    ) -> None:
        self.team = team
        known = registered_views() if views is None else views
        self.panels: dict[str, TeamView] = {
            cv.view.panel_id: cv.view for cv in known if cv.view.panel is not None
        }
        """The cards' panels by id (a dashboard given no views shows every known card's)."""
        self.audit = audit
        self.approvals = approvals
        self.redactor = redactor or _team_redactor(team)
        self.sessions = Sessions(tokens, viewer_roles=viewer_roles, one_time=one_time_tokens)
        self.limits = limits or HttpLimits()
        self.throttle = throttle or SignInThrottle()
        self.policy_error = policy_error or _no_error
        self.budgets = budgets
        self.hub = LiveHub(team, approvals, self.redactor)
        self.host = host
        self.base_path = secret_path(base_path)
        """The secret path every route and cookie is under (``/`` and 22 random characters)."""
        self.title = title or (f"team {team.team_id}" if team is not None else "toolcards")
        card_templates = {
            f"views/{key}.html": view.panel.template
            for key, view in self.panels.items()
            if view.panel is not None
        }
        self.templates = Environment(
            loader=ChoiceLoader([FileSystemLoader(HERE / "templates"), DictLoader(card_templates)]),
            autoescape=True,
            undefined=StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.templates.filters.update(FILTERS)  # and what an approver reads, escaped:
        self.templates.filters.update(shown=escape_text, escaped=escape_hidden)  # text, JSON
        self.templates.globals["base"] = self.base_path  # every link, form, script and stream
        self._app: SecurityHeaders | None = None

    # -- the ASGI app ----------------------------------------------------------------------

    def app(self) -> Any:
        """The ASGI app (built once): routes under :attr:`base_path` behind the
        security-headers middleware, whose ``base_path`` says where they are, and the body
        gate (:class:`.security.BodyGate`): no stranger's body is read but the sign-in form's."""
        if self._app is None:
            routes = [
                Route("/", self.index),
                Route("/login", self.login_form, methods=["GET"]),
                Route("/login", self.login, methods=["POST"]),
                Route("/logout", self.logout, methods=["POST"]),
                Route("/panel/{name}", self.panel),
                Route("/events", self.events),
                Route("/approvals/{approval_id}", self.approval_page, methods=["GET"]),
                Route("/approvals/{approval_id}/{decision}", self.decide, methods=["POST"]),
                Route("/static/views/{name}.js", self.panel_script),
                Route("/grants/{grant_id}/revoke", self.revoke, methods=["POST"]),
                Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
            ]
            mounted = Mount(self.base_path, routes=routes)  # anything else: a plain 404
            hosts = local_names(self.host)
            gated = BodyGate(
                Starlette(routes=[mounted], lifespan=self.lifespan),
                limits=self.limits,
                base_path=self.base_path,
                sign_in=self.base_path + "/login",
                form_cap=MAX_FORM,
                signed_in=self._signed_in,
            )
            self._app = SecurityHeaders(gated, allowed_hosts=hosts, base_path=self.base_path)
        return self._app

    def _signed_in(self, scope: Any) -> bool:
        """Whether a request's cookie names a live session (read from its headers alone)."""
        return self._session(Request(scope)) is not None

    @contextlib.asynccontextmanager
    async def lifespan(self, _app: Any = None) -> AsyncIterator[None]:
        """Starts the live hub (team subscription, approval watcher) and stops it."""
        await self.hub.start()
        try:
            yield
        finally:
            await self.hub.stop()

    # -- pages -----------------------------------------------------------------------------

    def render(self, name: str, status: int = 200, **context: Any) -> HTMLResponse:
        return HTMLResponse(self._html(name, context), status_code=status)

    def _context(self, session: Session, params: dict[str, str]) -> dict[str, Any]:
        """Every panel's data (blocking: run in a worker thread); ``unreadable`` names the
        panels that could not be read."""
        own = {name: self._guarded(name, params, session) for name in PANELS}
        cards = {key: self._guarded(key, params, session) for key in self.panels}
        unreadable = [name for name, data in (own | cards).items() if data is UNREADABLE]
        listed = [
            {"key": key, "title": view.panel.title, "watch": " ".join(view.watch),
             "wide": view.panel.wide, "script": bool(view.panel.script)}
            for key, view in self.panels.items() if view.panel is not None
        ]  # fmt: skip
        shown = {"card_panels": listed, "card_data": cards, "unreadable": unreadable}
        return own | shown | self._who(session)

    def _guarded(self, name: str, params: dict[str, str], session: Session) -> Any:
        """A panel's data, or :data:`UNREADABLE` when its reader raises: a stored row no
        reader expected (left by another writer or an older version) is logged and costs
        that one panel, never the page and the approvals inbox on it."""
        try:
            return self._panel_data(name, params, session)
        except Exception:
            log.exception("the %s panel could not be read", name)
            return UNREADABLE

    def _card_panel(self, key: str, params: dict[str, str]) -> Any:
        """A card panel's data: its view read from the team (redacted for everyone)."""
        if self.team is None:
            return {"available": False}
        data = self.panels[key].read(self.team, {}, (params.get("q") or "").strip())
        return self.redactor.value(data)

    def _panel_data(self, name: str, params: dict[str, str], session: Session) -> Any:
        if name in self.panels:
            return self._card_panel(name, params)
        if name == "team":
            return views.team_view(self.team)
        if name == "approvals":
            return views.approvals_view(self.approvals, exact=self._can_approve(session))
        if name == "audit":
            return views.audit_view(self.audit, views.AuditFilters.from_query(params))
        if name == "budgets":
            return views.budgets_view(self.budgets)
        return views.events_view(self.team, redactor=self.redactor)

    def _can_approve(self, session: Session) -> bool:
        broker = self.approvals
        return broker is not None and is_approver(session.identity, broker.approver_role)

    def _who(self, session: Session) -> dict[str, Any]:
        identity = session.identity
        return {
            "identity": identity,
            "roles": ", ".join(sorted(identity.roles)),
            "can_approve": self._can_approve(session),
            "csrf": session.csrf,
            "policy_error": self.policy_error(),
        }

    async def index(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return self._redirect("/login")
        params = dict(request.query_params)
        context = await anyio.to_thread.run_sync(self._context, session, params)
        found = {name: context[name] for name in PANELS} | context["card_data"]
        shown = {name: self._shown(name, data, context) for name, data in found.items()}
        return self.render("index.html", shown=shown, **context)

    async def panel(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return _text("sign in first", 401)
        name = request.path_params["name"]
        if name not in PANELS and name not in self.panels:
            return _text("no such panel", 404)
        params = dict(request.query_params)
        data = await anyio.to_thread.run_sync(self._guarded, name, params, session)
        return HTMLResponse(self._shown(name, data, self._who(session)))

    def _shown(self, name: str, data: Any, context: dict[str, Any]) -> Markup:
        """A panel's HTML, or the unreadable panel's when its data could not be read or does
        not render: a stored value no template expected (an event time of 1e300) costs that
        panel, never the page and the approvals inbox on it."""
        own = {"view": data} if name in self.panels else {name: data}
        template = f"views/{name}.html" if name in self.panels else f"panels/{name}.html"
        if data is not UNREADABLE:
            try:
                return self._html(template, context | own)
            except Exception:
                log.exception("the %s panel could not be shown", name)
        view = self.panels.get(name)
        title = view.panel.title if view is not None and view.panel else PANELS[name]
        return self._html("panels/unreadable.html", {"panel_title": title})

    def _html(self, name: str, context: dict[str, Any]) -> Markup:
        return Markup(self.templates.get_template(name).render({"title": self.title} | context))

    async def panel_script(self, request: Request) -> Response:
        """The script a card's panel needs (served like the dashboard's own static files)."""
        view = self.panels.get(request.path_params["name"])
        if view is None or view.panel is None or not view.panel.script:
            return _text("not found", 404)
        return Response(view.panel.script, media_type="text/javascript")

    async def approval_page(self, request: Request) -> Response:
        """One pending request with its arguments whole ("open in full"): exact for an
        approver, who may decide it here; redacted for anyone else."""
        session = self._session(request)
        if session is None:
            return self._redirect("/login")
        found = await anyio.to_thread.run_sync(
            lambda: views.one_approval_view(
                self.approvals,
                request.path_params["approval_id"],
                exact=self._can_approve(session),
            )
        )
        if found is None:
            message = "No such pending request: it was decided, withdrawn or expired."
            return self.render("error.html", 404, message=message, **self._who(session))
        return self.render("approval.html", approval=found, **self._who(session))

    def _redirect(self, path: str) -> Response:
        """A 303 to ``path`` of this dashboard (under its base path)."""
        return RedirectResponse(self.base_path + path, status_code=303)

    # -- sign-in ---------------------------------------------------------------------------

    def _session(self, request: Request) -> Session | None:
        return self.sessions.get(request.cookies.get(SESSION_COOKIE))

    def _login_page(self, status: int = 200, error: str | None = None) -> Response:
        nonce, token = self.sessions.new_nonce()
        response = self.render("login.html", status, csrf=token, error=error)
        response.set_cookie(
            LOGIN_COOKIE,
            nonce,
            max_age=600,
            path=self.base_path + "/login",
            httponly=True,
            samesite="strict",
        )
        return response

    async def login_form(self, request: Request) -> Response:
        if self._session(request) is not None:
            return self._redirect("/")
        return self._login_page()

    async def login(self, request: Request) -> Response:
        address = request.client.host if request.client is not None else ""
        wait = self.throttle.retry_after(address)
        if wait is not None:
            response = self._login_page(429, f"Too many failed sign-ins: retry in {wait} s.")
            response.headers["retry-after"] = str(wait)
            return response
        form = await _form(request)
        if not _same_origin(request) or not self.sessions.nonce_ok(
            request.cookies.get(LOGIN_COOKIE), form.get("csrf")
        ):
            return self._login_page(403, "The sign-in form expired; please try again.")
        try:
            session = self.sessions.sign_in(form.get("token", ""))
        except SignInRefused as exc:
            if exc.status == 401:
                self.throttle.failed(address)
            self._audit_sign_in(exc.identity, str(exc))
            return self._login_page(exc.status, str(exc))
        self.throttle.succeeded(address)
        self._audit_sign_in(session.identity, None)
        response = self._redirect("/")
        response.set_cookie(
            SESSION_COOKIE,
            session.id,
            max_age=int(self.sessions.max_age),
            path=self.base_path,  # never sent to another port's server: it knows no such path
            httponly=True,
            samesite="strict",
            secure=request.url.scheme == "https",
        )
        response.delete_cookie(LOGIN_COOKIE, path=self.base_path + "/login")
        return response

    async def logout(self, request: Request) -> Response:
        session = self._session(request)
        form = await _form(request)
        if session is not None:
            if not self._csrf_ok(request, session, form):
                return _text("missing or wrong CSRF token", 403)
            self.sessions.close(session.id)
        response = self._redirect("/login")
        response.delete_cookie(SESSION_COOKIE, path=self.base_path)
        return response

    def _audit_sign_in(self, identity: Identity | None, refused: str | None) -> None:
        """A sign-in, in the process log, and in the audit trail where this dashboard writes
        it: not a read-only one (``dashboard --store``), whose chain is its writer's."""
        who = identity.id if identity else "anonymous"
        log.info("dashboard sign-in by %r: %s", who, refused or "signed in")
        if self.audit is None or self.audit.read_only:
            return
        self.audit.record(
            AuditRecord(
                time.time(),
                *made_by(identity),
                surface=SURFACE,
                tool="dashboard.sign_in",
                call_id=None,
                args={},
                decision="deny" if refused else "allow",
                outcome="denied" if refused else "ok",
                reason=refused,
            )
        )

    def _csrf_ok(self, request: Request, session: Session, form: dict[str, str]) -> bool:
        presented = form.get("csrf") or request.headers.get("x-csrf-token")
        return _same_origin(request) and self.sessions.csrf_ok(session, presented)

    # -- live ------------------------------------------------------------------------------

    async def events(self, request: Request) -> Response:
        if self._session(request) is None:
            return _text("sign in first", 401)

        since = views.whole_number(request.query_params.get("since", ""))  # else: from now

        async def messages() -> AsyncIterator[dict[str, str]]:
            async for kind, data in self.hub.stream(since):
                if self._session(request) is None:  # signed out, pushed out or expired since
                    return
                yield {"event": kind, "data": json.dumps(data, ensure_ascii=False)}

        return EventSourceResponse(messages(), ping=15, send_timeout=30)

    # -- approvals -------------------------------------------------------------------------

    async def decide(self, request: Request) -> Response:
        session = self._session(request)
        if session is None:
            return _text("sign in first", 401)
        wants_json = "application/json" in request.headers.get("accept", "")
        form, edit, bad = await read_decision(request, MAX_FORM, _form)  # edit: a grant's args
        if not self._csrf_ok(request, session, form):
            return _text("missing or wrong CSRF token", 403)
        decision = request.path_params["decision"]
        if decision not in ("grant", "deny") or self.approvals is None:
            return _text("no such action", 404)
        shown = tuple(form.get(k, "") for k in BINDING)
        remember, unreadable = remember_of(form) if decision == "grant" else (None, None)
        bad = bad or unreadable
        decided = (
            Decided(422, bad)
            if bad is not None
            else await anyio.to_thread.run_sync(
                decide_shown,
                self.approvals,
                session.identity,
                request.path_params["approval_id"],
                shown,
                decision == "grant",
                edit,
                remember,
            )
        )
        status, message = decided.status, decided.message
        if wants_json:
            answer: dict[str, Any] = {"ok": status == 200, "message": message}
            if decided.runs is not None:
                answer |= {"runs": decided.runs, "approved_args_digest": decided.runs_digest}
            if decided.grant is not None:
                answer["grant"] = decided.grant
            return JSONResponse(answer, status_code=status)
        if status == 200 and decided.grant is not None:  # the grant, exactly as it will match
            return self.render("remembered.html", message=message, grant=decided.grant,
                               **self._who(session))  # fmt: skip
        if status == 200 and decided.runs is not None:  # what will run, shown whole
            pieces = escape_hidden(canonical_json(decided.runs))
            context: dict[str, Any] = {"message": message, "digest": decided.runs_digest}
            return self.render("granted_edit.html", pieces=pieces, **context, **self._who(session))
        if status == 200:
            return self._redirect("/#approvals")
        return self.render("error.html", status, message=message, **self._who(session))

    async def revoke(self, request: Request) -> Response:
        """Revoke a grant (an approver's, checked and audited by the broker)."""
        session = self._session(request)
        if session is None:
            return _text("sign in first", 401)
        form = await _form(request)
        if not self._csrf_ok(request, session, form):
            return _text("missing or wrong CSRF token", 403)
        if self.approvals is None:
            return _text("no such action", 404)
        decided = await anyio.to_thread.run_sync(
            revoke_grant, self.approvals, session.identity, request.path_params["grant_id"]
        )
        if "application/json" in request.headers.get("accept", ""):
            answer = {"ok": decided.status == 200, "message": decided.message}
            return JSONResponse(answer, status_code=decided.status)
        if decided.status == 200:
            return self._redirect("/#approvals")
        return self.render("error.html", decided.status, message=decided.message,
                           **self._who(session))  # fmt: skip


async def _form(request: Request) -> dict[str, str]:
    """A url-encoded form body (bounded); the first value of each field."""
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_FORM:
            return {}
    try:
        parsed = parse_qs(body.decode("utf-8"), keep_blank_values=True, max_num_fields=50)
    except (UnicodeDecodeError, ValueError):
        return {}
    return {k: v[0] for k, v in parsed.items()}


def _same_origin(request: Request) -> bool:
    """False for a request a browser marks as sent from another origin."""
    if request.headers.get("sec-fetch-site", "same-origin") not in ("same-origin", "none"):
        return False
    origin = request.headers.get("origin")
    if origin is None or origin == "null":
        return origin is None
    host = request.headers.get("host", "")
    return urlsplit(origin).netloc.lower() == host.lower() and bool(host_name(host))


def _text(message: str, status: int) -> Response:
    return Response(message + "\n", status_code=status, media_type="text/plain")


def _team_redactor(team: Team | None) -> Redactor:
    policy = getattr(team, "policy", None)
    redaction = getattr(policy, "redaction", None)
    return redaction if isinstance(redaction, Redactor) else DEFAULT_REDACTOR


def _no_error() -> str | None:
    return None
