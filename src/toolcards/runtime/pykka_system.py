"""The embedded actor backend: one Pykka thread per actor, names local to the process."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import pykka

from toolcards.core.actors import no_answer
from toolcards.runtime.host_events import EventListener, current_listener, listening
from toolcards.runtime.system import ActorUnavailable, HandleBase

log = logging.getLogger(__name__)


class _Call(NamedTuple):
    method: str
    args: tuple[Any, ...]
    kwargs: dict[str, Any]
    listener: EventListener | None = None
    """The host observer's listener of the calling thread: the actor's events reach it."""
    told: bool = False
    """Sent with ``tell``: nobody waits for the outcome, so a failure is logged here."""


class _Started(NamedTuple):
    """Answered once ``on_start`` ran: with the exception it raised, if any."""


class _Host(pykka.ThreadingActor):
    """Runs one target object on a Pykka thread (daemon, so a stuck actor never blocks exit)."""

    use_daemon_thread = True

    def __init__(
        self, name: str, factory: Callable[[], Any], forget: Callable[[str], None]
    ) -> None:
        super().__init__()
        self.name = name
        self._factory = factory
        self._forget = forget
        self.target: Any = None
        self.start_error: BaseException | None = None

    def on_start(self) -> None:
        try:
            self.target = self._factory()
            hook = getattr(self.target, "on_start", None)
            if hook is not None:
                hook()
        except Exception as exc:
            self.start_error = exc
        except BaseException as exc:  # keep the thread alive to report it
            self.start_error = RuntimeError(f"{self.name} failed to start: {exc!r}")

    def on_stop(self) -> None:
        try:
            hook = getattr(self.target, "on_stop", None)
            if hook is not None and self.start_error is None:
                hook()
        finally:
            self._forget(self.name)

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Call):
            try:
                return self._run(message)
            except Exception as exc:
                if not message.told:
                    raise  # to the caller, who waits for it
                # Pykka would stop the actor for good: nobody would know, every later message
                # to it would be dropped. An actor goes on after a failed ``tell`` as after a
                # failed ``ask`` (as a Ray actor does), and the log says what failed.
                log.error(
                    "%s.%s failed (%s: %s); nobody waited for it, the actor goes on",
                    self.name,
                    message.method,
                    type(exc).__name__,
                    " ".join(str(exc).split()),
                    exc_info=exc,
                )
                return None
        if isinstance(message, _Started):
            return self.start_error
        raise TypeError(f"{self.name} got an unknown message {message!r}")

    def _run(self, message: _Call) -> Any:
        if message.method.startswith("_"):
            raise AttributeError(f"{self.name} does not expose {message.method!r}")
        try:
            with listening(message.listener):
                return getattr(self.target, message.method)(*message.args, **message.kwargs)
        except Exception:
            raise
        except BaseException as exc:  # Pykka would stop every actor of the process
            raise RuntimeError(f"{self.name}.{message.method} raised {exc!r}") from exc


class PykkaHandle(HandleBase[Any]):
    """An :class:`ActorHandle` over a Pykka actor ref (no proxy objects, one message per call)."""

    __slots__ = ("_ref",)

    def __init__(self, name: str, ref: pykka.ActorRef[Any]) -> None:
        super().__init__(name)
        self._ref = ref

    def _ask(self, method: str, args: tuple[Any, ...], kw: dict[str, Any], timeout: float) -> Any:
        try:
            future = self._ref.ask(_Call(method, args, kw, current_listener()), block=False)
        except pykka.ActorDeadError:
            raise ActorUnavailable(f"actor {self._name} is not running") from None
        try:
            return future.get(timeout=timeout)
        except pykka.Timeout:
            raise no_answer(self._name, method, timeout) from None
        except pykka.ActorDeadError:
            raise ActorUnavailable(f"actor {self._name} stopped before answering") from None

    def _tell(self, method: str, args: tuple[Any, ...], kw: dict[str, Any]) -> None:
        try:
            self._ref.tell(_Call(method, args, kw, current_listener(), told=True))
        except pykka.ActorDeadError:
            raise ActorUnavailable(f"actor {self._name} is not running") from None

    def is_alive(self) -> bool:
        return bool(self._ref.is_alive())

    def stop_future(self) -> Any:
        return self._ref.stop(block=False)


class PykkaActorSystem:
    """The embedded :class:`ActorSystem`: one Pykka thread per actor, names local to it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._actors: dict[str, PykkaHandle] = {}

    def spawn(
        self, name: str, factory: Callable[[], Any], *, start_timeout: float = 30.0
    ) -> PykkaHandle:
        with self._lock:
            if name in self._actors:
                raise ValueError(f"an actor named {name!r} is already running")
            ref = _Host.start(name, factory, self._forget)
            handle = PykkaHandle(name, ref)
            self._actors[name] = handle
        try:
            error = ref.ask(_Started(), timeout=start_timeout)
        except pykka.Timeout:
            self.stop([name], timeout=0)
            raise TimeoutError(f"actor {name} did not start within {start_timeout:g}s") from None
        if isinstance(error, BaseException):
            self.stop([name], timeout=start_timeout)
            raise error
        return handle

    def _forget(self, name: str) -> None:
        with self._lock:
            self._actors.pop(name, None)

    def lookup(self, name: str) -> PykkaHandle | None:
        return self._actors.get(name)

    def names(self) -> list[str]:
        with self._lock:
            return list(self._actors)

    def stop_later(self, name: str) -> None:
        handle = self._actors.get(name)
        if handle is not None:
            handle.stop_future()

    def stop(self, names: Sequence[str], timeout: float) -> list[str]:
        deadline = time.monotonic() + max(timeout, 0.0)
        pending: list[tuple[str, Any]] = []
        for name in names:
            handle = self._actors.get(name)
            if handle is not None:
                pending.append((name, handle.stop_future()))
        abandoned: list[str] = []
        for name, future in pending:
            try:
                future.get(timeout=max(deadline - time.monotonic(), 0.0))
            except pykka.Timeout:
                abandoned.append(name)
                self._forget(name)
        return abandoned

    def shutdown(self) -> None:
        """Nothing to release: actor threads end with their actors."""
