"""Documents (PDF, Office) as Markdown through the ``docs`` extra, images through ``vision``.

Conversion runs locally: MarkItDown is built without any LLM client and without plugins, so
no file content ever leaves the machine. Converted text and resized images are cached under
the workspaces root's hidden cache directory, keyed by content hash, never inside a workspace.
"""

from __future__ import annotations

import hashlib
import io
from pathlib import Path
from typing import Any

from toolcards.core.errors import RetriableError
from toolcards.tools.workspace.textfile import write_atomic

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


def is_document(path: Path) -> bool:
    return path.suffix.lower() in DOC_SUFFIXES


def document_markdown(path: Path, rel: str, cache: Path) -> str:
    """The Markdown of a document, converted once per content version."""
    data = path.read_bytes()
    key = hashlib.sha256(data).hexdigest()
    cached = cache / f"{key}.md"
    if cached.is_file():
        return cached.read_text(encoding="utf-8")
    try:
        from markitdown import MarkItDown
    except ImportError:
        raise RetriableError(
            f"{rel} is a {path.suffix} document; reading it needs the docs extra: "
            "pip install 'toolcards[docs]'"
        ) from None
    try:
        result = MarkItDown(enable_plugins=False).convert_stream(
            io.BytesIO(data), file_extension=path.suffix.lower()
        )
    except Exception as exc:
        raise RetriableError(f"could not convert {rel} to text: {type(exc).__name__}") from None
    text = str(result.text_content or "")
    write_atomic(cached, text.encode("utf-8"))
    return text


def image_content(path: Path, rel: str, cache: Path, max_dimension: int) -> Any:
    """The image as pydantic-ai ``BinaryContent``, scaled down to ``max_dimension`` pixels."""
    from pydantic_ai.messages import BinaryContent

    media_type = IMAGE_TYPES.get(path.suffix.lower())
    if media_type is None:
        kinds = ", ".join(sorted(IMAGE_TYPES))
        raise RetriableError(f"{rel} is not an image this tool can show ({kinds})")
    data = path.read_bytes()
    key = hashlib.sha256(data + str(max_dimension).encode()).hexdigest()
    cached = cache / f"{key}{path.suffix.lower()}"
    if cached.is_file():
        return BinaryContent(cached.read_bytes(), media_type=media_type)
    resized = _resize(data, rel, max_dimension)
    if resized is not None:
        write_atomic(cached, resized)
        data = resized
    if len(data) > MAX_IMAGE_BYTES:
        raise RetriableError(
            f"{rel} is larger than {MAX_IMAGE_BYTES // (1024 * 1024)} MiB; install "
            "'toolcards[vision]' to have images scaled down"
        )
    return BinaryContent(data, media_type=media_type)


def _resize(data: bytes, rel: str, max_dimension: int) -> bytes | None:
    """Scaled-down bytes in the same format, or None when no resize is needed or possible."""
    try:
        from PIL import Image
    except ImportError:
        return None
    try:
        with Image.open(io.BytesIO(data)) as image:
            if max(image.size) <= max_dimension:
                return None
            fmt = image.format or "PNG"
            copy = image.copy()
            copy.thumbnail((max_dimension, max_dimension))
            out = io.BytesIO()
            copy.save(out, format=fmt)
            return out.getvalue()
    except Exception as exc:
        raise RetriableError(f"{rel} is not a readable image: {type(exc).__name__}") from None
