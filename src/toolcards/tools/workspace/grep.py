"""workspace_grep: ripgrep when installed, an identical pure-Python search otherwise.

Both engines search the same files, chosen and opened here: a walk over held directory
descriptors (links never followed, hidden names skipped), each file opened with ``O_NOFOLLOW``
and checked with ``fstat`` (regular, not hard-linked unless allowed, within the size cap).
ripgrep reads their bytes from its standard input and never walks or opens a path itself.
The walk is bounded in entries and ends at the search's own deadline, so an ``include`` that
matches nothing costs the time limit at most, in both engines.
The Python engine matches with the ``regex`` package, which releases the interpreter lock while
matching and stops at a deadline, so a catastrophic pattern costs the time limit and no more;
a file whose matching takes long is matched again on a thread of its own, which the caller
waits for until the deadline by the clock (``regex`` counts it in CPU time, which a loaded
machine hands out slower);
a pattern whose counted repeats would make the compile itself slow is refused before it is
compiled (``regex_size.py``). A pattern ripgrep runs is never compiled in Python: ripgrep
checks it, with caps on its compiled size.
"""

from __future__ import annotations

import bisect
import contextlib
import contextvars
import itertools
import os
import queue
import re
import shutil
import stat
import subprocess
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import IO, TYPE_CHECKING

from toolcards.core.errors import RetriableError
from toolcards.core.progress import report_progress
from toolcards.core.threads import background_thread
from toolcards.tools.workspace.globs import WalkBound, glob_matches, iter_files
from toolcards.tools.workspace.listing import MAX_GLOB_ENTRIES
from toolcards.tools.workspace.locate import Lines
from toolcards.tools.workspace.paths import ENTRY_FLAGS, Spot
from toolcards.tools.workspace.regex_size import check_pattern_size
from toolcards.tools.workspace.textfile import read_fd, regular_fd

if TYPE_CHECKING:
    import regex

MAX_LINE_CHARS = 300
"""Characters of a matching line shown; a hit keeps one more (to know the line was longer),
never the whole line: 200 hits on lines of 10 MiB would hold 2 GiB for a 60 KB answer."""
_RG_MAX_COLUMNS = 4 * (MAX_LINE_CHARS + 1)
"""Bytes of a line ripgrep prints: at most 4 bytes a character (UTF-8, or one replaced invalid
byte sequence), so the preview holds the characters a hit keeps."""
MAX_GREP_ENTRIES = MAX_GLOB_ENTRIES
"""Entries (files, directories, links) one workspace_grep walks, as many as a glob: with an
``include`` matching nothing, a walk of 300,000 files ran to its end whatever the time limit."""
_CR_BEFORE_NL = re.compile(r"\r+(?=\n)|\r+\Z")
_NOT_LINE_LOCAL = re.compile(r"\(\?(?:[!>r]|<!|V1|[a-zA-Z0-9]*-)|[*+?}]\+|\\[AGKZz]|\(\*|\{[deis]")
"""Constructs whose meaning depends on text beyond one line (or on pruning): negative
look-arounds, atomic groups and possessive repeats, ``\\A``, ``\\Z``, ``\\G``, ``\\K``, verbs,
reverse or V1 matching, fuzzy counts; and inline flags that clear a flag (``(?-m:^)`` anchors
only at the text's start in the whole-file pass, which is compiled ``MULTILINE``). With any of
them in a pattern, every line is matched on its own instead of the whole file at once."""


@dataclass(frozen=True, slots=True)
class GrepOptions:
    """How one search runs: the hit cap, the engine and the time limit."""

    max_matches: int = 200
    engine: str = "auto"
    timeout_s: float = 20.0


@dataclass(frozen=True, slots=True)
class GrepHit:
    path: str
    line: int
    text: str

    def render(self) -> str:
        text = self.text
        if len(text) > MAX_LINE_CHARS:
            text = text[:MAX_LINE_CHARS] + " [...]"
        return f"{self.path}:{self.line}:{text}"


def check_pattern(pattern: str) -> None:
    """The checks of a model's regex that both engines share (nothing is compiled)."""
    if not pattern:
        raise RetriableError("pattern is empty")
    if "\x00" in pattern or "\n" in pattern:
        raise RetriableError("pattern may not contain NUL or newline characters")


def compile_pattern(pattern: str) -> regex.Pattern[str]:
    """A model's regex compiled for the Python engine, refused first when its counted repeats
    would make the compile itself slow (it runs in C with the interpreter lock held)."""
    import regex  # lazy: regex, ~2x python -c pass; only a grep needs it

    check_pattern(pattern)
    check_pattern_size(pattern)
    try:
        return regex.compile(pattern)
    except regex.error as exc:
        raise RetriableError(f"invalid regex pattern {pattern!r}: {exc}") from None


def find_rg() -> str | None:
    """The ripgrep executable on PATH, if any."""
    return shutil.which("rg")


class SearchFiles:
    """The files one search reads, in ripgrep's path order, each yielded opened.

    ``spot`` is the file or directory searched. A file named directly is searched even when
    hidden or not matching ``include`` (as ripgrep does), and refused with a clear error when it
    is not a regular file, is hard-linked (unless allowed) or is over the cap. In a directory
    walk such files are skipped; ``skipped`` counts those left out for size or hard links.
    An engine bounds the walk with :meth:`walk_within` before it starts.
    """

    def __init__(self, spot: Spot, include: str, cap: int, allow_hardlinks: bool) -> None:
        self.spot = spot
        self.include = include
        self.cap = cap
        self.allow_hardlinks = allow_hardlinks
        self.skipped = 0
        self.bound: WalkBound | None = None

    def walk_within(self, seconds: float) -> float:
        """Bound the walk about to start to :data:`MAX_GREP_ENTRIES` entries and ``seconds``,
        the search's time limit (one deadline for walking and matching); that deadline."""
        self.bound = WalkBound(MAX_GREP_ENTRIES, seconds)
        return self.bound.deadline

    def out_of_time(self) -> bool:
        """True when the walk was cut at its deadline: the search timed out."""
        return self.bound is not None and self.bound.narrowed and self.bound.expired()

    @property
    def narrowed(self) -> str:
        """The line that ends an answer whose walk was cut ("" for a whole walk)."""
        bound = self.bound
        return bound.note("include") if bound is not None and bound.narrowed else ""

    def __iter__(self) -> Iterator[tuple[str, int]]:
        """(workspace-relative path, descriptor): the caller closes each descriptor."""
        spot = self.spot
        if not spot.is_dir:
            fd = regular_fd(spot, cap=self.cap, allow_hardlinks=self.allow_hardlinks)
            yield spot.rel, os.dup(fd)
            return
        cut = 0 if spot.rel == "." else len(spot.rel) + 1
        for rel, dir_fd, name in iter_files(spot.opened_dir(), spot.rel, bound=self.bound):
            if self.include and not glob_matches(self.include, rel[cut:]):
                continue
            opened = self._open(dir_fd, name)
            if opened is not None:
                yield rel, opened

    def texts(self) -> Iterator[tuple[str, bytes]]:
        """(path, bytes) of each searched file that is text (no NUL byte), in order; the
        caller hears of every 100th file (MCP progress)."""
        for count, (rel, fd) in enumerate(self, 1):
            if count % 100 == 0:
                report_progress(count, None, f"searched {count} files")
            try:
                data = read_fd(fd, self.cap, rel)
            except (OSError, RetriableError):
                continue
            finally:
                os.close(fd)
            if data and b"\x00" not in data:
                yield rel, data

    def _open(self, dir_fd: int, name: str) -> int | None:
        try:
            fd = os.open(name, ENTRY_FLAGS, dir_fd=dir_fd)
        except OSError:
            return None  # a link or gone by now: never followed
        st = os.fstat(fd)
        bad_type = not stat.S_ISREG(st.st_mode)
        too_big = st.st_size > self.cap or (st.st_nlink > 1 and not self.allow_hardlinks)
        if bad_type or too_big:
            os.close(fd)
            if not bad_type:
                self.skipped += 1
            return None
        return fd


# ---- the Python engine ---------------------------------------------------------------------


def grep_python(
    pattern: regex.Pattern[str], files: SearchFiles, options: GrepOptions
) -> list[GrepHit]:
    """The search in Python: same files, same order, same lines as ripgrep's output."""
    import regex  # lazy: regex, ~2x python -c pass; only a grep needs it

    deadline = files.walk_within(options.timeout_s)
    whole = None
    if _NOT_LINE_LOCAL.search(pattern.pattern) is None:
        whole = regex.compile(pattern.pattern, pattern.flags | regex.MULTILINE)
    limit = options.max_matches
    hits: list[GrepHit] = []
    slow = _SlowFiles(pattern, whole, deadline)
    try:
        for rel, data in files.texts():
            text = data.decode("utf-8", "replace")
            if "\r" in text:
                text = _CR_BEFORE_NL.sub("", text)
            found = len(hits)
            if not _search_slice(pattern, whole, text, rel, hits, limit, deadline):
                hits += slow.search(rel, text, limit - found)
            if len(hits) > limit:
                break
        if len(hits) <= limit and files.out_of_time():
            raise TimeoutError
    except TimeoutError:
        raise _timed_out(options.timeout_s) from None
    finally:
        slow.close()
    return hits


_SLICE = 0.1
"""Seconds a file's matching may take on the caller's thread."""


def _search_slice(
    pattern: regex.Pattern[str],
    whole: regex.Pattern[str] | None,
    text: str,
    rel: str,
    hits: list[GrepHit],
    limit: int,
    deadline: float,
) -> bool:
    """:func:`_search_text` for at most :data:`_SLICE` on the caller's thread; False, its hits
    dropped, when cut off. The frames it was cut in are gone before the file is matched again
    (kept alive by the exception, they once held a copy of the file split into lines)."""
    found = len(hits)
    try:
        _search_text(
            pattern, whole, text, rel, hits, limit, min(deadline, time.monotonic() + _SLICE)
        )
    except TimeoutError:
        del hits[found:]
        return False
    return True


class _SlowFiles:
    """Files whose matching took longer than :data:`_SLICE`, matched again on a thread of their
    own, which the caller waits for until the deadline by the clock: ``regex``'s own timeout
    counts CPU time, so on half a core a 1 s limit took 2 s. A match cut off by the deadline is
    left to end by itself: it reads nothing but its text, and stops once its CPU time reaches
    what was left of the limit."""

    def __init__(
        self, pattern: regex.Pattern[str], whole: regex.Pattern[str] | None, deadline: float
    ) -> None:
        self._pattern, self._whole, self._deadline = pattern, whole, deadline
        self._todo: queue.SimpleQueue[tuple[str, str, int] | None] = queue.SimpleQueue()
        self._done: queue.SimpleQueue[list[GrepHit] | BaseException] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def search(self, rel: str, text: str, limit: int) -> list[GrepHit]:
        """The hits of ``text`` (up to ``limit`` + 1); TimeoutError when the deadline comes
        first."""
        if self._thread is None:
            self._thread = background_thread(self._run, name="toolcards-grep")
            self._thread.start()
        self._todo.put((rel, text, limit))
        try:
            got = self._done.get(timeout=_left(self._deadline))
        except queue.Empty:
            raise TimeoutError from None
        if isinstance(got, BaseException):
            raise got
        return got

    def close(self) -> None:
        """Let the thread end (after the match it may still be running)."""
        if self._thread is not None:
            self._todo.put(None)

    def _run(self) -> None:
        while (job := self._todo.get()) is not None:
            rel, text, limit = job
            hits: list[GrepHit] = []
            try:
                _search_text(self._pattern, self._whole, text, rel, hits, limit, self._deadline)
            except BaseException as exc:  # handed to the caller (a timeout, most often)
                self._done.put(exc)
            else:
                self._done.put(hits)


def _search_text(
    pattern: regex.Pattern[str],
    whole: regex.Pattern[str] | None,
    text: str,
    rel: str,
    hits: list[GrepHit],
    limit: int,
    deadline: float,
) -> None:
    """Append the lines of ``text`` where ``pattern`` matches (until ``limit`` + 1 hits).

    With a line-local pattern, a pass over the whole text (``MULTILINE``) finds the lines that
    matches touch, lazily; only those are matched line by line. A line that matches on its own
    is touched by a whole-text match at or before the place it matches, so none is missed.
    The text is never split: one line at a time is cut from it (its lines as strings took 50
    times the file's size).
    """
    touched = _every_line(text) if whole is None else _touched_lines(whole, text, deadline)
    for number, start in touched:
        if start >= len(text):
            return  # the empty line after a final newline is no line
        end = text.find("\n", start)
        line = text[start:] if end == -1 else text[start:end]
        if pattern.search(line, concurrent=True, timeout=_left(deadline)):
            hits.append(GrepHit(rel, number + 1, line[: MAX_LINE_CHARS + 1]))
            if len(hits) > limit:
                return


def _every_line(text: str) -> Iterator[tuple[int, int]]:
    """(0-based number, start) of each line of ``text``, in order."""
    start = 0
    for number in itertools.count():
        yield number, start
        start = text.find("\n", start) + 1
        if not start:
            return


def _touched_lines(
    whole: regex.Pattern[str], text: str, deadline: float
) -> Iterator[tuple[int, int]]:
    """(0-based number, start) of each line touched by the whole-text matches of ``whole``, in
    order. Matches do not overlap: one shares at most its first line with the one before."""
    lines = Lines(text)
    done = -1
    for match in whole.finditer(text, concurrent=True, timeout=_left(deadline)):
        start, end = match.span()
        number, at = lines.of(start) - 1, lines.start
        last = number + text.count("\n", start, end)
        while True:
            if number > done:
                yield number, at
            if number == last:
                break
            number, at = number + 1, text.find("\n", max(at, start)) + 1
        done = last
        _left(deadline)


def _left(deadline: float) -> float:
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError
    return left


def _timed_out(seconds: float) -> RetriableError:
    return RetriableError(
        f"search timed out after {seconds:g} s and was stopped; narrow the path or include, "
        "or simplify the pattern (nested repetition such as (a|aa)+ can take exponential time)"
    )


# ---- ripgrep -------------------------------------------------------------------------------


RG_SIZE_LIMIT = "10M"
"""ripgrep's caps on its compiled regex and lazy DFA: a pattern over them is refused at once
(``(?:a{1000}){6000}`` in a few milliseconds) instead of compiled."""


def rg_argv(rg: str, pattern: str, limit: int) -> list[str]:
    """ripgrep's argv: the pattern is an option *value*; the only input is standard input."""
    return [
        rg,
        "--no-config",
        f"--regex-size-limit={RG_SIZE_LIMIT}",
        f"--dfa-size-limit={RG_SIZE_LIMIT}",
        "--no-heading",
        "--no-filename",
        "--line-number",
        "--color=never",
        "--no-messages",
        "--encoding=none",
        f"--max-columns={_RG_MAX_COLUMNS}",
        "--max-columns-preview",
        f"--max-count={limit + 1}",
        f"--regexp={pattern}",
        "--",
        "-",
    ]


class _Feed:
    """Writes the searched files, one after the other, into ripgrep's standard input and
    remembers at which line of that stream each file starts."""

    def __init__(self, files: SearchFiles, sink: IO[bytes]) -> None:
        self.files = files
        self.sink = sink
        self.starts: list[int] = []
        self.rels: list[str] = []
        self.error: BaseException | None = None

    def run(self) -> None:
        line = 1
        try:
            for rel, data in self.files.texts():
                if not data.endswith(b"\n"):
                    data += b"\n"
                self.starts.append(line)  # before the bytes: ripgrep cannot answer sooner
                self.rels.append(rel)
                self.sink.write(data)
                line += data.count(b"\n")
        except (BrokenPipeError, ValueError):
            pass  # ripgrep stopped reading (enough hits, a timeout, a bad pattern)
        except BaseException as exc:
            self.error = exc
        finally:
            with contextlib.suppress(OSError, ValueError):
                self.sink.close()

    def locate(self, line: int) -> tuple[str, int]:
        k = bisect.bisect_right(self.starts, line) - 1
        return self.rels[k], line - self.starts[k] + 1


def grep_rg(rg: str, pattern: str, files: SearchFiles, options: GrepOptions) -> list[GrepHit]:
    """ripgrep as the matcher of the files this module opened and read, streamed through its
    standard input in path order: it never opens a path itself, so it follows no link."""
    limit = options.max_matches
    env = {k: v for k, v in os.environ.items() if not k.startswith("RIPGREP")}
    hits: list[GrepHit] = []
    fired = threading.Event()
    deadline = files.walk_within(options.timeout_s)
    with subprocess.Popen(
        rg_argv(rg, pattern, limit),
        cwd="/",
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    ) as proc:
        assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
        feed = _Feed(files, proc.stdin)
        # the feed reports progress: it runs in a copy of the caller's context (the reporter)
        context = contextvars.copy_context()
        writer = background_thread(context.run, args=(feed.run,), name="grep-feed")

        def stop() -> None:
            fired.set()
            proc.kill()

        timer = threading.Timer(max(0.0, deadline - time.monotonic()), stop)
        writer.start()
        timer.start()
        try:
            for raw in proc.stdout:
                number, sep, text = raw.partition(b":")
                if not sep or not number.isdigit():
                    continue
                rel, line = feed.locate(int(number))
                shown = text.decode("utf-8", "replace").rstrip("\r\n")[: MAX_LINE_CHARS + 1]
                hits.append(GrepHit(rel, line, shown))  # a long line's preview marker cut off
                if len(hits) > limit:
                    break
        finally:
            timer.cancel()
            proc.kill()
            writer.join()
            err = proc.stderr.read()
            proc.wait()
    if feed.error is not None:
        raise feed.error
    if (fired.is_set() or files.out_of_time()) and len(hits) <= limit:
        raise _timed_out(options.timeout_s)
    message = err.decode("utf-8", "replace").strip()
    if proc.returncode == 2 and not hits and message:
        failure = f"search failed: {' '.join(message.splitlines()[:6])}"
        if "exceeds size limit" in message:
            raise RgPatternError(f"{failure} (a pattern too large for ripgrep: use smaller "
                                 "counted repeats such as {1000}, or + and *)")  # fmt: skip
        if "regex parse error" in message:
            raise RgPatternError(failure)
        raise RetriableError(failure)
    return hits


class RgPatternError(RetriableError):
    """ripgrep refuses a pattern Python's engine may take: its dialect has no look-around,
    back references or escapes such as ``\\"``, and its compiled size is capped."""


def render(hits: list[GrepHit], limit: int, skipped: int = 0, narrowed: str = "") -> str:
    """Hits as ``path:line:text`` lines, capped, with a truncation marker; ``narrowed`` is the
    line of a walk cut by its bound (:attr:`SearchFiles.narrowed`)."""
    lines = [h.render() for h in hits[:limit]] or ["No matches found."]
    if len(hits) > limit:
        lines.append(f"[... more than {limit} matches; narrow the pattern, path or include]")
    if skipped:
        lines.append(
            f"[{skipped} file{'s' if skipped > 1 else ''} not searched: over the size cap or "
            "hard-linked]"
        )
    if narrowed:
        lines.append(narrowed)
    return "\n".join(lines)
