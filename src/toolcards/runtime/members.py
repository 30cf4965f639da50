"""Agent members of a team: hire, fire, messaging, the roster and its activity.

```python
team = Team("t2", store="team.db", profiles=[RoleProfile(role="researcher", model="openai:gpt-5",
                                                          cards=[PlanningTool()])])
name = team.hire("researcher")                 # "@researcher-1"
reply = team.send(name, "What is on the plan?")  # waits (bounded) for the answer
team.post(name, "/get_planning", command=True) # queued; a slash command runs no model
team.members(); team.activity()                # roster, and who is busy on what
team.fire(name)
```

Member names start with ``@`` (an explicit ``"alice"`` becomes ``"@alice"``); default names are
``@<role>-<n>`` with ``n`` never reused within a team. The roster and every member's
conversation live in the team store: ``Team.resume`` re-hires the recorded members with the
profiles given to it (or the stored ones, for profiles whose model is a spec string).

On a store several processes share, a hire checks the caps, picks the name and claims it (a
``claim:<name>`` roster row) under the roster's lock in the store, then starts the member and
replaces the claim with its ``member:<name>`` row: processes hiring at once never pass the
caps together nor start two members of one name.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from typing import TYPE_CHECKING, Any

from toolcards.core.errors import ToolcardsError
from toolcards.runtime.member_messages import MemberMessaging, Unanswered
from toolcards.runtime.member_restore import ROSTER, RosterRestore, hire_time
from toolcards.runtime.messaging import (
    NAME_PATTERN,
    MemberActivity,
    MemberInfo,
    current_member,
    member_activity,
)
from toolcards.runtime.relay import STALE_AFTER, Relay, process_token
from toolcards.stores.base import LIFECYCLE_TOOL, StateNamespace

if TYPE_CHECKING:
    from toolcards.core.actors import ActorHandle
    from toolcards.runtime.host import TeamHost
    from toolcards.runtime.member_actor import MemberActor
    from toolcards.runtime.profiles import RoleProfile

log = logging.getLogger(__name__)

DEFAULT_SEND_TIMEOUT = 300.0
DEFAULT_MAX_MEMBERS = 64
"""Members a team holds at once unless its host says otherwise (``Team(max_members=...)``):
each is a thread, a roster row and a line in every member's roster, and a member's model can
hire. A resume restores at most as many (the roster is stored data)."""

CLAIM = "claim:"
"""The roster rows of names being hired (``claim:<name>``: role, holder, when): a claim counts
as a member of every process while its holder starts the member; one whose hire ended without
removing it is stale for its holder at once, and for the others once it is older than
:data:`~toolcards.runtime.relay.STALE_AFTER` and its holder is presumed gone
(:meth:`~toolcards.runtime.relay.Relay.holder_alive`). Stale claims are deleted by the next
hire."""

FIRES_RECORDED = "fires_recorded"
"""The roster row saying its ``fired:<name>`` rows hold every fire in the log (its value: the
log position read up to). A store from before those rows were kept has only the log's
``member_fired`` events: the first team to open it reads them into rows, once."""

FIRES_PER_BATCH = 500
"""Names that reading a log's fires into rows holds before it writes them (its memory bound)."""


def fired_at(roster: StateNamespace, name: str) -> int:
    """The log position the roster recorded at the last fire of ``name`` (never past that
    fire's event); -1 for never."""
    found = roster.get(f"fired:{name}")
    return found if isinstance(found, int) and not isinstance(found, bool) else -1


class _Entry:
    __slots__ = ("actor", "hired_at", "profile")

    def __init__(self, actor: MemberActor, profile: RoleProfile, hired_at: float) -> None:
        self.actor = actor
        self.profile = profile
        self.hired_at = hired_at


class MemberRoster(MemberMessaging):
    """The members of one team; the team owns it and delegates its member methods to it."""

    def __init__(self, team: TeamHost, max_members: int = DEFAULT_MAX_MEMBERS) -> None:
        self._team = team
        self._max_members = max_members
        self._lock = threading.RLock()
        self._entries: dict[str, _Entry] = {}
        self._claimed: dict[str, str] = {}
        """Names this process is hiring (claimed, not started yet) and their roles: they count
        against the caps as the members started do."""
        self._fired: set[str] = set()
        self._unanswered = Unanswered()
        self._relay: Relay | None = None
        if team.shared:
            self._relay = Relay(team.log, team.state_of(ROSTER), self._deliver_queued)
        self._record_past_fires()

    @property
    def _state(self) -> StateNamespace:
        return self._team.state_of(ROSTER)

    # ---- profiles and names ------------------------------------------------------------------

    def profile(self, role: str) -> RoleProfile:
        for profile in self._team.profiles:
            if profile.role == role:
                return profile
        known = ", ".join(p.role for p in self._team.profiles) or "none (give Team(profiles=...))"
        raise LookupError(f"team {self._team.team_id} has no role {role!r}; roles: {known}")

    def is_member(self, name: str) -> bool:
        """True for a member of this process, or (shared store) of any process of the team."""
        return name in self._entries or self._remote(name) is not None

    def _remote(self, name: str) -> dict[str, Any] | None:
        """The roster row of ``name`` when another process holds it (shared stores only)."""
        if self._relay is None or name in self._entries:
            return None
        record = self._state.get(f"member:{name}")
        return record if isinstance(record, dict) else None

    def resolve(self, name: str) -> str:
        """The roster name for ``name`` (``alice`` finds ``@alice``); LookupError otherwise."""
        if not isinstance(name, str):
            raise LookupError(f"member names are strings, got {type(name).__name__}")
        with self._lock:
            for candidate in (name, f"@{name}"):
                if candidate in self._entries or self._remote(candidate) is not None:
                    return candidate
            known = ", ".join(self._entries) or "none"
            gone = name if name in self._fired else f"@{name}"
            if gone in self._fired:
                raise LookupError(f"member {gone} was fired; members: {known}")
        raise LookupError(f"team {self._team.team_id} has no member {name!r:.80}; members: {known}")

    def _claim(self, profile: RoleProfile, name: str | None, elsewhere: dict[str, str]) -> str:
        """Claim ``name`` (normalized) or the role's next default name; ValueError for a name
        malformed or taken here or in ``elsewhere`` (see :meth:`_elsewhere`)."""
        if name is not None:
            wanted = name.strip() if isinstance(name, str) else name
            if isinstance(wanted, str) and not wanted.startswith("@"):
                wanted = f"@{wanted}"
            if not isinstance(wanted, str) or not NAME_PATTERN.fullmatch(wanted):
                raise ValueError(
                    f"member name {name!r:.80} must be letters, digits, '_', '.' or '-' "
                    "(at most 64), optionally after '@'"
                )
            if self._taken(wanted, elsewhere):
                raise ValueError(f"the name {wanted} is already taken in team {self._team.team_id}")
            self._claimed[wanted] = profile.role
            return wanted
        key = f"counter:{profile.role}"
        n = int(self._state.get(key) or 0)
        while True:
            n += 1
            candidate = f"@{profile.role}-{n}"
            if not self._taken(candidate, elsewhere):
                break
        self._state.put(key, n)
        self._claimed[candidate] = profile.role
        return candidate

    def _taken(self, name: str, elsewhere: dict[str, str]) -> bool:
        """True when ``name`` is in use here or in ``elsewhere``."""
        local = name in self._entries or name in self._claimed
        return local or name in elsewhere or self._team.actor(name) is not None

    def _elsewhere(self) -> dict[str, str]:
        """Inside the roster's exclusive batch, on a shared store: the name and role of every
        member on the roster and of every name another process is hiring (its live claim).
        Stale claims are deleted."""
        relay = self._relay
        if relay is None:
            return {}
        found = {
            key.removeprefix("member:"): str(record.get("role"))
            for key, record in self._state.items("member:")
            if isinstance(record, dict)
        }
        for key, claim in self._state.items(CLAIM):
            name = key.removeprefix(CLAIM)
            holder = claim.get("holder") if isinstance(claim, dict) else None
            if holder == process_token():
                live = name in self._claimed or name in self._entries
            else:
                at = claim.get("at") if isinstance(claim, dict) else None
                young = isinstance(at, int | float) and time.time() - at < STALE_AFTER
                live = young or relay.holder_alive(holder)
            if live:
                found.setdefault(name, str(claim.get("role")))
            else:
                self._state.delete(key)
        return found

    def _unclaim(self, member: str) -> None:
        """End this process's claim of ``member`` (started, placed, or failed to start). A
        claim row that cannot be deleted is stale: see :data:`CLAIM`."""
        with self._lock:
            self._claimed.pop(member, None)
        if self._relay is not None:
            with contextlib.suppress(Exception):  # the store may be why the start failed
                self._state.delete(f"{CLAIM}{member}")

    # ---- hire and fire -----------------------------------------------------------------------

    def hire(
        self, role: str, name: str | None = None, *, restoring: bool = False, adopting: bool = False
    ) -> str:
        """Hire a member for ``role`` here (or, for a role placed on the cluster, in a worker
        of the team's actor system). ``restoring``: take the recorded member back on resume;
        ``adopting``: hold a member placed on the cluster (in its worker)."""
        team = self._team
        team.check_running()
        profile = self.profile(role)
        # lazy: agent members only (pydantic models, ~1x python -c pass)
        from toolcards.runtime.member_actor import MemberActor
        from toolcards.runtime.profiles import check_model

        check_model(profile.model)  # before any name is claimed: a failed hire leaves no trace
        placed = profile.placement == "cluster" and not adopting
        if placed and self._relay is None and not restoring:
            raise ValueError(
                f"role {role!r} has placement='cluster', which needs a store every process "
                "shares (a postgresql:// URL) and a distributed actor system (system='ray')"
            )
        new = not (restoring or adopting)
        with self._lock, self._state.exclusive():  # the other processes' hires wait meanwhile
            elsewhere = self._elsewhere() if new else {}  # a member taken over keeps its name
            if new:
                self._check_room(profile, elsewhere)
            member = self._claim(profile, name, elsewhere)
            if new and self._relay is not None:
                claim = {"role": profile.role, "holder": process_token(), "at": time.time()}
                self._state.put(f"{CLAIM}{member}", claim)
                self._relay.beat()  # the claim is live while this process beats
        if placed and self._relay is not None:
            try:
                return self._place(member, profile, restoring=restoring)
            except ValueError:
                if not restoring:
                    raise
                # resumed without a distributed actor system: the member runs here
        try:
            actor = MemberActor(team, self, member, profile)
            team.spawn(member, lambda: actor)
        except BaseException:
            self._unclaim(member)
            raise
        hired_at = time.time()
        with self._lock:
            self._claimed.pop(member, None)
            self._fired.discard(member)
            self._entries[member] = _Entry(actor, profile, hired_at)
        record = {
            "role": profile.role,
            "hired_at": hired_at,
            "profile": profile.model_dump_json() if profile.serializable else None,
            "holder": process_token() if self._relay is not None else None,
            "placement": profile.placement,
        }
        if self._relay is not None:  # beating before the row names this process its holder
            since = self._relay.watermark(member) if restoring or adopting else team.log.position
            self._relay.start(member, since)
        with self._state.batch():
            self._state.put(f"member:{member}", record)
            self._state.delete(f"{CLAIM}{member}")
        event = "member_adopted" if adopting else "member_restored" if restoring else "member_hired"
        team.log.lifecycle(event, name=member, role=profile.role)
        return member

    def _check_room(self, profile: RoleProfile, elsewhere: dict[str, str]) -> None:
        """Refuse a hire beyond the team's ``max_members`` or its role's (under the locks):
        names being claimed count as members, and so, on a shared store, do the members and
        claims of other processes (``elsewhere``). Without the team's cap, a member's model
        hired without end."""
        roles = {**elsewhere, **self._claimed}
        roles.update((name, entry.profile.role) for name, entry in self._entries.items())
        if len(roles) >= self._max_members:
            raise ValueError(
                f"team {self._team.team_id} is limited to {self._max_members} members; "
                "fire one first"
            )
        role, cap = profile.role, profile.max_members
        names = [name for name, held in roles.items() if held == role]
        if cap is not None and len(names) >= cap:
            raise ValueError(
                f"role {role!r} is limited to {cap} member(s), all hired: {', '.join(names)}"
            )

    def _running(self, name: str) -> ActorHandle[Any]:
        """The actor of ``name``, a member of this process. One that stopped without being
        fired (``stop_actor``, a failure) is started again first, its conversation from the
        store, and the log says so; when that fails, the member is given up (free for another
        process of the team to take over) and the LookupError says why, in one line."""
        team = self._team
        handle = team.actor(name)
        if handle is not None:
            return handle
        # lazy: agent members only (pydantic models, ~1x python -c pass)
        from toolcards.runtime.member_actor import MemberActor

        with self._lock:
            handle = team.actor(name)  # another thread may have started it meanwhile
            if handle is not None:
                return handle
            entry = self._entries.get(name)
            if entry is None:
                raise LookupError(f"member {name} is not running")
            actor = MemberActor(team, self, name, entry.profile)
            try:
                handle = team.spawn(name, lambda: actor)
            except Exception as exc:
                del self._entries[name]
                reason = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
                log.error("member %s had stopped and could not start again (%s)", name, reason)
                with contextlib.suppress(Exception):
                    self._free(name)
                raise LookupError(
                    f"member {name} stopped and could not start again here ({reason}); it is "
                    "free for another process of the team to take over"
                ) from None
            entry.actor = actor
        log.warning("member %s had stopped without being fired; started it again", name)
        with contextlib.suppress(Exception):  # the store may be what stopped it
            team.log.lifecycle("member_restarted", name=name, role=entry.profile.role)
        return handle

    def _free(self, name: str) -> None:
        """Let another process take ``name`` over: this process no longer holds it."""
        if self._relay is not None:
            self._relay.release(name)
        record = self._state.get(f"member:{name}")
        if isinstance(record, dict) and record.get("holder") == process_token():
            self._state.put(f"member:{name}", {**record, "holder": None})

    def _place(self, member: str, profile: RoleProfile, *, restoring: bool) -> str:
        """Start ``member`` as an actor of the team's distributed system (it adopts itself
        there); the roster row is written by its worker before this returns. A new member's
        watermark is the log's end: its worker reads the log from there, not from its start."""
        if not restoring and self._relay is not None:
            self._relay.mark_new(member)
        try:
            self._team.start_cluster_member(member, profile)
        finally:
            self._unclaim(member)
        self._fired.discard(member)
        event = "member_restored" if restoring else "member_hired"
        self._team.log.lifecycle(event, name=member, role=profile.role, placement="cluster")
        return member

    def fire(self, name: str, timeout: float | None = None) -> bool:
        """Stop ``name`` and remove it; True when its actor stopped within the bound."""
        team = self._team
        with self._lock:
            member = self.resolve(name)
            entry = self._entries.pop(member, None)
            if entry is not None:
                self._fired.add(member)
        if entry is None:
            return self._fire_placed(member, timeout)
        entry.actor.fire()
        if self._relay is not None:
            self._relay.release(member)
        if current_member.get() == member:  # fired from its own turn: stop once it ends
            team.stop_later(member)
            clean = False
        else:
            clean = team.stop_actor(member, timeout)
        self._forget(member, entry.profile.role, clean)
        return clean

    def _forget(self, member: str, role: str, clean: bool) -> None:
        """Remove the fired ``member``'s row and conversation, then log the fire and keep where
        the log stood once it was fired (``fired:<name>``, one read), in one transaction: a
        resume gives every member a new hire time, so only that row tells a member hired under
        the name since from the one fired. The row holds the position the fire's event takes
        (at most: another process may log first), read after the member's row went: a
        notification scheduled for the fired member read its position before that."""
        # lazy: agent members only (pydantic models, ~1x python -c pass)
        from toolcards.runtime.member_actor import HISTORY_KEY

        team = self._team
        self._state.delete(f"member:{member}")
        team.state_of(member).delete(HISTORY_KEY)
        with self._state.batch():
            self._state.put(f"fired:{member}", team.log.position + 1)
            team.log.lifecycle("member_fired", name=member, role=role, clean=clean)

    def _record_past_fires(self) -> None:
        """Give every name the log holds a ``member_fired`` of its ``fired:<name>`` row, once a
        store (:data:`FIRES_RECORDED`): a store written before those rows were kept has only
        the events, and a fired member's pending notification reached the member hired under
        its name after a resume. Reads the log a page at a time up to where it stands now
        (later fires write their rows) and holds at most :data:`FIRES_PER_BATCH` names; a team
        opened read-only writes nothing."""
        state, log = self._state, self._team.log
        if state.get(FIRES_RECORDED) is not None:
            return
        try:
            self._team.check_running()
        except ToolcardsError:  # TeamStopped: opened read-only, to be looked at
            return
        end = log.position
        found: dict[str, int] = {}
        for position, event in log.entries():
            if position > end:
                break
            payload = event.payload
            if event.tool_id != LIFECYCLE_TOOL or not isinstance(payload, dict):
                continue
            if payload.get("event") == "member_fired" and isinstance(payload.get("name"), str):
                found[payload["name"]] = position
                if len(found) >= FIRES_PER_BATCH:
                    self._keep_fires(found)
        with state.batch():
            self._keep_fires(found)
            state.put(FIRES_RECORDED, end)

    def _keep_fires(self, found: dict[str, int]) -> None:
        """Write the ``fired:<name>`` row of each of ``found`` (name: position of its last
        fire) the roster holds no later one of, in one transaction, and empty ``found``."""
        state = self._state
        with state.batch():
            for name, position in found.items():
                if position > fired_at(state, name):
                    state.put(f"fired:{name}", position)
        found.clear()

    def _fire_placed(self, member: str, timeout: float | None) -> bool:
        """Fire a member placed on the cluster from any process of the team."""
        record = self._remote(member) or {}
        if record.get("placement") != "cluster":
            raise LookupError(f"member {member} runs in another process; fire it there")
        clean = self._team.stop_cluster_member(member, timeout)
        self._fired.add(member)
        if clean is None:  # its actor is gone: remove what it left
            self._forget(member, str(record.get("role")), False)
            return False
        return clean

    def retire_all(self) -> None:
        """Let queued messages of every member be answered at once (the team is stopping);
        on a shared store, leave the members free for another process to take over."""
        with self._lock:
            entries = list(self._entries.items())
        for _, entry in entries:
            entry.actor.retire()
        if self._relay is not None:
            self._relay.stop()
            for name, _ in entries:
                self._free(name)

    def restore(self) -> None:
        """Re-hire every recorded member (on resume; see :class:`.member_restore.RosterRestore`)."""
        relay = self._relay
        RosterRestore(
            self._team,
            self._state,
            lambda role, name: self.hire(role, name, restoring=True),
            relay.holder_alive if relay is not None else lambda holder: False,
            self._max_members,
        ).run()

    # ---- views -------------------------------------------------------------------------------

    def members(self) -> list[MemberInfo]:
        """Every member (on a shared store, those of other processes too: never busy here)."""
        with self._lock:
            entries = list(self._entries.items())
        found = [
            MemberInfo(
                name=name,
                role=e.profile.role,
                busy=e.actor.current is not None,
                hired_at=e.hired_at,
            )
            for name, e in entries
        ]
        if self._relay is not None:
            for key, record in self._state.items("member:"):
                name = key.removeprefix("member:")
                if name not in self._entries and isinstance(record, dict):
                    hired = hire_time(record)
                    found.append(
                        MemberInfo(
                            name=name, role=str(record.get("role")), busy=False, hired_at=hired
                        )
                    )
            found.sort(key=lambda m: m.hired_at)
        return found

    def activity(self, **options: Any) -> dict[str, MemberActivity]:
        with self._lock:
            names = list(self._entries)
        return member_activity(self._team.log.recent(), members=names, **options)
