"""Caller identity: from whatever the application uses to apcore's ``Identity`` and ``Context``.

apcore's ACL matches a rule's ``callers`` against ``Context.caller_id`` (the last entry of the
parent call chain) and its ``roles`` condition against ``Context.identity``. The bridge writes
the resolved identity to both, so rules written for apcore callers match agent calls unchanged.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from apcore import Context, Identity


def to_apcore_identity(identity: Any) -> Identity | None:
    """Map a duck-typed identity (``.id``, ``.type``, ``.roles``, optional ``.attrs``).

    apcore identities pass through; ``None`` stays ``None``.
    """
    if identity is None or isinstance(identity, Identity):
        return identity
    ident = getattr(identity, "id", None)
    if not isinstance(ident, str) or not ident:
        raise TypeError(f"identity needs a non-empty string 'id', got {ident!r}")
    kind = getattr(identity, "type", None) or "user"
    roles_raw = getattr(identity, "roles", None) or ()
    if isinstance(roles_raw, str) or not isinstance(roles_raw, Iterable):
        raise TypeError(f"identity 'roles' must be a collection of strings, got {roles_raw!r}")
    roles = tuple(str(role) for role in roles_raw)
    attrs = getattr(identity, "attrs", None)
    return Identity(id=ident, type=str(kind), roles=roles, attrs=dict(attrs or {}))


def build_context(identity: Identity | None) -> Context[Any]:
    """A fresh top-level apcore context whose caller is ``identity`` (or anonymous)."""
    context: Context[Any] = Context.create(identity=identity)
    if identity is not None:
        context.call_chain.append(identity.id)
    return context
