"""Documents (PDF, Office) as Markdown through the ``docs`` extra, images through ``vision``.

Conversion runs locally, in a child process with a time limit, an address-space limit and a
cap on the text it may hand back: MarkItDown is built with only the converter the suffix names
(never one picked by a guess from the content, such as its audio converter), without any LLM
client and without plugins, so no file content ever leaves the machine. Converted text and
resized images are cached under the workspaces root's hidden cache directory, keyed by content
hash, never inside a workspace.
"""

from __future__ import annotations

import codecs
import contextlib
import hashlib
import importlib.util
import io
import os
import resource
import selectors
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path, PurePosixPath
from typing import Any

from toolcards.core.errors import RetriableError

DOC_SUFFIXES = frozenset({".pdf", ".docx", ".xlsx", ".xls", ".pptx"})
IMAGE_TYPES = {
    ".png": "image/png",
    ".jpg": "image/jpeg",
    ".jpeg": "image/jpeg",
    ".webp": "image/webp",
    ".gif": "image/gif",
    ".bmp": "image/bmp",
}
"""Media type of each image suffix workspace_view shows; its subtype, upper-cased, is the one
Pillow format (PNG, JPEG, WEBP, GIF, BMP) a file of that suffix is opened as."""
MAX_IMAGE_BYTES = 10 * 1024 * 1024
MAX_IMAGE_PIXELS = 25_000_000
"""Most pixels (width x height, from the header) of an image workspace_view opens with Pillow,
which decodes it in this process at up to 4 bytes a pixel: a 12 MP photo or a 5K screenshot
fits, and one view then peaks near 250 MiB (an RGBA image at the cap, decoded and
premultiplied). A small file can declare far more (a PNG of zeros compresses a thousandfold:
336 KiB for 88 M pixels, 1.2 GiB decoded), so a larger image is refused before any decode."""
MAX_DOCUMENT_TEXT_BYTES = 4 * 1024 * 1024
"""Most bytes of a document's text kept, cached and read back: twenty times what one
workspace_read call shows by default, so paging with ``offset`` reaches far, while a small
document whose text expands (a zip of repeated text) costs this much memory and disk, no more.
The converter is killed once it writes past it and the text ends with a note that it was cut."""
MAX_CACHE_BYTES = 64 * 1024 * 1024
"""Most bytes one workspace's cache folder (of document texts, or of resized images) keeps:
sixteen capped document texts. Each document read leaves its text there, outside the
workspace and its quota, and deleting the document does not remove it; past this, writing a
new entry removes the least recently used ones."""
MAX_CACHE_ENTRIES = 1000
"""Most entries one workspace's cache folder keeps, evicted as :data:`MAX_CACHE_BYTES`: each
write lists the folder, so its length stays short."""
CONVERTER_MEMORY_BYTES = 1 << 30
"""Address space (RLIMIT_AS) of the converter child, as the exec tool's default: a normal
conversion peaks near 450 MiB; a document whose parsed form grows past this fails with
MemoryError instead of taking the host's memory."""
_CUT_NOTE = "\n\n[... the document's text is cut here: it is longer than {} MiB]\n"
_CHUNK = 1 << 16
_STDERR_KEEP = 4096
_CAN_PRLIMIT = hasattr(resource, "prlimit")
"""Linux: the memory limit is set on the started child from outside (no ``preexec_fn``)."""


def is_document(name: str) -> bool:
    return PurePosixPath(name).suffix.lower() in DOC_SUFFIXES


def document_markdown(data: bytes, rel: str, cache: Path, timeout_s: float) -> str:
    """The Markdown of a document, converted once per content version.

    The conversion runs in a child process (its own session) that is killed, with anything it
    started, when ``timeout_s`` passes or its text passes :data:`MAX_DOCUMENT_TEXT_BYTES`, and
    whose address space is :data:`CONVERTER_MEMORY_BYTES`: a hostile document can cost that
    much time, memory and cache, and no more.
    """
    suffix = PurePosixPath(rel).suffix.lower()
    key = hashlib.sha256(data).hexdigest()
    cached = cache / f"{key}.md"
    text = _cached_text(cached)
    if text is not None:
        return text
    if importlib.util.find_spec("markitdown") is None:
        raise RetriableError(
            f"{rel} is a {suffix} document; reading it needs the docs extra: "
            "pip install 'toolcards[docs]'"
        )
    cache.mkdir(parents=True, exist_ok=True)
    text = _convert(data, suffix, rel, cache, timeout_s)
    write_cache(cached, text.encode("utf-8"))
    return text


def _cached_text(path: Path) -> str | None:
    """The cached text at ``path``, or None when there is none or it is over the cap (written
    before there was one: converted again, and replaced by a capped text)."""
    data = _read_cache(path, MAX_DOCUMENT_TEXT_BYTES + 1)
    if data is None or len(data) > MAX_DOCUMENT_TEXT_BYTES:
        return None
    return data.decode("utf-8", "replace")


def _read_cache(path: Path, limit: int = -1) -> bytes | None:
    """The bytes of a cache entry (at most ``limit``), marked as used now, or None when there
    is none (never written, or evicted meanwhile)."""
    try:
        with open(path, "rb") as handle:
            _touch(handle.fileno())
            return handle.read(limit)
    except (FileNotFoundError, IsADirectoryError):
        return None


def _converter_argv(suffix: str) -> list[str]:
    """The converter child: this interpreter running :mod:`.convert` on a ``suffix`` document."""
    return [sys.executable, "-m", "toolcards.tools.workspace.convert", suffix]


def _convert(data: bytes, suffix: str, rel: str, cwd: Path, timeout_s: float) -> str:
    memory = (CONVERTER_MEMORY_BYTES, CONVERTER_MEMORY_BYTES)
    with subprocess.Popen(
        _converter_argv(suffix),
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        preexec_fn=None if _CAN_PRLIMIT else lambda: resource.setrlimit(resource.RLIMIT_AS, memory),
    ) as proc:
        try:
            if _CAN_PRLIMIT:  # set before the document is written: the child waits for it
                with contextlib.suppress(ProcessLookupError):
                    resource.prlimit(proc.pid, resource.RLIMIT_AS, memory)  # type: ignore[attr-defined,unused-ignore]
            deadline = time.monotonic() + timeout_s
            out, err, cut = _exchange(proc, data, deadline)
            if cut:
                _kill_group(proc)
                return _cut_text(out)
            proc.wait(max(0.0, deadline - time.monotonic()))
        except (TimeoutError, subprocess.TimeoutExpired):
            _kill_group(proc)
            raise RetriableError(
                f"converting {rel} to text took longer than {timeout_s:g} s and was stopped"
            ) from None
        except BaseException:
            _kill_group(proc)
            raise
    if proc.returncode != 0:
        reason = err.decode("utf-8", "replace").strip().splitlines()[-1:] or ["no output"]
        raise RetriableError(f"could not convert {rel} to text: {reason[0][:200]}")
    return out.decode("utf-8", "replace")


def _exchange(
    proc: subprocess.Popen[bytes], data: bytes, deadline: float
) -> tuple[bytes, bytes, bool]:
    """Write ``data`` to the child while reading its output, as ``communicate`` does, but keep
    at most :data:`MAX_DOCUMENT_TEXT_BYTES` + 1 bytes of stdout (``cut`` is then True and the
    child is still running) and the last bytes of stderr. TimeoutError past ``deadline``."""
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    out, err = bytearray(), bytearray()
    todo = memoryview(data)
    with selectors.DefaultSelector() as selector:
        selector.register(proc.stdin, selectors.EVENT_WRITE)
        selector.register(proc.stdout, selectors.EVENT_READ)
        selector.register(proc.stderr, selectors.EVENT_READ)
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            os.set_blocking(pipe.fileno(), False)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            for key, _ in selector.select(left):
                if key.fileobj is proc.stdin:
                    todo = _write_some(key.fd, todo)
                    done = not todo
                else:
                    chunk = os.read(key.fd, _CHUNK)
                    (out if key.fileobj is proc.stdout else err).extend(chunk)
                    done = not chunk
                if done:
                    selector.unregister(key.fileobj)
                    key.fileobj.close()  # type: ignore[union-attr]
            if len(out) > MAX_DOCUMENT_TEXT_BYTES:
                return bytes(out), bytes(err), True
            del err[:-_STDERR_KEEP]
    return bytes(out), bytes(err), False


def _write_some(fd: int, todo: memoryview) -> memoryview:
    """What is left of ``todo`` after one write (nothing when the child stopped reading)."""
    try:
        return todo[os.write(fd, todo[:_CHUNK]) :]
    except BrokenPipeError:
        return todo[:0]


def _cut_text(out: bytes) -> str:
    """The head of an over-long text, whole characters only, ending with the cut note; its
    UTF-8 is at most :data:`MAX_DOCUMENT_TEXT_BYTES` bytes (the cache never holds more)."""
    note = _CUT_NOTE.format(MAX_DOCUMENT_TEXT_BYTES // (1024 * 1024))
    head = out[: MAX_DOCUMENT_TEXT_BYTES - len(note.encode())]
    return codecs.getincrementaldecoder("utf-8")("replace").decode(head) + note


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()
    proc.wait()


def write_cache(path: Path, data: bytes) -> None:
    """Write a cache file atomically (the cache is ours, outside every workspace), then evict
    the least recently used entries past :data:`MAX_CACHE_BYTES` or :data:`MAX_CACHE_ENTRIES`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            _touch(handle.fileno())
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise
    _evict(path.parent, keep=path.name)


def _touch(fd: int) -> None:
    """Mark an opened cache entry as used now: its mtime is the order :func:`_evict` follows,
    set here to the nanosecond (the file system's own times may be a clock tick coarse, and
    its atime is never updated on ``noatime`` mounts)."""
    now = time.time_ns()
    with contextlib.suppress(OSError):
        os.utime(fd, ns=(now, now))


def _evict(folder: Path, keep: str) -> None:
    """Remove the least recently used entries of ``folder`` (never ``keep``, just written)
    until it holds at most :data:`MAX_CACHE_ENTRIES` entries and :data:`MAX_CACHE_BYTES`."""
    total = 0
    for count, (_, size, name) in enumerate(sorted(_entries(folder), reverse=True), 1):
        total += size
        if name != keep and (count > MAX_CACHE_ENTRIES or total > MAX_CACHE_BYTES):
            with contextlib.suppress(OSError):  # another writer evicted it first
                os.unlink(folder / name)


def _entries(folder: Path) -> list[tuple[int, int, str]]:
    """(mtime, size, name) of the cache entries in ``folder``: only regular files directly in
    it, so no removal reaches a link's target or a subfolder; names starting with a dot are
    writes still in progress."""
    found: list[tuple[int, int, str]] = []
    with os.scandir(folder) as listing:
        for entry in listing:
            with contextlib.suppress(OSError):  # removed while listed
                if not entry.name.startswith(".") and entry.is_file(follow_symlinks=False):
                    st = entry.stat(follow_symlinks=False)
                    found.append((st.st_mtime_ns, st.st_size, entry.name))
    return found


def image_content(data: bytes, rel: str, cache: Path, max_dimension: int) -> Any:
    """The image as pydantic-ai ``BinaryContent``, scaled down to ``max_dimension`` pixels."""
    # lazy: pydantic-ai, ~1 s; only an image read needs it
    from pydantic_ai.messages import BinaryContent

    suffix = PurePosixPath(rel).suffix.lower()
    media_type = IMAGE_TYPES[suffix]
    key = hashlib.sha256(data + str(max_dimension).encode()).hexdigest()
    cached = cache / f"{key}{suffix}"
    hit = _read_cache(cached)
    if hit is not None:
        return BinaryContent(hit, media_type=media_type)
    resized = _resize(data, rel, media_type, max_dimension)
    if resized is not None:
        write_cache(cached, resized)
        data = resized
    if len(data) > MAX_IMAGE_BYTES:
        raise RetriableError(
            f"{rel} is larger than {MAX_IMAGE_BYTES // (1024 * 1024)} MiB; install "
            "'toolcards[vision]' to have images scaled down"
        )
    return BinaryContent(data, media_type=media_type)


def check_image_name(rel: str) -> None:
    """RetriableError unless ``rel`` has an image suffix this tool shows."""
    if PurePosixPath(rel).suffix.lower() not in IMAGE_TYPES:
        kinds = ", ".join(sorted(IMAGE_TYPES))
        raise RetriableError(f"{rel} is not an image this tool can show ({kinds})")


def _resize(data: bytes, rel: str, media_type: str, max_dimension: int) -> bytes | None:
    """Scaled-down bytes in the same format, or None when no resize is needed or possible.

    Only the header is read before the pixel count is checked; the opened image is then scaled
    in place, never copied whole: a JPEG much larger than ``max_dimension`` is decoded at a
    reduced scale (``thumbnail`` drafts it), other formats are decoded once and shrunk by a
    whole factor (``reduce``) before they are resampled. Only the format the suffix names is
    opened: Pillow guesses the format from the content, and some of its readers (ICO) decode
    the whole image while opening it, before its size can be checked."""
    try:
        from PIL import Image, UnidentifiedImageError  # lazy: extra vision (pillow)
    except ImportError:
        return None
    kind = media_type.removeprefix("image/").upper()
    try:
        with Image.open(io.BytesIO(data), formats=[kind]) as image:
            width, height = image.size
            if width * height > MAX_IMAGE_PIXELS:
                raise RetriableError(
                    f"{rel} is {width}x{height} pixels, over the "
                    f"{MAX_IMAGE_PIXELS // 1_000_000} M pixel cap for an image"
                )
            if max(image.size) <= max_dimension:
                return None
            fmt = image.format or "PNG"
            image.thumbnail((max_dimension, max_dimension))
            out = io.BytesIO()
            image.save(out, format=fmt)
            return out.getvalue()
    except RetriableError:
        raise
    except UnidentifiedImageError:
        raise RetriableError(f"{rel} is not a {kind} image") from None
    except Exception as exc:
        raise RetriableError(f"{rel} is not a readable image: {type(exc).__name__}") from None
