"""MCP resources: list, templates, read, subscribe (see :mod:`.resource_sources` for what is
offered). Each resource is governed like a tool, with the policy target ``resource:<uri>``:
listings show what the caller may read, a read is decided and audited, and a resource the
caller may not read is reported exactly like one that does not exist (no existence leak). A
resource of a card's team state (the board, the graph) needs the card's read rule besides
(:func:`toolcards.governance.card_reads.may_read_card`), as the card's prompt does.
``resources/subscribe`` sends ``notifications/resources/updated`` when the team's events
touch the resource; subscribing to a URI a read would answer with not-found is refused the
same way (``-32002``). A subscription is kept under the resource's canonical URI (the one
its notifications name) with the team actors whose events change it, recorded when it is made
(an event never looks a resource up); at most
:data:`~.listening.MAX_URIS` per session, until the session ends, and for the last
:data:`MAX_SUBSCRIBED_SESSIONS` sessions that subscribed. A URI longer than :data:`MAX_URI` is
not found, before anything is decided or audited. A lookup (a read, a subscription) never
lists a workspace: a workspace file is found by its workspace's template; only
``resources/list`` lists the files. ``subscriptions/listen`` (2026-07-28) is :mod:`.listening`.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import anyio
import mcp.types as types
from anyio.abc import TaskGroup
from mcp.shared.exceptions import MCPError
from mcp.types.jsonrpc import INVALID_PARAMS

import toolcards.surfaces.mcp_server.resource_sources as res
from toolcards.core.identity import Identity
from toolcards.governance.policy.policy import Decision
from toolcards.surfaces.mcp_server.audit_rows import record
from toolcards.surfaces.mcp_server.listening import MAX_URIS, Listening, Watched
from toolcards.surfaces.mcp_server.options import MCPOptions
from toolcards.surfaces.mcp_server.spawner import Spawner
from toolcards.surfaces.runtime import SurfaceRuntime

log = logging.getLogger(__name__)

RESOURCE_NOT_FOUND = -32002
MAX_SUBSCRIBED_SESSIONS = 1024
"""Sessions whose subscriptions are kept: past it, the longest-standing session's are
forgotten (a session's end forgets its own, when its connection tells its end)."""
MAX_URI = 4096
"""The longest resource URI there is: a longer one is not looked up, decided or audited."""
Source = res.StaticResource | res.TemplateResource


class Found(NamedTuple):
    """The resource a URI names: its source, its canonical URI (what the policy decides on),
    its reader and its MIME type."""

    source: Source
    uri: str
    read: Callable[[], res.Content]
    mime_type: str


def decide(runtime: SurfaceRuntime, who: Identity, target: str) -> Decision:
    """The policy's decision; an approval-required read is refused (nobody to ask)."""
    decision = runtime.policy.decide(who, target, {})
    if decision.effect == "approve":
        return Decision("deny", "approval is not available for reads")
    return decision


class ResourceCatalog:
    def __init__(
        self,
        runtime: SurfaceRuntime,
        options: MCPOptions,
        identity_of: Callable[[Any], Identity],
    ) -> None:
        self.runtime = runtime
        self.options = options
        self.identity_of = identity_of
        self._subs: dict[int, tuple[Any, dict[str, tuple[str, ...]]]] = {}
        """By connection: its session and its subscriptions (canonical URI: watched actors)."""
        self._lock = threading.Lock()
        self.listening = Listening(self, identity_of)

    def handlers(self) -> dict[str, Any]:
        return {
            "on_list_resources": self._list,
            "on_list_resource_templates": self._templates,
            "on_read_resource": self._read,
            "on_subscribe_resource": self._subscribe,
            "on_unsubscribe_resource": self._unsubscribe,
            "on_subscriptions_listen": self.listening.listen,
        }

    def sources(self) -> list[Source]:
        """The resources and templates offered, a workspace's files only by its template (no
        workspace is listed)."""
        rt = self.runtime
        found: list[Source] = [*res.team_resources(rt, self.options.views)]
        found += [*res.audit_resource(rt), *res.workspace_templates(rt), *self.options.resources]
        return found

    def listed(self) -> list[Source]:
        """:meth:`sources` and the listed files of each workspace (``resources/list``)."""
        return [*self.sources(), *res.workspace_files(self.runtime)]

    def visible(self, who: Identity, source: Source, uri: str | None = None) -> bool:
        """Whether listings show ``who`` the resource ``uri`` of ``source`` (default: its
        URI, or its template's)."""
        if uri is None:
            uri = source.uri if isinstance(source, res.StaticResource) else source.uri_template
        return self.runtime.policy.visible(who, f"resource:{uri}") and self.readable(who, source)

    def readable(self, who: Identity, source: Source) -> bool:
        """Whether ``who`` may read ``source`` beside its ``resource:`` decision: the team
        state of a card only with one of the card's tools or the read right on the card."""
        return source.may(who)

    def decide(self, who: Identity, target: str, source: Source | None) -> Decision:
        """The decision on reading ``source`` (None: not found) at ``target``."""
        decision = decide(self.runtime, who, target)
        if decision.effect == "allow" and source is not None and not self.readable(who, source):
            return Decision("deny", f"{who.id} may not read the card's state it shows")
        return decision

    # -- listing ------------------------------------------------------------------------------

    async def _list(self, ctx: Any, _params: Any) -> types.ListResourcesResult:
        who = self.identity_of(ctx)
        sources = await anyio.to_thread.run_sync(self.listed)
        listed = [
            types.Resource(uri=s.uri, name=s.name, description=s.description, mime_type=s.mime_type)
            for s in sources
            if isinstance(s, res.StaticResource) and self.visible(who, s)
        ]
        return types.ListResourcesResult(resources=listed)

    async def _templates(self, ctx: Any, _params: Any) -> types.ListResourceTemplatesResult:
        who = self.identity_of(ctx)
        sources = await anyio.to_thread.run_sync(self.sources)
        listed = [
            types.ResourceTemplate(
                uri_template=s.uri_template,
                name=s.name,
                description=s.description,
                mime_type=s.mime_type,
            )
            for s in sources
            if isinstance(s, res.TemplateResource) and self.visible(who, s)
        ]
        return types.ListResourceTemplatesResult(resource_templates=listed)

    # -- reading ------------------------------------------------------------------------------

    def find(self, uri: str) -> Found | None:
        """The resource ``uri`` names; None when there is none, or its template's reader would
        refuse the URI."""
        if len(uri) > MAX_URI:
            return None
        templates = []
        for source in self.sources():
            if isinstance(source, res.StaticResource):
                if source.uri == uri:
                    return Found(source, uri, source.read, source.mime_type)
            else:
                templates.append(source)
        for template in templates:
            variables = template.match(uri)
            if variables is not None:
                try:
                    canonical, values = template.canonical(variables)
                except res.ResourceNotFound:
                    return None
                read = functools.partial(template.read, values)
                return Found(template, canonical, read, template.mime(values))
        return None

    def _target(self, uri: str) -> tuple[str, Found | None]:
        """The policy target of ``uri`` (its canonical URI) and the resource, if any."""
        found = self.find(uri)
        return f"resource:{uri if found is None else found.uri}", found

    def _read_now(self, who: Identity, uri: str) -> tuple[Found, res.Content]:
        if len(uri) > MAX_URI:
            raise res.ResourceNotFound("the URI is too long")
        started = time.perf_counter()
        target, found = self._target(uri)
        decision = self.decide(who, target, None if found is None else found.source)
        executor = self.runtime.executor
        if decision.effect != "allow":
            record(executor, target, {}, who, surface="mcp", outcome="denied",
                   started=started, decision=decision)  # fmt: skip
            raise res.ResourceNotFound(uri)
        if found is None:
            record(executor, target, {}, who, surface="mcp", outcome="not_found",
                   started=started, decision=decision)  # fmt: skip
            raise res.ResourceNotFound(uri)
        try:
            content = found.read()
        except res.ResourceNotFound:
            record(executor, target, {}, who, surface="mcp", outcome="not_found",
                   started=started, decision=decision)  # fmt: skip
            raise
        except Exception as exc:
            record(executor, target, {}, who, surface="mcp", outcome="error", started=started,
                   decision=decision, error=f"{type(exc).__name__}: {exc}")  # fmt: skip
            raise
        record(executor, target, {}, who, surface="mcp", outcome="ok", started=started,
               decision=decision)  # fmt: skip
        return found, content

    async def _read(self, ctx: Any, params: types.ReadResourceRequestParams) -> Any:
        who = self.identity_of(ctx)
        uri = str(params.uri)
        try:
            found, content = await anyio.to_thread.run_sync(self._read_now, who, uri)
        except res.ResourceNotFound:
            raise MCPError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri}) from None
        except Exception as exc:  # its type only (its row has the redacted text)
            log.error("reading resource %s failed (%s)", uri, type(exc).__name__)
            raise MCPError(-32603, f"reading {uri} failed") from None
        mime = found.mime_type
        item: types.TextResourceContents | types.BlobResourceContents
        if isinstance(content, bytes):
            blob = base64.b64encode(content).decode("ascii")
            item = types.BlobResourceContents(uri=uri, blob=blob, mime_type=mime)
        else:
            if mime == "application/octet-stream":
                mime = "text/plain"
            item = types.TextResourceContents(uri=uri, text=content, mime_type=mime)
        return types.ReadResourceResult(contents=[item])

    # -- subscriptions ------------------------------------------------------------------------

    def subscribable(self, who: Identity, uri: str) -> Watched | None:
        """What a subscription of ``who`` to ``uri`` watches, when ``who`` may read the
        resource it names (one a read would not answer with not-found: a template's reader is
        asked); else None."""
        target, found = self._target(uri)
        if found is None or self.decide(who, target, found.source).effect != "allow":
            return None
        if isinstance(found.source, res.TemplateResource):
            try:
                found.read()
            except res.ResourceNotFound:
                return None
            except Exception:  # it exists; reading it fails for another reason
                log.warning("reading %s to subscribe to it failed", uri, exc_info=True)
        return Watched(found.uri, found.source.watch, found.read)

    def _canonical(self, uri: str) -> str:
        found = self.find(uri)
        return uri if found is None else found.uri

    async def _subscribe(self, ctx: Any, params: types.SubscribeRequestParams) -> Any:
        who = self.identity_of(ctx)
        uri = str(params.uri)
        watched = await anyio.to_thread.run_sync(self.subscribable, who, uri)
        if watched is None:
            raise MCPError(RESOURCE_NOT_FOUND, "Resource not found", {"uri": uri})
        connection = _connection(ctx.session)
        key = id(connection)
        with self._lock:
            entry = self._subs.get(key)
            if entry is None:
                if len(self._subs) >= MAX_SUBSCRIBED_SESSIONS:
                    del self._subs[next(iter(self._subs))]
                entry = self._subs[key] = (ctx.session, {})
                ends = getattr(connection, "exit_stack", None)  # the SDK's per-connection teardown
                if ends is not None:
                    ends.callback(self._forget, key)
            if watched.uri not in entry[1] and len(entry[1]) >= MAX_URIS:
                raise MCPError(
                    INVALID_PARAMS,
                    f"at most {MAX_URIS} subscribed resources per session: unsubscribe from one",
                )
            entry[1][watched.uri] = watched.watch
        return types.EmptyResult()

    async def _unsubscribe(self, ctx: Any, params: types.UnsubscribeRequestParams) -> Any:
        key = id(_connection(ctx.session))
        canonical = await anyio.to_thread.run_sync(self._canonical, str(params.uri))
        with self._lock:
            entry = self._subs.get(key)
            if entry is not None:
                entry[1].pop(canonical, None)
        return types.EmptyResult()

    def _forget(self, key: int) -> None:
        """Drop the subscriptions of the connection ``key`` (it ended)."""
        with self._lock:
            self._subs.pop(key, None)

    def _watchers(self, actor: str) -> list[tuple[Any, str]]:
        """(session, uri) pairs whose resource the events of ``actor`` change."""
        with self._lock:
            return [
                (session, uri)
                for session, uris in self._subs.values()
                for uri, watch in uris.items()
                if actor in watch
            ]

    @contextlib.contextmanager
    def watching(self, tasks: TaskGroup) -> Iterator[None]:
        """Forward the team's live events as ``resources/updated`` while the server runs (and
        poll the listened resources no event announces)."""
        tasks.start_soon(self.listening.poll, tasks)
        team = self.runtime.team
        if team is None:
            yield
            return
        spawner = Spawner(tasks)

        async def notify(actor: str) -> None:
            for session, uri in self._watchers(actor):
                try:
                    await session.send_resource_updated(uri)
                except Exception:  # the connection is gone: forget its subscriptions
                    self._forget(id(_connection(session)))

        def on_event(event: Any) -> None:
            if self._subs:
                spawner.spawn(notify, event.tool_id)
            if self.listening.listened():
                spawner.spawn(self.listening.changed, event.tool_id)

        sub = team.subscribe(on_event, since=team.log.position)
        try:
            yield
        finally:
            sub.close()
            spawner.close()


def _connection(session: Any) -> Any:
    """The client connection a session object (one per request) speaks for."""
    return getattr(session, "_connection", session)
