"""The ``#NotificationTool`` team actor: pending entries, their timer and their delivery.

Entries are stored one state row each with an absolute due time, so a stopped team resumes
with them and fires the overdue ones on the first tick. The timer thread only pops due ids and
tells the actor; the actor decides (deliver, wait for an absent owner, drop) and hands the
delivery itself to a courier thread, so a slow recipient never blocks the actor.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Mapping
from functools import partial
from typing import ClassVar

from pydantic import BaseModel, ValidationError

from toolcards.core.actors import ActorHandle, ActorUnavailable
from toolcards.core.errors import RetriableError
from toolcards.runtime import ToolActor, ToolActorContext
from toolcards.runtime.member_restore import ROSTER, hire_time
from toolcards.runtime.members import fired_at
from toolcards.tools._common.batch import short_reason
from toolcards.tools.notification.models import ACTOR_NAME, PendingNotification
from toolcards.tools.notification.scheduler import Courier, DueScheduler

logger = logging.getLogger(__name__)

_ENTRY = "entry:"
_NEXT_ID = "meta:next_id"


def _key(notification_id: int) -> str:
    return f"{_ENTRY}{notification_id:010d}"


def _entry_of(key: str, value: object) -> PendingNotification | None:
    """The stored row ``key`` as an entry; None (logged) when it is no valid entry."""
    try:
        return PendingNotification.model_validate(value)
    except ValidationError as exc:
        logger.warning("%s: skipped stored row %r: %s", ACTOR_NAME, key, short_reason(exc))
        return None


class NotificationActor(ToolActor):
    """Holds every member's pending notifications and delivers them when due."""

    owner_grace_seconds: ClassVar[float] = 300.0
    """How long past its due time an entry waits for an owner who is off the team."""
    retry_seconds: ClassVar[float] = 2.0
    """How often an entry whose owner is off the team is retried."""

    def __init__(self, ctx: ToolActorContext, config: BaseModel | None) -> None:
        super().__init__(ctx, config)
        self.clock: Callable[[], float] = time.time
        self.present: Callable[[str], bool] = self._on_team
        self.hired: Callable[[str], float | None] = self._hire_time
        self.deliver: Callable[[str, str], None] = self._post
        self.entries: dict[int, PendingNotification] = {}
        self.next_id = 1
        self.scheduler = DueScheduler(
            self._wake, clock=lambda: self.clock(), name=f"{ctx.team_id}{ACTOR_NAME}-timer"
        )
        self.courier = Courier(name=f"{ctx.team_id}{ACTOR_NAME}-courier")

    # ---- lifecycle ---------------------------------------------------------------------------

    def on_start(self) -> None:
        self._load()
        self.courier.start()
        self.scheduler.start()

    def on_stop(self) -> None:
        self.scheduler.stop(timeout=1.0)
        self.courier.stop(timeout=1.0)

    def _load(self) -> None:
        """Read the stored entries and put each on the timer (overdue ones fire at once). A
        row that is no valid entry is logged and skipped, and a stored next id that is no
        integer is ignored: one bad row must not stop every member's notifications."""
        for key, value in self.state.items(_ENTRY):
            entry = _entry_of(key, value)
            if entry is not None:
                self.entries[entry.id] = entry
                self.scheduler.push(entry.due_at, entry.id)
        stored = self.state.get(_NEXT_ID)
        if not isinstance(stored, int) or isinstance(stored, bool):
            if stored is not None:
                logger.warning("%s: ignored a stored next id that is no integer", ACTOR_NAME)
            stored = 1
        self.next_id = max([1, stored, *(i + 1 for i in self.entries)])

    # ---- calls from cards --------------------------------------------------------------------

    def register(
        self,
        owner: str,
        content: str,
        delay_seconds: float,
        max_pending: int,
        message_type: str = "notification",
    ) -> PendingNotification:
        """Schedule ``content`` for ``owner`` in ``delay_seconds`` (validated by the card)."""
        mine = sum(1 for e in self.entries.values() if e.owner == owner)
        if mine >= max_pending:
            raise RetriableError(
                f"you already have {mine} pending notifications (limit {max_pending}); "
                "cancel one with cancel_notification first"
            )
        now = self.clock()
        since = self.ctx.team.log.position  # first: a fire of the member read next logs past it
        entry = PendingNotification(
            id=self.next_id,
            owner=owner,
            content=content,
            due_at=now + delay_seconds,
            created_at=now,
            message_type=message_type,
            hired_at=self.hired(owner),
            since=since,
        )
        with self.state.batch():
            self.state.put(_key(entry.id), entry.model_dump())
            self.state.put(_NEXT_ID, entry.id + 1)
            self.emit({"registered": entry.model_dump()})
        self.next_id = entry.id + 1
        self.entries[entry.id] = entry
        self.scheduler.push(entry.due_at, entry.id)
        return entry

    def pending(self, owner: str | None = None) -> list[PendingNotification]:
        """Pending entries of ``owner`` (every owner's when None), soonest first."""
        found = [e for e in self.entries.values() if owner is None or e.owner == owner]
        return sorted(found, key=lambda e: (e.due_at, e.id))

    def cancel(self, owner: str, notification_id: int) -> PendingNotification:
        """Cancel ``owner``'s entry; anyone else's id fails exactly like an unknown one."""
        entry = self.entries.get(notification_id)
        if entry is None or entry.owner != owner:
            raise RetriableError(
                f"you have no pending notification #{notification_id}; "
                "see pending_notification for your ids"
            )
        self._remove(entry, {"cancelled": {"id": entry.id, "owner": owner}})
        return entry

    def listing(self, owner: str | None = None) -> tuple[float, list[PendingNotification]]:
        """The actor's current time and :meth:`pending` (lines show the time left)."""
        return self.clock(), self.pending(owner)

    # ---- timer and delivery ------------------------------------------------------------------

    def _wake(self, ids: list[int]) -> None:
        """On the timer thread: hand the due ids to the actor's own thread."""
        with contextlib.suppress(ActorUnavailable):  # stopping: entries stay stored
            self._self().tell(NotificationActor.fire, ids)

    def fire(self, ids: list[int]) -> None:
        """Deliver the due entries ``ids`` (told by the timer); skips cancelled ones."""
        now = self.clock()
        due = [e for i in ids if (e := self.entries.get(i)) is not None]
        for entry in due:
            if not self.present(entry.owner):
                if now - entry.due_at < self.owner_grace_seconds:
                    self.scheduler.push(now + self.retry_seconds, entry.id)
                else:
                    self._drop(entry, "owner not on the team")
            elif self._replaced(entry):
                self._drop(entry, "its owner was fired; the member of that name now is another")
            else:
                payload = {"fired": {"id": entry.id, "owner": entry.owner}}
                self._remove(entry, payload)
                self.courier.submit(partial(self._send, entry))

    def _replaced(self, entry: PendingNotification) -> bool:
        """True when the member holding the entry's owner name is not the one that scheduled
        it (a fired member's text would reach whoever is hired under its name next). The
        roster's hire time tells at once; when it differs (a resume re-hires every member,
        with a new time), only a fire of the name since the entry makes it another member:
        the roster keeps where the log stood at the name's last fire, so that is one read
        however long the log has grown (a scan of it held the actor for seconds each time)."""
        if entry.since is None:  # stored by an older version: whoever holds the name
            return False
        hired = self.hired(entry.owner)
        if hired == entry.hired_at:
            return False
        if entry.hired_at is None:  # no member when scheduled: this one came after
            return True
        return fired_at(self.ctx.team.state_of(ROSTER), entry.owner) > entry.since

    def _drop(self, entry: PendingNotification, reason: str) -> None:
        logger.warning("notification #%s for %s dropped: %s", entry.id, entry.owner, reason)
        self._remove(entry, {"dropped": {"id": entry.id, "owner": entry.owner}})

    def undeliverable(self, notification_id: int, owner: str, reason: str) -> None:
        """Record a delivery that failed after the entry left the pending set."""
        self.emit({"failed": {"id": notification_id, "owner": owner, "reason": reason}})

    def _send(self, entry: PendingNotification) -> None:
        """On the courier thread: deliver one entry; a failure is logged and recorded."""
        try:
            self.deliver(entry.owner, entry.message())
        except Exception as exc:
            logger.warning("notification #%s for %s failed: %s", entry.id, entry.owner, exc)
            reason = f"{type(exc).__name__}: {exc}"[:300]
            with contextlib.suppress(ActorUnavailable):
                self._self().tell(NotificationActor.undeliverable, entry.id, entry.owner, reason)

    def _remove(self, entry: PendingNotification, payload: Mapping[str, object]) -> None:
        with self.state.batch():
            self.state.delete(_key(entry.id))
            self.emit(payload)
        del self.entries[entry.id]
        self.scheduler.discard(entry.id)

    def _self(self) -> ActorHandle[NotificationActor]:
        handle = self.ctx.team.actor(self.name)
        if handle is None:
            raise ActorUnavailable(f"{self.name} is not running")
        return handle

    def _on_team(self, owner: str) -> bool:
        return bool(self.ctx.team.is_member(owner))

    def _hire_time(self, owner: str) -> float | None:
        """When the member ``owner`` was hired, as the roster reports it; None for no member."""
        row = self.ctx.team.state_of(ROSTER).get(f"member:{owner}")
        return hire_time(row) if isinstance(row, dict) else None

    def _post(self, owner: str, text: str) -> None:
        self.ctx.team.post(owner, text, sender=ACTOR_NAME, from_host=False)
