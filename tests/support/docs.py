"""Real documents of each format, written by the tests themselves, hostile ones included."""

from __future__ import annotations

import datetime as dt
import io
import zipfile
import zlib
from collections.abc import Sequence
from pathlib import Path

Section = tuple[str, str]  # (heading, body)
AUTHOR = "Ada Lovelace"
CREATED = dt.datetime(2021, 6, 1, 12, 30, tzinfo=dt.UTC)  # the properties documents carry


def pdf(path: Path, title: str, sections: Sequence[Section]) -> Path:
    from fpdf import FPDF

    doc = FPDF()
    doc.set_title(title)
    doc.set_author(AUTHOR)
    doc.set_creation_date(CREATED)
    for heading, body in sections:
        doc.add_page()
        doc.set_font("Helvetica", "B", 16)
        doc.multi_cell(0, 9, heading, new_x="LMARGIN", new_y="NEXT")
        doc.set_font("Helvetica", size=11)
        doc.multi_cell(0, 6, body, new_x="LMARGIN", new_y="NEXT")
    doc.output(str(path))
    return path


def docx(path: Path, title: str, sections: Sequence[Section]) -> Path:
    import docx as python_docx

    doc = python_docx.Document()
    doc.core_properties.title = title
    doc.core_properties.author = AUTHOR
    doc.core_properties.created = CREATED.replace(tzinfo=None)
    doc.add_heading(title, 1)
    for heading, body in sections:
        doc.add_heading(heading, 2)
        doc.add_paragraph(body)
    doc.save(str(path))
    return path


def html(path: Path, title: str, sections: Sequence[Section]) -> Path:
    body = "".join(f"<h2>{h}</h2><p>{b}</p>" for h, b in sections)
    path.write_text(
        f"<!doctype html><html><head><title>{title}</title><style>p {{color: red}}</style>"
        f"<script>var tracking = 'boilerplate script text';</script></head><body>"
        f"<nav>Home | Products | Cookie settings</nav><main><h1>{title}</h1>{body}</main>"
        f"<footer>Copyright footer text</footer></body></html>", encoding="utf-8")
    return path


def pptx(path: Path, title: str, sections: Sequence[Section]) -> Path:
    from pptx import Presentation

    deck = Presentation()
    deck.core_properties.title = title
    deck.core_properties.author = AUTHOR
    deck.core_properties.created = CREATED.replace(tzinfo=None)
    for heading, body in sections:
        slide = deck.slides.add_slide(deck.slide_layouts[1])
        slide.shapes.title.text = heading
        slide.placeholders[1].text = body
    deck.save(str(path))
    return path


def xlsx(path: Path, title: str, rows: Sequence[Sequence[str]]) -> Path:
    from openpyxl import Workbook

    book = Workbook()
    sheet = book.active
    sheet.title = title
    for row in rows:
        sheet.append(list(row))
    book.save(str(path))
    return path


def epub(path: Path, title: str, sections: Sequence[Section]) -> Path:
    chapters = {f"ch{i}.xhtml": (
        f'<?xml version="1.0" encoding="utf-8"?><html xmlns="http://www.w3.org/1999/xhtml">'
        f"<head><title>{h}</title></head><body><h1>{h}</h1><p>{b}</p></body></html>")
        for i, (h, b) in enumerate(sections)}
    manifest = "".join(f'<item id="c{i}" href="{name}" media-type="application/xhtml+xml"/>'
                       for i, name in enumerate(chapters))
    spine = "".join(f'<itemref idref="c{i}"/>' for i in range(len(chapters)))
    with zipfile.ZipFile(path, "w") as book:
        book.writestr("mimetype", "application/epub+zip", compress_type=zipfile.ZIP_STORED)
        book.writestr("META-INF/container.xml",
                      '<?xml version="1.0"?><container version="1.0" xmlns="urn:oasis:names:tc:'
                      'opendocument:xmlns:container"><rootfiles><rootfile full-path="OEBPS/'
                      'content.opf" media-type="application/oebps-package+xml"/></rootfiles>'
                      "</container>")
        book.writestr("OEBPS/content.opf",
                      '<?xml version="1.0"?><package xmlns="http://www.idpf.org/2007/opf" '
                      'version="3.0"><metadata xmlns:dc="http://purl.org/dc/elements/1.1/">'
                      f"<dc:title>{title}</dc:title></metadata><manifest>{manifest}</manifest>"
                      f"<spine>{spine}</spine></package>")
        for name, text in chapters.items():
            book.writestr(f"OEBPS/{name}", text)
    return path


# -- hostile files ----------------------------------------------------------------------------

def zip_bomb_docx(path: Path, unpacked_mb: int = 2048) -> Path:
    """A .docx whose document.xml unpacks to `unpacked_mb` MiB (a few MiB on disk)."""
    block = b" " * 2**20
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED, compresslevel=9) as archive:
        archive.writestr("[Content_Types].xml", "<Types/>")
        with archive.open("word/document.xml", "w", force_zip64=True) as member:
            for _ in range(unpacked_mb):
                member.write(block)
    return path


def billion_laughs_docx(path: Path) -> Path:
    """A .docx whose XML declares exponentially nested entities (about 3 GB expanded)."""
    lol = ['<!ENTITY lol0 "lollollollollollollollollollol">']
    lol += [f'<!ENTITY lol{i} "{("&lol" + str(i - 1) + ";") * 10}">' for i in range(1, 10)]
    xml = ('<?xml version="1.0"?><!DOCTYPE w:document [' + "".join(lol) + ']>'
           '<w:document xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main">'
           "<w:body><w:p><w:r><w:t>&lol9;</w:t></w:r></w:p></w:body></w:document>")
    original_bytes = docx(path, "Laughs", [("A", "b")]).read_bytes()
    with zipfile.ZipFile(io.BytesIO(original_bytes)) as original, \
            zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as out:
        for info in original.infolist():
            data = original.read(info.filename)
            out.writestr(info, xml if info.filename == "word/document.xml" else data)
    return path


def pdf_bomb(path: Path, unpacked_mb: int = 2048) -> Path:
    """A one-page PDF whose content stream inflates to `unpacked_mb` MiB."""
    packer = zlib.compressobj(9)
    block = b"0 0 m " * (2**20 // 6)
    stream = b"".join(packer.compress(block) for _ in range(unpacked_mb)) + packer.flush()
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R >>",
        b"<< /Length " + str(len(stream)).encode() + b" /Filter /FlateDecode >>\nstream\n"
        + stream + b"\nendstream",
    ]
    out = bytearray(b"%PDF-1.7\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj\n".encode() + body + b"\nendobj\n"
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{o:010d} 00000 n \n".encode() for o in offsets)
    out += (f"trailer\n<< /Size {len(objects) + 1} /Root 1 0 R >>\n"
            f"startxref\n{xref}\n%%EOF\n").encode()
    path.write_bytes(bytes(out))
    return path


def deep_html(path: Path, depth: int = 100_000) -> Path:
    """HTML nested `depth` elements deep."""
    path.write_text("<html><body>" + "<div>" * depth + "deep" + "</div>" * depth
                    + "</body></html>", encoding="utf-8")
    return path
