"""Document formats by name and by MIME type, and what a conversion yields. Pure tables.

Which files are read as text, which are converted (in the worker process, `convert.worker`),
and which are refused with a reason that names the format.
"""

from __future__ import annotations

import posixpath

import msgspec

# Read as text by the hasher itself (any other extension with text content is read too).
TEXT = "text"
KINDS: dict[str, str] = {
    ".md": TEXT, ".markdown": TEXT, ".mdx": TEXT, ".txt": TEXT, ".text": TEXT, ".rst": TEXT,
    ".pdf": "pdf",
    ".docx": "docx", ".docm": "docx",
    ".html": "html", ".htm": "html", ".xhtml": "html",
    ".pptx": "pptx",
    ".xlsx": "xlsx", ".xlsm": "xlsx",
    ".epub": "epub",
    ".csv": "csv", ".tsv": "csv",
    # Read by OCR (convert/ocr.py) when the `ocr` extra is installed; skipped, saying so,
    # when not.
    ".png": "image", ".jpg": "image", ".jpeg": "image", ".webp": "image", ".tif": "image",
    ".tiff": "image", ".bmp": "image", ".gif": "image",
}
# Known formats that no converter reads: named in the error instead of a generic refusal.
UNSUPPORTED: dict[str, str] = {
    ".doc": "legacy Word (.doc): save it as .docx",
    ".ppt": "legacy PowerPoint (.ppt): save it as .pptx",
    ".xls": "legacy Excel (.xls): save it as .xlsx",
    ".odt": "OpenDocument text", ".ods": "OpenDocument spreadsheet",
    ".odp": "OpenDocument presentation", ".rtf": "RTF", ".pages": "Apple Pages",
    ".key": "Apple Keynote", ".numbers": "Apple Numbers",
    ".heic": "HEIC image: save it as JPEG or PNG", ".svg": "SVG image",
    ".zip": "archive", ".gz": "archive", ".tar": "archive", ".7z": "archive",
    ".mp3": "audio", ".wav": "audio", ".mp4": "video", ".mov": "video",
    ".exe": "executable", ".dll": "executable", ".so": "executable", ".bin": "binary",
}
MIME_KINDS: dict[str, str] = {
    "text/html": "html", "application/xhtml+xml": "html", "application/pdf": "pdf",
    "application/vnd.openxmlformats-officedocument.wordprocessingml.document": "docx",
    "application/vnd.openxmlformats-officedocument.presentationml.presentation": "pptx",
    "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet": "xlsx",
    "application/epub+zip": "epub", "text/csv": "csv", "text/plain": TEXT,
    "text/markdown": TEXT, "text/x-markdown": TEXT,
    "image/png": "image", "image/jpeg": "image", "image/webp": "image", "image/tiff": "image",
    "image/bmp": "image", "image/gif": "image",
}
ZIP_KINDS = frozenset({"docx", "pptx", "xlsx", "epub"})
CONVERTED = frozenset(KINDS.values()) - {TEXT}


def extension(name: str) -> str:
    return posixpath.splitext(name.lower())[1]


def kind_of(name: str) -> str | None:
    """The format of a file by its name: a KINDS value, or None when unknown."""
    return KINDS.get(extension(name))


def supported_list() -> str:
    return ", ".join(sorted(KINDS))


def refused_by_name(name: str) -> str | None:
    """Why a file cannot be read, judged by its name alone (a known unreadable format)."""
    known = UNSUPPORTED.get(extension(name))
    return f"unsupported format: {known}; readable formats are {supported_list()}" if (
        known) else None


def refused_binary(name: str) -> str:
    """Why binary content in a file of no known format cannot be read."""
    ext = extension(name) or "extension-less"
    return (f"unsupported format: binary content in a {ext} file; readable formats are "
            f"{supported_list()}")


class Converted(msgspec.Struct, frozen=True):
    text: str
    title: str | None = None
    pages: int | None = None
    # The file's own properties: title, author, subject, keywords, created, modified (dates
    # as core/dates.py stores them).
    properties: dict[str, str] = {}
    # Pages (1-based) with no text layer that OCR reads or would read (scanned PDF pages,
    # image frames), at most the page cap (OcrLimits.max_pages); and how many there are in all.
    scanned: tuple[int, ...] = ()
    scanned_total: int = 0
    unread: int = 0  # pages OCR left unread: the file's OCR time budget was spent
