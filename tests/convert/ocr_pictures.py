"""Real pictures of text for the OCR tests and bench: lines rendered with Pillow in the
machine's fonts (DejaVu, else Pillow's own), turned, faded or speckled, and PDFs made of
them with fpdf2."""

from __future__ import annotations

import io
import random
import struct
import textwrap
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from PIL import Image, ImageDraw, ImageFont

FONTS = Path("/usr/share/fonts/truetype/dejavu")


def font(name: str, size: int) -> Any:
    path = FONTS / f"{name}.ttf"
    if path.exists():
        return ImageFont.truetype(str(path), size)
    return ImageFont.load_default(size)  # Pillow's own scalable font


def picture(text: str, *, face: str = "DejaVuSans", size: int = 28, width: int = 1000,
            ink: int = 0, paper: int = 255, noise: float = 0.0, angle: int = 0,
            columns: int = 60, margin: int = 40) -> Image.Image:
    """A greyscale picture of `text`, wrapped at `columns` characters a line; `noise` is the
    share of pixels set to random values; `angle` turns it (counter-clockwise)."""
    lines = textwrap.wrap(text, columns)
    shape = font(face, size)
    step = int(size * 1.6)
    image = Image.new("L", (width, margin * 2 + step * len(lines)), paper)
    draw = ImageDraw.Draw(image)
    for i, line in enumerate(lines):
        draw.text((margin, margin + i * step), line, font=shape, fill=ink)
    if noise:
        speckle = random.Random(7)
        pixels = image.load()
        assert pixels is not None
        for _ in range(int(image.width * image.height * noise)):
            x, y = speckle.randrange(image.width), speckle.randrange(image.height)
            pixels[x, y] = speckle.randrange(256)
    return image.rotate(angle, expand=True, fillcolor=paper) if angle else image


def transparent(image: Image.Image) -> Image.Image:
    """Black text on a transparent ground, as screenshots of text often are."""
    from PIL import ImageOps

    ink = Image.new("RGBA", image.size, (0, 0, 0, 0))
    ink.putalpha(ImageOps.invert(image.convert("L")))
    return ink


def save(image: Image.Image, path: Path, **options: Any) -> Path:
    image.save(path, **options)
    return path


def scanned_pdf(path: Path, pages: Sequence[Image.Image | str], *, dpi: int = 150) -> Path:
    """A PDF whose pages are the pictures given (scanned, no text layer) or text set in
    Helvetica (a text layer), in that order."""
    from fpdf import FPDF

    doc = FPDF(unit="pt")
    for page in pages:
        if isinstance(page, str):
            doc.add_page(format="A4")
            doc.set_font("Helvetica", size=12)
            doc.multi_cell(0, 16, page)
            continue
        width, height = page.width * 72 / dpi, page.height * 72 / dpi
        doc.add_page(format=(width, height))
        buffer = io.BytesIO()
        page.save(buffer, "PNG")
        doc.image(buffer, x=0, y=0, w=width, h=height)
    doc.output(str(path))
    return path


def png_bomb(path: Path, side: int = 30_000) -> Path:
    """A valid one-bit PNG of `side` x `side` white pixels: about a hundred kilobytes that a
    decoder would unpack to `side`² pixels."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return (struct.pack(">I", len(body)) + kind + body
                + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))

    row = b"\x00" + b"\xff" * ((side + 7) // 8)
    packer = zlib.compressobj(9)
    data = b"".join(packer.compress(row * 1000) for _ in range(side // 1000))
    data += packer.compress(row * (side % 1000)) + packer.flush()
    header = struct.pack(">IIBBBBB", side, side, 1, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", data)
                     + chunk(b"IEND", b""))
    return path
