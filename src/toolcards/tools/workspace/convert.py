"""Child process of ``workspace_read``: one document (bytes on stdin) to Markdown (stdout).

Usage: ``python -m toolcards.tools.workspace.convert .pdf < file.pdf``. Run by ``docs.py`` with
a time limit; it imports MarkItDown only here, so a slow or hostile document never holds the
parent's interpreter.

MarkItDown is built with only the one converter the suffix names: its built-ins also guess the
type from the content, so a ``.pdf`` that is a WAV would reach the audio converter (which sends
it to Google's speech API when ``speech_recognition`` is installed), and images and audio would
reach exiftool. Content that converter cannot read fails; nothing else is tried.
"""

from __future__ import annotations

import io
import sys
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from markitdown import MarkItDown


def main() -> int:
    suffix = sys.argv[1] if len(sys.argv) > 1 else ""
    data = sys.stdin.buffer.read()
    from markitdown import StreamInfo  # lazy: extra docs (markitdown)

    try:
        result = _markitdown(suffix).convert_stream(
            io.BytesIO(data), stream_info=StreamInfo(extension=suffix)
        )
    except Exception as exc:
        sys.stderr.write(f"{type(exc).__name__}\n")
        return 3
    sys.stdout.buffer.write(str(result.text_content or "").encode("utf-8"))
    return 0


def _markitdown(suffix: str) -> MarkItDown:
    """MarkItDown with the one converter of ``suffix`` documents; KeyError for another suffix.

    Built without its built-ins, which would also register every other converter and the
    exiftool found on the PATH, and without LLM client or plugins."""
    from markitdown import DocumentConverter, MarkItDown  # lazy: extra docs (markitdown)
    from markitdown.converters import (  # lazy: extra docs (markitdown)
        DocxConverter,
        PdfConverter,
        PptxConverter,
        XlsConverter,
        XlsxConverter,
    )

    converters: dict[str, type[DocumentConverter]] = {
        ".pdf": PdfConverter,
        ".docx": DocxConverter,
        ".xlsx": XlsxConverter,
        ".xls": XlsConverter,
        ".pptx": PptxConverter,
    }
    markitdown = MarkItDown(enable_builtins=False, enable_plugins=False)
    markitdown.register_converter(converters[suffix]())
    return markitdown


if __name__ == "__main__":
    sys.exit(main())
