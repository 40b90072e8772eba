"""The bounds of document conversion: how many workers, how long, how much memory."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, ClassVar, Literal

import msgspec

from pocketmcp.settings import FEEDING, Setting


class OcrLimits(msgspec.Struct, frozen=True, kw_only=True):
    """OCR of images and scanned PDF pages (convert/ocr.py)."""

    USED_BY: ClassVar = FEEDING

    mode: Annotated[Literal["auto", "on", "off"], Setting("OCR",
        help="Read the text of images (PNG, JPEG, WebP, TIFF, BMP, GIF) and of scanned PDF "
             "pages by OCR, offline (PP-OCRv4: Chinese and English). auto: when the extra "
             "pocketmcp[ocr] is installed; without it images are skipped, saying so. on: the "
             "extra is required. off: never.")] = "auto"
    model_dir: Annotated[Path | None, Setting("OCR_MODEL_DIR",
        help="A folder of PP-OCR ONNX models to use instead of the shipped Chinese and "
             "English ones: *det*.onnx, *rec*.onnx, optionally *cls*.onnx, and a *.txt "
             "character list when the recognition model carries none.")] = None
    # Constants, or derived (config.load): the environment does not set them.
    max_pixels: int = 40_000_000  # an image or rendered page over this is refused undecoded
    max_pages: int = 100  # scanned pages read per PDF (TIFF pages per image)
    threads: int = 1  # onnxruntime threads of the one OCR worker (ocr_threads)
    memory_mb: int = 2048  # address-space cap of the OCR worker
    cache_dir: Path | None = None  # OCR text kept by content hash (None: not kept)


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    USED_BY: ClassVar = FEEDING
    workers: Annotated[int, Setting("CONVERT_WORKERS", minimum=1, maximum=32,
        help="Documents converted at once, each in its own worker process.")] = 2
    timeout_s: Annotated[float, Setting("CONVERT_TIMEOUT_S", minimum=1, maximum=3600,
        help="A conversion taking longer is stopped and the file skipped (an OCR read: each "
             "page). A file's OCR stops reading pages once twice this is spent, keeping the "
             "text read so far (logged as ocr_time_budget).")] = 60.0
    # Constants, or derived (config.load): the environment does not set them.
    memory_mb: int = 1024  # address-space cap of a conversion worker (Linux)
    max_chars: int = 20 * 2**20  # MAX_FILE_MB's
    max_unpacked: int = 512 * 2**20  # zip containers unpacking to more are refused
    ocr_budget_s: float = 120.0  # OCR time of one file: twice CONVERT_TIMEOUT_S's (config.load)
    idle_s: float = 60.0
    ocr: OcrLimits = OcrLimits()

    def kept_in(self, cache: Path) -> Limits:
        """These limits with OCR's text kept in `cache` (the index's own: it goes with it)."""
        return msgspec.structs.replace(self, ocr=msgspec.structs.replace(self.ocr,
                                                                         cache_dir=cache))


def usable_cores() -> int:
    """The cores this process may run on."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


def ocr_threads(cap: int, cores: int | None = None) -> int:
    """The OCR worker's threads: one fewer than the cores, at least one, so that a search
    always keeps a core; at most `cap` (INDEX_CPU_BUDGET's share of the cores) when set."""
    cores = cores or usable_cores()
    return max(1, min(cap or cores, cores - 1))
