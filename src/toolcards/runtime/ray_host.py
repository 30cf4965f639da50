"""The Ray actor class of a tool host, and how a team and its hosts know each other while the
team's key stays in the team's store.

Ray serves every function of an actor class as a method any driver of the cluster may call,
and adds built-in ones to every class (``__ray_call__`` runs any function inside the actor,
``__ray_ready__``, ``__ray_terminate__``). Ray builds the class it serves as a subclass of
the one it is given, so the metaclass of :class:`RayHost` replaces every function a subclass
defines by a refusal as the subclass is made; the host keeps its logic in collaborators, so
its only methods are its entries (``hello``, ``join``, ``call``, ``stop``); and a host whose
class has a method it does not know (a Ray that adds them some other way) refuses to start.

A host gets, when it is made, a verifier for its own namespace and name derived from the team
key (:class:`HostKey`, an HMAC: the key itself never travels). Before a team process sends a
host anything, it checks the host's class (Ray's method table) and sends a random challenge,
which only a host holding the verifier answers: a team never adopts an actor it did not
create. Every later call carries a ticket (a fresh nonce and its HMAC under the verifier,
bound to the entry and method it is for), which the host admits once.

This keeps teams from calling each other's hosts by mistake or by cross-talk. It is not a
boundary against code run on the cluster: Ray unpickles a call's arguments in the actor's
process before any entry runs (see ``docs/distributed.md``).
"""

from __future__ import annotations

import hashlib
import hmac
import inspect
import secrets
from collections import OrderedDict
from collections.abc import Callable
from typing import Any, NoReturn

from toolcards._lazy import optional_module
from toolcards.runtime.ray_fence import NodeFence

ENTRIES = ("hello", "join", "call", "stop")
"""The methods of a tool host a team calls; every other method Ray serves refuses."""

NONCE = 16
"""Bytes of a challenge and of a ticket's nonce."""

Ticket = tuple[bytes, bytes]
"""A call's proof of the team key: a fresh nonce and its HMAC under the host's verifier."""

REFUSED = "refused: this actor serves one team, and the call did not carry a ticket of its team key"


def _mac(secret: bytes, *parts: bytes) -> bytes:
    """HMAC-SHA256 of ``parts``, each length-prefixed (no two lists of parts read alike)."""
    message = b"".join(len(part).to_bytes(4, "big") + part for part in parts)
    return hmac.new(secret, message, hashlib.sha256).digest()


class HostKey:
    """The verifier of one tool host: an HMAC of the team key for the host's namespace and
    name. Team processes derive it from the key; the host is given it when it is made. With
    ``verifier=None`` (a system without a team key) hosts admit every call."""

    __slots__ = ("verifier",)

    def __init__(self, verifier: bytes | None) -> None:
        self.verifier = verifier

    @classmethod
    def derive(cls, team_key: str | None, namespace: str, name: str) -> HostKey:
        """The verifier of the host ``name`` in ``namespace`` under ``team_key``."""
        if team_key is None:
            return cls(None)
        parts = (b"toolcards ray host", namespace.encode(), name.encode())
        return cls(_mac(team_key.encode(), *parts))

    def answer(self, challenge: bytes) -> bytes:
        """The host's answer to ``challenge`` (empty without a verifier)."""
        return b"" if self.verifier is None else _mac(self.verifier, b"host", challenge)

    def proves(self, challenge: bytes, answer: object) -> bool:
        """Whether ``answer``, a host's answer to ``challenge``, shows it holds this verifier."""
        if self.verifier is None:
            return True
        return isinstance(answer, bytes) and hmac.compare_digest(answer, self.answer(challenge))

    def ticket(self, entry: str, method: str = "") -> Ticket | None:
        """A ticket for one call of ``entry`` (and the target's ``method``)."""
        if self.verifier is None:
            return None
        nonce = secrets.token_bytes(NONCE)
        return nonce, self._tag(nonce, entry, method)

    def _tag(self, nonce: bytes, entry: str, method: str) -> bytes:
        assert self.verifier is not None
        return _mac(self.verifier, b"ticket", nonce, entry.encode(), method.encode())

    def nonce_of(self, ticket: object, entry: str, method: str) -> bytes | None:
        """The nonce of ``ticket`` when it is a ticket of this verifier for the call."""
        if not (isinstance(ticket, tuple) and len(ticket) == 2):
            return None
        nonce, tag = ticket
        if not (isinstance(nonce, bytes) and len(nonce) == NONCE and isinstance(tag, bytes)):
            return None
        return nonce if hmac.compare_digest(tag, self._tag(nonce, entry, method)) else None


class Gate:
    """A host's side of its key: answers challenges, and admits each ticket once (it
    remembers the nonces of the last ``window`` calls)."""

    def __init__(self, key: HostKey, window: int = 4096) -> None:
        self._key = key
        self._window = window
        self._seen: OrderedDict[bytes, None] = OrderedDict()

    def answer(self, challenge: object) -> bytes:
        if not isinstance(challenge, bytes) or not NONCE <= len(challenge) <= 4 * NONCE:
            raise PermissionError(f"refused: a challenge is {NONCE} to {4 * NONCE} bytes")
        return self._key.answer(challenge)

    def admit(self, ticket: object, entry: str, method: object = "") -> None:
        """Return when ``ticket`` admits this call; PermissionError otherwise."""
        if self._key.verifier is None:
            return
        if not isinstance(method, str):
            raise PermissionError(REFUSED)
        nonce = self._key.nonce_of(ticket, entry, method)
        if nonce is None or nonce in self._seen:
            raise PermissionError(REFUSED)
        self._seen[nonce] = None
        if len(self._seen) > self._window:
            self._seen.popitem(last=False)


def _refusal(name: str) -> Callable[..., NoReturn]:
    def refused(self: object, *args: object, **kwargs: object) -> NoReturn:
        raise PermissionError(
            f"refused: {name} is not an entry of a toolcards tool host (Ray's built-in actor "
            "methods are closed on it)"
        )

    refused.__name__ = name
    return refused


_REFUSAL = _refusal("").__code__
"""The code of every refusal (equal, not identical, in a worker that unpickled the class)."""


class _ClosedSubclasses(type):
    """The metaclass of :class:`RayHost`: every function a subclass defines (Ray's class to
    serve defines its built-in methods) is replaced by a refusal as the subclass is made."""

    def __init__(cls, name: str, bases: tuple[type, ...], namespace: dict[str, Any]) -> None:
        super().__init__(name, bases, namespace)
        if not any(isinstance(base, _ClosedSubclasses) for base in bases):
            return  # RayHost itself
        for attr, value in namespace.items():
            if inspect.isfunction(value) or isinstance(value, (classmethod, staticmethod)):
                setattr(cls, attr, _refusal(attr))


def check_entries(cls: type) -> None:
    """RuntimeError unless every method of ``cls`` is an entry of :class:`RayHost` or a
    refusal (a method Ray may wrap, as its tracing does, is judged by what it wraps)."""
    own = {name: vars(RayHost)[name] for name in (*ENTRIES, "__init__")}
    for name in dir(cls):
        value = inspect.getattr_static(cls, name)
        if value is vars(object).get(name):
            continue
        func = value.__func__ if isinstance(value, (classmethod, staticmethod)) else value
        if isinstance(func, type) or not callable(func):
            continue
        func = inspect.unwrap(func)
        if getattr(func, "__code__", None) == _REFUSAL or own.get(name) is func:
            continue
        raise RuntimeError(
            f"the tool host class has a method toolcards does not know, {name!r:.80} (this "
            "Ray adds built-in actor methods in a way toolcards does not close): the host "
            "refuses to start"
        )


def host_class_problem(methods: set[str]) -> str | None:
    """Why an actor whose Ray method table is ``methods`` is not a tool host, or None."""
    missing = sorted(set(ENTRIES) - methods)
    if missing:
        return f"it has no {', '.join(missing)} method"
    if any(not m.startswith("__ray_") for m in methods - {*ENTRIES, "__init__"}):
        return "it has methods a tool host does not have"
    return None


class RayHost(metaclass=_ClosedSubclasses):
    """The Ray actor class of a tool host: runs one target object built by a picklable
    factory, on behalf of the team whose key the ``verifier`` was derived from.

    A :class:`NodeFence` stops the worker once its node is lost, so a restarted copy
    elsewhere is the only one serving.
    """

    def __init__(
        self, factory: Callable[[], Any], verifier: bytes | None = None, name: str = "?"
    ) -> None:
        check_entries(type(self))
        self._gate = Gate(HostKey(verifier))
        self.target: Any = None
        self.start_error: BaseException | None = None
        self._joined = False
        self._fence = NodeFence(name).watch()
        try:
            self.target = factory()
            hook = getattr(self.target, "on_start", None)
            if hook is not None:
                hook()
        except Exception as exc:
            self.start_error = exc

    def hello(self, challenge: bytes) -> bytes:
        """The answer to a team's challenge: only a host given the team's verifier makes it."""
        self._fence.check()
        return self._gate.answer(challenge)

    def join(self, ticket: Ticket | None = None) -> tuple[BaseException | None, bool]:
        """The start error, if any, and whether this is the first join (the spawn that
        started this actor; later ones joined it, from this or another process)."""
        self._fence.check()
        self._gate.admit(ticket, "join")
        first = not self._joined
        self._joined = True
        return self.start_error, first

    def call(
        self, ticket: Ticket | None, method: str, args: tuple[Any, ...], kw: dict[str, Any]
    ) -> Any:
        self._fence.check()
        self._gate.admit(ticket, "call", method)
        if method.startswith("_"):
            raise AttributeError(f"actor does not expose {method!r}")
        return getattr(self.target, method)(*args, **kw)

    def stop(self, ticket: Ticket | None = None) -> None:
        self._fence.check()
        self._gate.admit(ticket, "stop")
        try:
            hook = getattr(self.target, "on_stop", None)
            if hook is not None and self.start_error is None:
                hook()
        finally:
            self._fence.close()
            optional_module("ray", "ray", "the Ray actor system").actor.exit_actor()
