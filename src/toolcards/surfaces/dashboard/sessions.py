"""Dashboard sign-in: a bearer token of the surfaces config is exchanged once for a session.

The session id travels in an HttpOnly, SameSite=Strict cookie; the server keeps the identity
and a CSRF token per session (in memory: a restart signs everyone out). Every state-changing
request must carry that CSRF token. The sign-in form itself is protected by a signed nonce
kept in a short-lived cookie, so another site cannot sign a browser in.

The dashboard is served under a secret path (:func:`secret_path`) and its cookies are scoped
to it: browsers do not keep cookies apart by port, and SameSite counts 127.0.0.1 on every
port as one site, so a cookie of Path=/ would reach any server another local program (an
agent's "preview server") listens with; one that does not know the path never receives it.

One principal holds at most ``max_per_principal`` sessions: signing in once more ends that
principal's least recently used session, never another principal's. With ``one_time``
tokens, a token opens one session and is then spent (a second sign-in with it is refused).
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import threading
import time
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass

from toolcards.core.errors import ToolcardsError
from toolcards.core.identity import Identity
from toolcards.surfaces.http.tokens import InvalidToken, TokenTable

SESSION_COOKIE = "toolcards_session"
LOGIN_COOKIE = "toolcards_login"
DEFAULT_VIEWER_ROLES = ("viewer", "approver")
SESSION_IDLE = 12 * 3600.0
SESSION_MAX_AGE = 24 * 3600.0
MAX_PER_PRINCIPAL = 20
_BASE_PATH = re.compile(r"(/[A-Za-z0-9_~-][A-Za-z0-9._~-]*)+")


def secret_path(given: str | None = None) -> str:
    """The path the dashboard is served under: ``given`` (``/`` and path segments, no
    trailing ``/``), else a new random one (``/`` and 128 bits) that only its link tells."""
    if given is None:
        return "/" + secrets.token_urlsafe(16)
    if not _BASE_PATH.fullmatch(given):
        raise ValueError(f"base_path must look like /segment[/segment...], not {given!r}")
    return given


class SignInRefused(ToolcardsError):
    """A token that matches nobody (401), or a principal not allowed to view (403)."""

    def __init__(self, message: str, status: int, identity: Identity | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.identity = identity


@dataclass
class Session:
    """One signed-in browser."""

    id: str
    identity: Identity
    csrf: str
    created: float
    seen: float


class Sessions:
    """Signed-in sessions, the sign-in nonce signer and the CSRF check.

    ``viewer_roles``: a principal must hold one of them to sign in (a token that only lets an
    agent call tools does not open the dashboard).
    """

    def __init__(
        self,
        tokens: TokenTable,
        *,
        viewer_roles: Iterable[str] = DEFAULT_VIEWER_ROLES,
        idle: float = SESSION_IDLE,
        max_age: float = SESSION_MAX_AGE,
        max_per_principal: int = MAX_PER_PRINCIPAL,
        one_time: bool = False,
    ) -> None:
        self.tokens = tokens
        self.viewer_roles = frozenset(viewer_roles)
        self.idle = idle
        self.max_age = max_age
        self.max_per_principal = max_per_principal
        self.one_time = one_time
        self._spent: set[bytes] = set()
        self._secret = secrets.token_bytes(32)
        self._sessions: OrderedDict[str, Session] = OrderedDict()
        self._lock = threading.Lock()

    # -- sign-in ---------------------------------------------------------------------------

    def new_nonce(self) -> tuple[str, str]:
        """(cookie value, form token) for the sign-in form."""
        nonce = secrets.token_urlsafe(24)
        return nonce, self._sign(nonce)

    def nonce_ok(self, nonce: str | None, form_token: str | None) -> bool:
        if not nonce or not form_token:
            return False
        return hmac.compare_digest(self._sign(nonce), form_token)

    def _sign(self, value: str) -> str:
        return hmac.new(self._secret, value.encode(), hashlib.sha256).hexdigest()

    def identify(self, token: str) -> Identity:
        """The principal of ``token``; :class:`SignInRefused` when none, or not a viewer."""
        try:
            identity = self.tokens.resolve(token.strip())
        except InvalidToken:
            raise SignInRefused("that token matches no principal", 401) from None
        if not identity.roles & self.viewer_roles:
            roles = ", ".join(sorted(self.viewer_roles))
            raise SignInRefused(
                f"{identity.id} may not open the dashboard (needs one of: {roles})", 403, identity
            )
        return identity

    def sign_in(self, token: str) -> Session:
        """A new session for the principal of ``token`` (:meth:`identify`); a one-time token
        is spent here, and refused once spent."""
        identity = self.identify(token)
        if self.one_time:
            digest = hashlib.sha256(token.strip().encode("utf-8", "surrogateescape")).digest()
            with self._lock:
                if digest in self._spent:
                    raise SignInRefused("that one-time token was already used", 401)
                self._spent.add(digest)
        return self.open(identity)

    def open(self, identity: Identity) -> Session:
        """A new session for ``identity`` (a fresh id every sign-in); its least recently used
        session beyond ``max_per_principal`` ends."""
        now = time.time()
        session = Session(secrets.token_urlsafe(32), identity, secrets.token_urlsafe(32), now, now)
        with self._lock:
            self._sessions[session.id] = session
            mine = [k for k, v in self._sessions.items() if v.identity.id == identity.id]
            for old in mine[: max(0, len(mine) - self.max_per_principal)]:
                del self._sessions[old]
        return session

    # -- requests --------------------------------------------------------------------------

    def get(self, session_id: str | None) -> Session | None:
        """The live session of a cookie value (expired ones are dropped)."""
        if not session_id:
            return None
        now = time.time()
        with self._lock:
            session = self._sessions.get(session_id)
            if session is None:
                return None
            if now - session.seen > self.idle or now - session.created > self.max_age:
                del self._sessions[session_id]
                return None
            session.seen = now
            self._sessions.move_to_end(session_id)
            return session

    def close(self, session_id: str | None) -> None:
        if session_id:
            with self._lock:
                self._sessions.pop(session_id, None)

    @staticmethod
    def csrf_ok(session: Session, presented: str | None) -> bool:
        return bool(presented) and hmac.compare_digest(session.csrf, str(presented))
