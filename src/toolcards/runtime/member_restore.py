"""One resume's re-hiring of the recorded members (:meth:`MemberRoster.restore`).

The roster is stored data: a row may be unreadable, name a role the host did not pass, carry
a profile that asks for policy roles, or be one of thousands planted. A restore takes the
rows earliest hired first, skips those another running process holds, keeps each role's
``max_members`` and the team's, and names every member it leaves out in a lifecycle event
(``member_restore_refused``, ``_deferred``, ``_failed``): the team always starts.
"""

from __future__ import annotations

import math
import warnings
from collections import Counter
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from toolcards.core.trust import TRUST
from toolcards.stores.base import StateNamespace

if TYPE_CHECKING:
    from toolcards.runtime.host import TeamHost
    from toolcards.runtime.profiles import RoleProfile

ROSTER = "~members"
"""The state namespace of the roster (one ``member:<name>`` row per member)."""


class RosterRestore:
    """Restores the members ``rows`` record into ``team`` through ``hire(role, name)``;
    ``held_elsewhere(holder)`` says whether a row's holder is another running process."""

    def __init__(
        self,
        team: TeamHost,
        rows: StateNamespace,
        hire: Callable[[str, str], object],
        held_elsewhere: Callable[[Any], bool],
        max_members: int,
    ) -> None:
        self._team = team
        self._rows = rows
        self._hire = hire
        self._held_elsewhere = held_elsewhere
        self._max_members = max_members
        self._restored: Counter[str] = Counter()
        """Members restored so far, per role (the caps count them)."""

    def run(self) -> None:
        """Re-hire every recorded member. A roster that cannot be read (a row that is no
        JSON, or nested too deep) restores no member and says why: the team still starts (it
        failed every resume, half started, until the file was mended by hand)."""
        log = self._team.log
        try:
            rows = list(self._rows.items("member:"))
        except (ValueError, RecursionError) as exc:
            reason = f"the roster holds an unreadable row ({type(exc).__name__})"
            log.lifecycle("members_restore_failed", reason=reason)
            return
        for key, record in sorted(rows, key=lambda row: hire_time(row[1])):  # earliest first
            name = key.removeprefix("member:")
            if not isinstance(record, dict):  # valid JSON, but no roster record
                reason = f"its roster row is no object ({type(record).__name__})"
                log.lifecycle("member_restore_failed", name=name, reason=reason)
                continue
            if self._held_elsewhere(record.get("holder")):
                continue  # another running process holds it
            role = str(record.get("role"))
            refused = self._refused(role)
            if refused:
                log.lifecycle("member_restore_refused", name=name, reason=refused)
                continue
            try:
                self._know_role(role, record.get("profile"))
                self._hire(role, name)
                self._restored[role] += 1
            except LookupError as exc:
                log.lifecycle("member_restore_deferred", name=name, reason=str(exc))
            except Exception as exc:
                warnings.warn(f"member {name} failed to restart: {exc}", stacklevel=4)
                log.lifecycle("member_restore_failed", name=name, reason=str(exc))

    def _refused(self, role: str) -> str:
        """Why one more member of ``role`` is not restored ('' when it is): stored rows do not
        raise the host's ``max_members`` of a role, nor of the team."""
        if self._restored.total() >= self._max_members:
            return f"a resume restores at most {self._max_members} members"
        cap = next((p.max_members for p in self._team.profiles if p.role == role), None)
        if cap is not None and self._restored[role] >= cap:
            return f"role {role!r} is limited to {cap} member(s)"
        return ""

    def _know_role(self, role: str, stored: Any) -> None:
        """Add the stored profile of ``role`` when the host passed none for it; ValueError
        when that profile names policy roles (those are the host's to give), LookupError when
        its model is none the host uses (the row would pick which of the host's keys a turn
        spends)."""
        team = self._team
        if any(p.role == role for p in team.profiles) or not stored:
            return
        # lazy: agent members only (pydantic models, ~1x python -c pass)
        from toolcards.runtime.profiles import RoleProfile

        trusted = {TRUST: team.trust}  # a stored profile is data
        profile = RoleProfile.model_validate_json(stored, context=trusted)
        if profile.roles:
            raise ValueError(
                f"its stored profile names policy roles {profile.roles!r:.200}: "
                f"only a profile the host passes may (pass role {role!r})"
            )
        team.profiles.append(self._host_limits(role, profile))

    def _host_limits(self, role: str, profile: RoleProfile) -> RoleProfile:
        """``profile`` run as the host runs its model: the model must be one of the host's
        profiles' (or ``test``, which calls no provider), and the settings and history limit
        are that host profile's, never the row's (a row's ``max_tokens`` spends the host's key)."""
        model = profile.model
        host = next((p for p in self._team.profiles if p.model == model), None)
        if host is None and model != "test":
            raise LookupError(
                f"its stored profile's model {model!r:.200} is none of the host's profiles': "
                f"pass role {role!r} in profiles= to restore it"
            )
        settings, history = (host.model_settings, host.max_history) if host else (None, None)
        return profile.model_copy(update={"model_settings": settings, "max_history": history})


def hire_time(record: Any) -> float:
    """When a roster record's member was hired; 0 for a row that does not say so readably
    (``'yesterday'``, ``true``, ``NaN``, an int no float holds: rows our writers never leave)."""
    hired = record.get("hired_at") if isinstance(record, dict) else None
    if not isinstance(hired, int | float) or isinstance(hired, bool):
        return 0.0
    seconds = float(hired) if abs(hired) < 1e15 else 0.0  # an int no float holds: none
    return seconds if math.isfinite(seconds) else 0.0
