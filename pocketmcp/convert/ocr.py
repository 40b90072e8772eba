"""Text in images and scanned PDF pages, read offline by OCR (the `ocr` extra).

The engine is rapidocr-onnxruntime: PP-OCRv4 detection and recognition models and a
text-direction model, shipped inside its wheel (they read Chinese and English), run on
onnxruntime with a capped number of threads. It runs only inside a conversion worker
(`convert.worker`), loaded on the first OCR request: the server never imports it, and without
the extra nothing here is imported at all.

Every image is checked against the pixel cap from its header, before any pixel is decoded
(decompression bombs are refused); PDF pages are rendered at a scale that keeps within it.
"""

from __future__ import annotations

import importlib.util
import io
import math
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import msgspec

from pocketmcp.convert.kinds import Converted
from pocketmcp.core.text import OCR_MARK

ENGINE = "rapidocr-onnxruntime"
EXTRA_HINT = "install the OCR extra: pip install 'pocketmcp[ocr]'"
RENDER_DPI = 200  # scanned PDF pages are rendered at this resolution (less for large pages)
MAX_SIDE = 2000  # the engine shrinks larger images to this side anyway


class OcrRefused(Exception):
    """The image cannot be read within the limits; the message says why."""


class OcrSpec(msgspec.Struct, frozen=True, kw_only=True):
    """What a conversion request asks of OCR. `run` False: only find the pages that need it
    (scanned PDF pages, image frames) and check the image limits; True: read `pages`."""

    run: bool = False
    pages: tuple[int, ...] = ()  # 1-based
    max_pixels: int = 40_000_000
    max_pages: int = 100
    threads: int = 1
    model_dir: str | None = None
    budget_s: float = 0.0  # OCR time of the whole file (0: none); pages after it are not read


def missing() -> str | None:
    """Why OCR cannot run here (the extra is not installed), or None. Imports nothing."""
    for module, package in (("rapidocr_onnxruntime", ENGINE), ("cv2", "opencv-python-headless"),
                            ("PIL", "pillow")):
        try:
            found = importlib.util.find_spec(module) is not None
        except (ImportError, ValueError):
            found = False
        if not found:
            return f"OCR needs {package}, which is not installed: {EXTRA_HINT}"
    return None


def engine_version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"{ENGINE} {version(ENGINE)}"
    except PackageNotFoundError:
        return ENGINE


# -- the engine (worker side) ------------------------------------------------------------------

_engines: dict[tuple[int, str | None], Any] = {}


def _model_files(folder: str) -> dict[str, str]:
    """The engine's keyword arguments for a folder of PP-OCR ONNX models: one file whose name
    holds `det`, one `rec`, optionally one `cls`, and a `*.txt` character list for a
    recognition model that does not carry its own."""
    root = Path(folder).expanduser()
    files = sorted(root.glob("*.onnx")) if root.is_dir() else []
    found: dict[str, str] = {}
    for part in ("det", "rec", "cls"):
        match = next((f for f in files if part in f.name.lower()), None)
        if match is not None:
            found[f"{part}_model_path"] = str(match)
    if "det_model_path" not in found or "rec_model_path" not in found:
        raise OcrRefused(f"OCR_MODEL_DIR {folder} holds no PP-OCR detection and recognition "
                         "models (*det*.onnx and *rec*.onnx)")
    keys = sorted(root.glob("*.txt"))
    if keys:
        found["rec_keys_path"] = str(keys[0])
    return found


def engine(threads: int, model_dir: str | None) -> Any:
    """The OCR engine, loaded once per worker (about a second)."""
    key = (threads, model_dir)
    if key not in _engines:
        try:
            import cv2
            from rapidocr_onnxruntime import RapidOCR
        except ImportError as exc:
            raise OcrRefused(f"OCR could not start ({exc}); {EXTRA_HINT}") from None
        cv2.setNumThreads(threads)
        models = _model_files(model_dir) if model_dir else {}
        _engines[key] = RapidOCR(intra_op_num_threads=threads, inter_op_num_threads=1,
                                 **models)
    return _engines[key]


def read_lines(ocr: Any, image: Any) -> list[str]:
    """The text lines of a PIL image, in reading order, whichever way up the text is: each
    line is turned upright by the engine (text set sideways or upside down), and the page's
    way up, taken from most lines, orders them."""
    import numpy as np

    pixels = np.asarray(image.convert("RGB"))
    height, width = pixels.shape[:2]
    found = _recognise(ocr, pixels)
    if not found:
        return []
    sideways = sum(1 for box, _, _ in found if _side(box, 1) > 1.5 * _side(box, 0))
    flipped = sum(1 for _, _, turned in found if turned)
    upright: list[tuple[list[tuple[float, float]], str]] = []
    for box, text, _ in found:
        if sideways * 2 > len(found):  # turned a quarter: rotated left if lines were flipped
            points = [(-y, x) if flipped * 2 > len(found) else (y, width - x) for x, y in box]
        elif flipped * 2 > len(found):  # upside down
            points = [(width - x, height - y) for x, y in box]
        else:
            points = [(x, y) for x, y in box]
        upright.append((points, text))
    return _lines(upright)


def _recognise(ocr: Any, pixels: Any) -> list[tuple[list[tuple[float, float]], str, bool]]:
    """(box corners in the image, text, whether the engine turned the line upside down) of
    each text line: the engine's own steps, keeping what its text-direction model found."""
    height, width = pixels.shape[:2]
    image, ratio_h, ratio_w = ocr.preprocess(pixels)
    record: dict[str, Any] = {"preprocess": {"ratio_h": ratio_h, "ratio_w": ratio_w}}
    image, record = ocr.maybe_add_letterbox(image, record)
    boxes, _ = ocr.auto_text_det(image)
    if boxes is None:
        return []
    crops = [_tall(crop) for crop in ocr.get_crop_img_list(image, boxes)]
    as_found = crops
    crops, directions, _ = ocr.text_cls(crops)  # turns copies of the crops it finds flipped
    texts = list(ocr.text_rec(crops, False)[0])
    turned = ["180" in label and certainty > ocr.text_cls.cls_thresh
              for label, certainty in directions]
    # The direction model sees a long line squeezed into 192 pixels and sometimes turns an
    # upright one: each turned line is read both ways, and the likelier reading kept.
    flipped = [i for i, t in enumerate(turned) if t]
    if flipped:
        again, _ = ocr.text_rec([as_found[i] for i in flipped], False)
        for i, (text, score) in zip(flipped, again, strict=True):
            if score > texts[i][1]:
                texts[i], turned[i] = (text, score), False
    corners = ocr._get_origin_points(boxes, record, height, width)
    out = []
    for box, (text, score), upside_down in zip(corners, texts, turned, strict=True):
        if text.strip() and score >= ocr.text_score:
            out.append(([(float(x), float(y)) for x, y in box], str(text), upside_down))
    return out


REC_HEIGHT = 48  # the recognition model's input height


def _tall(crop: Any) -> Any:
    """A line's crop brought up to the recognition model's height with a smooth (Lanczos)
    filter: its own linear resize of small print loses the gaps between words."""
    import cv2

    height, width = crop.shape[:2]
    if height >= REC_HEIGHT or height < 1 or width < 1:  # (crops are turned level already)
        return crop
    return cv2.resize(crop, (round(width * REC_HEIGHT / height), REC_HEIGHT),
                      interpolation=cv2.INTER_LANCZOS4)


def _side(box: list[tuple[float, float]], axis: int) -> float:
    values = [point[axis] for point in box]
    return max(values) - min(values)


def _lines(boxes: list[tuple[list[tuple[float, float]], str]]) -> list[str]:
    """Boxes whose vertical centres are within half a line of each other form one line,
    read left to right; lines go top to bottom."""
    placed = sorted((sum(y for _, y in box) / len(box), min(x for x, _ in box),
                     max(_side(box, 1), 1.0), text) for box, text in boxes)
    lines: list[list[tuple[float, str]]] = []
    centre = -1e9
    for y, x, height, text in placed:
        if lines and abs(y - centre) <= height / 2:
            lines[-1].append((x, text))
        else:
            lines.append([(x, text)])
            centre = y
    return [" ".join(text for _, text in sorted(line)) for line in lines]


# -- images ------------------------------------------------------------------------------------

def _open(data: bytes, max_pixels: int) -> Any:
    """A PIL image, opened from its header only, within the pixel cap."""
    from PIL import Image, UnidentifiedImageError

    Image.MAX_IMAGE_PIXELS = None  # checked below, with the setting named
    try:
        image = Image.open(io.BytesIO(data))
    except (UnidentifiedImageError, OSError, ValueError, SyntaxError) as exc:
        raise OcrRefused(f"not a readable image ({exc})") from None
    width, height = image.size
    if width * height > max_pixels:
        raise OcrRefused(f"image of {width} x {height} pixels refused before decoding: over "
                         f"the limit of {max_pixels} pixels; decompression "
                         "bombs look like this")
    Image.MAX_IMAGE_PIXELS = max_pixels  # Pillow's own guard, for frames decoded later
    return image


def _frames(image: Any) -> int:
    """Frames read: every page of a TIFF, the first frame of anything else (GIF, WebP)."""
    return int(getattr(image, "n_frames", 1)) if image.format == "TIFF" else 1


def image_pages(data: bytes, spec: OcrSpec) -> tuple[int, ...]:
    """The frames OCR would read (within the page cap), checking the limits on the way."""
    image = _open(data, spec.max_pixels)
    return tuple(range(1, min(_frames(image), spec.max_pages) + 1))


def spent(started: float, spec: OcrSpec) -> bool:
    """Whether the file's OCR time budget (`spec.budget_s`) is spent since `started`."""
    return bool(spec.budget_s) and time.monotonic() - started >= spec.budget_s


def read_image(data: bytes, spec: OcrSpec) -> Converted:
    """The text of an image (each TIFF page with text under its own heading; a frame where
    nothing was read gives nothing, not even its heading)."""
    from PIL import Image, ImageOps

    image = _open(data, spec.max_pixels)
    frames = _frames(image)
    ocr = engine(spec.threads, spec.model_dir)
    started = time.monotonic()
    parts: list[str] = []
    done = 0
    for number in spec.pages:
        if spent(started, spec):
            break
        try:
            image.seek(number - 1)
            frame = ImageOps.exif_transpose(image) if number == 1 else image.copy()
            frame.load()
        except (EOFError, OSError, ValueError, Image.DecompressionBombError) as exc:
            raise OcrRefused(f"frame {number} is not a readable image ({exc})") from None
        frame = _fit(_on_white(frame))
        lines = read_lines(ocr, frame)
        done += 1
        if any(line.strip() for line in lines):
            heading = (f"## Page {number} {OCR_MARK}" if frames > 1
                       else f"## Image text {OCR_MARK}")
            parts.append("\n".join([heading, "", *lines]))
    unread = len(spec.pages) - done
    note = _note(done, frames, time.monotonic() - started) + stopped(unread, spec)
    return Converted("\n\n".join(parts), None, frames if frames > 1 else None,
                     {"ocr": note}, unread=unread)


def stopped(unread: int, spec: OcrSpec) -> str:
    """What the `ocr` property adds when the time budget left pages unread."""
    return (f"; stopped at the OCR time budget of {spec.budget_s:g} s (twice "
            f"CONVERT_TIMEOUT_S), {unread} pages not read" if unread else "")


def _on_white(image: Any) -> Any:
    """The image with any transparency laid on white (dark text on a transparent
    screenshot would otherwise turn black on black)."""
    from PIL import Image

    if image.mode == "P" and "transparency" in image.info:
        image = image.convert("RGBA")
    if image.mode not in ("RGBA", "LA", "PA"):
        return image
    paper = Image.new("RGB", image.size, "white")
    paper.paste(image.convert("RGBA"), mask=image.convert("RGBA").getchannel("A"))
    return paper


def _fit(image: Any) -> Any:
    """The image shrunk to at most MAX_SIDE pixels a side (the engine's own limit)."""
    longest = max(image.size)
    if longest <= MAX_SIDE:
        return image
    scale = MAX_SIDE / longest
    return image.resize((max(1, round(image.width * scale)), max(1, round(image.height * scale))))


def _note(done: int, total: int, seconds: float) -> str:
    """The `ocr` property of a document whose text came from OCR."""
    pages = f"{done} of {total} pages" if total > 1 else "image"
    return f"{engine_version()} (PP-OCRv4): {pages}, {seconds:.1f} s"


def note_pages(pages: list[int], scanned: int, seconds: float, most: int) -> str:
    """The `ocr` property of a PDF some of whose pages were read by OCR (at most `most`)."""
    listed = ", ".join(map(str, pages[:20])) + (", ..." if len(pages) > 20 else "")
    cut = f" (of {scanned} scanned; at most {most} are read)" if scanned > most else ""
    return f"{engine_version()} (PP-OCRv4): pages {listed}{cut}, {seconds:.1f} s"


# -- scanned PDF pages -------------------------------------------------------------------------

SCANNED_CHARS = 16  # a page with fewer characters of text than this, and an image, is scanned


def is_scanned(page: Any, text: str) -> bool:
    """A page with (almost) no text layer that shows at least one image."""
    import pypdfium2.raw as raw

    if sum(1 for c in text if not c.isspace()) >= SCANNED_CHARS:
        return False
    return next(iter(page.get_objects(filter=(raw.FPDF_PAGEOBJ_IMAGE,))), None) is not None


def render(page: Any, max_pixels: int) -> Any:
    """A page as a greyscale PIL image, at RENDER_DPI or less, within the pixel cap."""
    width, height = page.get_size()  # points
    scale = min(RENDER_DPI / 72, MAX_SIDE / max(width, height, 1.0),
                math.sqrt(max_pixels / max(width * height, 1.0)))
    return page.render(scale=scale, grayscale=True).to_pil()


def read_pages(document: Any, spec: OcrSpec) -> Iterator[tuple[int, list[str]]]:
    """(page number, lines) of the pages `spec` names, until the time budget is spent."""
    ocr = engine(spec.threads, spec.model_dir)
    started = time.monotonic()
    for number in spec.pages:
        if not 1 <= number <= len(document):
            continue
        if spent(started, spec):
            return
        page = document[number - 1]
        try:
            image = render(page, spec.max_pixels)
        finally:
            page.close()
        yield number, read_lines(ocr, image)
