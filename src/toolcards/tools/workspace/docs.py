"""Documents (PDF, Office) as Markdown through the ``docs`` extra, images through ``vision``.

Conversion runs locally, in a child process with a time limit: MarkItDown is built without any
LLM client and without plugins, so no file content ever leaves the machine. Converted text and
resized images are cached under the workspaces root's hidden cache directory, keyed by content
hash, never inside a workspace.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib.util
import io
import os
import signal
import subprocess
import sys
import tempfile
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
MAX_IMAGE_BYTES = 10 * 1024 * 1024


def is_document(name: str) -> bool:
    return PurePosixPath(name).suffix.lower() in DOC_SUFFIXES


def document_markdown(data: bytes, rel: str, cache: Path, timeout_s: float) -> str:
    """The Markdown of a document, converted once per content version.

    The conversion runs in a child process (its own session) that is killed, with anything it
    started, when ``timeout_s`` passes: a hostile document can cost that much time and no more.
    """
    suffix = PurePosixPath(rel).suffix.lower()
    key = hashlib.sha256(data).hexdigest()
    cached = cache / f"{key}.md"
    if cached.is_file():
        return cached.read_text(encoding="utf-8")
    if importlib.util.find_spec("markitdown") is None:
        raise RetriableError(
            f"{rel} is a {suffix} document; reading it needs the docs extra: "
            "pip install 'toolcards[docs]'"
        )
    cache.mkdir(parents=True, exist_ok=True)
    text = _convert(data, suffix, rel, cache, timeout_s)
    write_cache(cached, text.encode("utf-8"))
    return text


def _convert(data: bytes, suffix: str, rel: str, cwd: Path, timeout_s: float) -> str:
    argv = [sys.executable, "-m", "toolcards.tools.workspace.convert", suffix]
    with subprocess.Popen(
        argv,
        cwd=cwd,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    ) as proc:
        try:
            out, err = proc.communicate(data, timeout=timeout_s)
        except subprocess.TimeoutExpired:
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


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(OSError):
        os.killpg(proc.pid, signal.SIGKILL)
    proc.kill()
    proc.wait()


def write_cache(path: Path, data: bytes) -> None:
    """Write a cache file atomically (the cache is ours, outside every workspace)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
        os.replace(name, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(name)
        raise


def image_content(data: bytes, rel: str, cache: Path, max_dimension: int) -> Any:
    """The image as pydantic-ai ``BinaryContent``, scaled down to ``max_dimension`` pixels."""
    # lazy: pydantic-ai, ~1 s; only an image read needs it
    from pydantic_ai.messages import BinaryContent

    suffix = PurePosixPath(rel).suffix.lower()
    media_type = IMAGE_TYPES[suffix]
    key = hashlib.sha256(data + str(max_dimension).encode()).hexdigest()
    cached = cache / f"{key}{suffix}"
    if cached.is_file():
        return BinaryContent(cached.read_bytes(), media_type=media_type)
    resized = _resize(data, rel, max_dimension)
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


def _resize(data: bytes, rel: str, max_dimension: int) -> bytes | None:
    """Scaled-down bytes in the same format, or None when no resize is needed or possible."""
    try:
        from PIL import Image  # lazy: extra vision (pillow)
    except ImportError:
        return None
    try:
        with Image.open(io.BytesIO(data)) as image:
            pixel_cap = Image.MAX_IMAGE_PIXELS or 0
            if pixel_cap and image.size[0] * image.size[1] > pixel_cap:
                raise RetriableError(
                    f"{rel} has {image.size[0]}x{image.size[1]} pixels, too many to scale"
                )
            if max(image.size) <= max_dimension:
                return None
            fmt = image.format or "PNG"
            copy = image.copy()
            copy.thumbnail((max_dimension, max_dimension))
            out = io.BytesIO()
            copy.save(out, format=fmt)
            return out.getvalue()
    except RetriableError:
        raise
    except Exception as exc:
        raise RetriableError(f"{rel} is not a readable image: {type(exc).__name__}") from None
