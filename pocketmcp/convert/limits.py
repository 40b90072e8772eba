"""The bounds of document conversion: how many workers, how long, how much memory."""

from __future__ import annotations

from pathlib import Path

import msgspec


class OcrLimits(msgspec.Struct, frozen=True, kw_only=True):
    """OCR of images and scanned PDF pages (convert/ocr.py)."""

    mode: str = "auto"  # auto: on when the extra is installed; on: required; off
    max_pixels: int = 40_000_000  # an image or rendered page over this is refused undecoded
    max_pages: int = 100  # scanned pages read per PDF (TIFF pages per image)
    threads: int = 1  # onnxruntime threads of the one OCR worker
    memory_mb: int = 2048  # address-space cap of the OCR worker
    model_dir: str | None = None  # PP-OCR ONNX models to use instead of the shipped ones
    cache_dir: Path | None = None  # OCR text kept by content hash (None: not kept)


class Limits(msgspec.Struct, frozen=True, kw_only=True):
    workers: int = 2
    timeout_s: float = 60.0
    memory_mb: int = 1024
    max_chars: int = 20 * 2**20
    max_unpacked: int = 512 * 2**20
    idle_s: float = 60.0
    ocr: OcrLimits = OcrLimits()
