"""Compare document -> Markdown converters for PocketMCP (speed and output quality).

Run with the separate comparison venv (NOT the project's .venv):

    python3 -m venv /work/convbench-venv
    /work/convbench-venv/bin/pip install 'markitdown[all]' pypdf pypdfium2 pdfminer.six \
        python-docx mammoth markdownify beautifulsoup4 html2text trafilatura selectolax \
        python-pptx openpyxl ebooklib fpdf2 defusedxml
    /work/convbench-venv/bin/python bench/compare_converters.py [--runs 5] [--only pdf,html]

It generates its own deterministic test documents in a temp dir (sentences drawn from
shared/datasets/scifact-train/corpus.jsonl when present, else generated), runs every
candidate converter in a fresh subprocess per (converter, format) (import time, warm p50
over --runs runs, peak RSS), scores the Markdown against the known content, writes
bench/results/convert-libraries.json and prints one Markdown table per format.
"""

from __future__ import annotations

import argparse
import collections
import csv
import io
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
CORPUS = REPO.parent / "shared" / "datasets" / "scifact-train" / "corpus.jsonl"
RESULTS = HERE / "results" / "convert-libraries.json"
MAIN_VENV_PY = REPO / ".venv" / "bin" / "python"

# --------------------------------------------------------------------------------------
# Known text
# --------------------------------------------------------------------------------------

_BAD = set("*_|#<>&[]`\\~^{}$")


def load_sentences(n: int) -> list[str]:
    out: list[str] = []
    seen: set[str] = set()
    if CORPUS.exists():
        with CORPUS.open() as f:
            for line in f:
                doc = json.loads(line)
                for s in re.split(r"(?<=[.!?])\s+(?=[A-Z])", doc.get("text", "")):
                    s = " ".join(s.split())
                    if not (60 <= len(s) <= 220) or not s.isascii() or _BAD & set(s):
                        continue
                    if s in seen:
                        continue
                    seen.add(s)
                    out.append(s)
                    if len(out) >= n:
                        return out
    rng = random.Random(0)
    words = ["cell", "protein", "expression", "patients", "study", "analysis", "increased", "significantly", "treatment", "response", "levels", "associated", "clinical", "model", "data", "results", "method", "tissue", "receptor", "signalling", "pathway", "cohort", "risk"]
    while len(out) < n:
        s = " ".join(rng.choice(words) for _ in range(rng.randint(10, 25)))
        s = s[0].upper() + s[1:] + f" (sample {len(out)})."
        out.append(s)
    return out


class Truth:
    """What a converted document should contain."""

    def __init__(self) -> None:
        self.sentences: list[tuple[str, str]] = []  # (region, sentence)
        self.headings: list[tuple[int, str]] = []
        self.tables: list[list[list[str]]] = []
        self.boilerplate: list[str] = []  # strings that must NOT appear

    def to_json(self) -> dict:
        return {"sentences": self.sentences, "headings": self.headings,
                "tables": self.tables, "boilerplate": self.boilerplate}


class Pool:
    def __init__(self, sentences: list[str]) -> None:
        self.s = sentences
        self.i = 0

    def take(self, k: int) -> list[str]:
        if self.i + k > len(self.s):
            self.i = 0
        r = self.s[self.i:self.i + k]
        self.i += k
        return r


def make_table(rows: int, cols: int, tag: str) -> list[list[str]]:
    header = [f"{tag} col{c + 1}" for c in range(cols)]
    body = [[f"{tag}r{r + 1}c{c + 1} {(r * 7 + c * 3) % 97}" for c in range(cols)]
            for r in range(rows)]
    return [header, *body]


# --------------------------------------------------------------------------------------
# Document generators
# --------------------------------------------------------------------------------------

def gen_pdf(path: Path, pool: Pool, sections: int, with_table: bool, with_columns: bool) -> Truth:
    from fpdf import FPDF

    t = Truth()
    pdf = FPDF(format="A4")
    pdf.set_auto_page_break(True, margin=15)
    pdf.add_page()
    for si in range(sections):
        h1 = f"Chapter {si + 1} Findings on topic {chr(65 + si % 26)}"
        pdf.set_font("Helvetica", "B", 20)
        pdf.multi_cell(0, 10, h1, new_x="LMARGIN", new_y="NEXT")
        t.headings.append((1, h1))
        for sub in range(2):
            h2 = f"Section {si + 1}.{sub + 1} Observations"
            pdf.set_font("Helvetica", "B", 15)
            pdf.multi_cell(0, 8, h2, new_x="LMARGIN", new_y="NEXT")
            t.headings.append((2, h2))
            pdf.set_font("Helvetica", "", 11)
            for p in range(2):
                sents = pool.take(4)
                t.sentences += [("body", s) for s in sents]
                pdf.multi_cell(0, 5.5, " ".join(sents), align="J" if p else "L",
                               new_x="LMARGIN", new_y="NEXT")
                pdf.ln(2)
        if with_columns and si % 3 == 1:
            # Two columns side by side: a classic reading-order trap.
            left, right = pool.take(3), pool.take(3)
            t.sentences += [("columns", s) for s in left + right]
            y = pdf.get_y()
            if y > 200:
                pdf.add_page()
                y = pdf.get_y()
            pdf.set_font("Helvetica", "", 10)
            pdf.set_xy(10, y)
            pdf.multi_cell(90, 5, " ".join(left))
            y1 = pdf.get_y()
            pdf.set_xy(110, y)
            pdf.multi_cell(90, 5, " ".join(right))
            pdf.set_xy(10, max(y1, pdf.get_y()) + 3)
        if with_table and si % 4 == 2:
            tab = make_table(5, 4, f"T{si}")
            t.tables.append(tab)
            pdf.set_font("Helvetica", "", 10)
            with pdf.table() as table:
                for row in tab:
                    r = table.row()
                    for cell in row:
                        r.cell(cell)
            pdf.ln(3)
    pdf.output(str(path))
    return t


def gen_docx(path: Path, pool: Pool, sections: int) -> Truth:
    import docx

    t = Truth()
    d = docx.Document()
    for si in range(sections):
        h1 = f"Part {si + 1} Results overview {chr(65 + si % 26)}"
        d.add_heading(h1, level=1)
        t.headings.append((1, h1))
        for sub in range(2):
            h2 = f"Subsection {si + 1}.{sub + 1} Methods"
            d.add_heading(h2, level=2)
            t.headings.append((2, h2))
            for _ in range(2):
                sents = pool.take(4)
                t.sentences += [("body", s) for s in sents]
                d.add_paragraph(" ".join(sents))
            h3 = f"Detail {si + 1}.{sub + 1}.1 Notes"
            d.add_heading(h3, level=3)
            t.headings.append((3, h3))
            for s in pool.take(3):
                d.add_paragraph(s, style="List Bullet")
                t.sentences.append(("list", s))
        if si % 3 == 0:
            tab = make_table(4, 3, f"D{si}")
            t.tables.append(tab)
            table = d.add_table(rows=len(tab), cols=3)
            table.style = "Table Grid"
            for r, row in enumerate(tab):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = cell
    d.save(str(path))
    return t


_NAV = ["NavHomeLink", "NavProductsLink", "NavPricingLink", "NavAboutLink"]
_FOOT = "FooterCopyright 2024 ExampleCorp all rights reserved FooterImprint"
_SCRIPT = "var trackingPixelId = 'UA-000'; window.dataLayerPush(trackingPixelId);"
_STYLE = ".cssMarkerClass { font-family: CssMarkerFont; }"
_ASIDE = "CookieBannerAccept we use cookies CookieBannerText"


def gen_html(path: Path, pool: Pool, sections: int, extra_markup: bool) -> Truth:
    t = Truth()
    t.boilerplate = [*_NAV, "FooterCopyright", "FooterImprint", "trackingPixelId",
                     "CssMarkerFont", "CookieBannerAccept"]
    out = io.StringIO()
    w = out.write
    w("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>Example report</title>")
    w(f"<style>{_STYLE}</style><script>{_SCRIPT}</script></head><body>")
    w("<header><div class='logo'>ExampleCorp</div><nav><ul>")
    for n in _NAV:
        w(f"<li><a href='/{n.lower()}'>{n}</a></li>")
    w("</ul></nav></header>")
    w(f"<aside class='cookie'>{_ASIDE}</aside>")
    w("<main><article>")
    h1 = "Annual research digest of clinical findings"
    w(f"<h1>{h1}</h1>")
    t.headings.append((1, h1))
    for si in range(sections):
        h2 = f"Topic {si + 1} evidence summary"
        w(f"<section><h2 id='s{si}'>{h2}</h2>")
        t.headings.append((2, h2))
        for p in range(2):
            sents = pool.take(4)
            t.sentences += [("body", s) for s in sents]
            if extra_markup:
                w(f"<div class='row'><div class='col'><p class='lead'><span>{sents[0]}</span> "
                  f"<a href='/ref/{si}/{p}'>{sents[1]}</a> {sents[2]} <em>{sents[3]}</em></p>"
                  f"</div></div>")
            else:
                w(f"<p>{sents[0]} <a href='/ref/{si}/{p}'>{sents[1]}</a> {sents[2]} "
                  f"<strong>{sents[3]}</strong></p>")
        h3 = f"Key points {si + 1}"
        w(f"<h3>{h3}</h3><ul>")
        t.headings.append((3, h3))
        for s in pool.take(3):
            w(f"<li>{s}</li>")
            t.sentences.append(("list", s))
        w("</ul>")
        if si % 5 == 0:
            tab = make_table(4, 3, f"H{si}")
            t.tables.append(tab)
            w("<table><thead><tr>" + "".join(f"<th>{c}</th>" for c in tab[0]) + "</tr></thead><tbody>")
            for row in tab[1:]:
                w("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>")
            w("</tbody></table>")
        if extra_markup:
            w("<div class='ad-slot' data-x='1'><!-- ad --><script>"
              f"{_SCRIPT}</script></div>")
        w("</section>")
    w("</article></main>")
    w(f"<footer><p>{_FOOT}</p><nav><a href='/imprint'>FooterImprint</a></nav></footer>")
    w(f"<script>{_SCRIPT}</script></body></html>")
    path.write_text(out.getvalue(), encoding="utf-8")
    return t


def gen_pptx(path: Path, pool: Pool, slides: int) -> Truth:
    from pptx import Presentation

    t = Truth()
    prs = Presentation()
    for i in range(slides):
        s = prs.slides.add_slide(prs.slide_layouts[1])
        title = f"Slide {i + 1} key result"
        s.shapes.title.text = title
        t.headings.append((1, title))
        body = s.placeholders[1].text_frame
        sents = pool.take(3)
        body.text = sents[0]
        for x in sents[1:]:
            body.add_paragraph().text = x
        t.sentences += [("body", x) for x in sents]
    prs.save(str(path))
    return t


def gen_xlsx(path: Path, pool: Pool) -> Truth:
    import openpyxl

    t = Truth()
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.title = "Measurements"
    tab = make_table(40, 5, "X1")
    for row in tab:
        ws.append(row)
    t.tables.append(tab)
    t.headings.append((2, "Measurements"))
    ws2 = wb.create_sheet("Notes")
    ws2.append(["id", "note"])
    notes = [["id", "note"]]
    for i, s in enumerate(pool.take(20)):
        ws2.append([i, s])
        notes.append([str(i), s])
        t.sentences.append(("cell", s))
    t.tables.append(notes)
    t.headings.append((2, "Notes"))
    wb.save(str(path))
    return t


def gen_epub(path: Path, pool: Pool, chapters: int) -> Truth:
    from ebooklib import epub

    t = Truth()
    book = epub.EpubBook()
    book.set_identifier("bench-epub-1")
    book.set_title("Bench book")
    book.set_language("en")
    items = []
    for c in range(chapters):
        h1 = f"Chapter {c + 1} of the bench book"
        h2 = f"Chapter {c + 1} first part"
        t.headings += [(1, h1), (2, h2)]
        paras = []
        for _ in range(4):
            sents = pool.take(4)
            t.sentences += [("body", s) for s in sents]
            paras.append(f"<p>{' '.join(sents)}</p>")
        ch = epub.EpubHtml(title=h1, file_name=f"chap_{c + 1}.xhtml", lang="en")
        ch.content = f"<h1>{h1}</h1><h2>{h2}</h2>{''.join(paras)}"
        book.add_item(ch)
        items.append(ch)
    book.toc = items
    book.add_item(epub.EpubNcx())
    book.add_item(epub.EpubNav())
    book.spine = ["nav", *items]
    epub.write_epub(str(path), book)
    return t


def gen_csv(path: Path, pool: Pool) -> Truth:
    t = Truth()
    tab = make_table(200, 4, "C")
    sents = pool.take(200)
    with path.open("w", newline="") as f:
        wr = csv.writer(f)
        wr.writerow([*tab[0], "comment"])
        for row, s in zip(tab[1:], sents, strict=True):
            wr.writerow([*row, s])
    t.tables.append([[*r, s] for r, s in zip(tab, ["comment", *sents], strict=True)])
    t.sentences += [("cell", s) for s in sents]
    return t


def find_real_pdfs(limit: int = 3) -> list[Path]:
    cands = []
    for root in ["/usr/share/doc", "/usr/share", "/usr/lib/python3", "/work/convbench-venv"]:
        try:
            r = subprocess.run(["find", root, "-name", "*.pdf", "-size", "+20k"],
                               capture_output=True, text=True, timeout=60)
        except Exception:
            continue
        for line in r.stdout.split():
            p = Path(line)
            if p not in cands:
                cands.append(p)
    return cands[:limit]


def generate(d: Path, only: set[str] | None) -> dict[str, list[dict]]:
    pool = Pool(load_sentences(8000))
    docs: dict[str, list[dict]] = collections.defaultdict(list)

    def add(fmt: str, name: str, fn, *a) -> None:
        if only and fmt not in only:
            return
        p = d / name
        truth = fn(p, pool, *a)
        docs[fmt].append({"path": str(p), "name": name, "bytes": p.stat().st_size,
                          "truth": truth.to_json() if truth else None})

    add("pdf", "long-20p.pdf", gen_pdf, 12, True, True)
    add("pdf", "short-1p.pdf", gen_pdf, 1, False, False)
    add("docx", "long-30p.docx", gen_docx, 40)
    add("docx", "short.docx", gen_docx, 1)
    add("html", "page.html", gen_html, 6, False)
    add("html", "large-1mb.html", gen_html, 500, True)
    add("pptx", "deck.pptx", gen_pptx, 15)
    add("xlsx", "book.xlsx", gen_xlsx)
    add("epub", "book.epub", gen_epub, 3)
    add("csv", "table.csv", gen_csv)
    if not only or "pdf" in only:
        for p in find_real_pdfs():
            docs["pdf"].append({"path": str(p), "name": "real:" + p.name,
                                "bytes": p.stat().st_size, "truth": None})
    return docs


# --------------------------------------------------------------------------------------
# Converters. Each: setup() -> state (imports, heavy init), convert(state, path) -> str
# --------------------------------------------------------------------------------------

def _md_table(rows: list[list[str]]) -> str:
    if not rows:
        return ""
    width = max(len(r) for r in rows)
    rows = [[(c or "").replace("|", "\\|").replace("\n", " ") for c in r] + [""] * (width - len(r))
            for r in rows]
    lines = ["| " + " | ".join(rows[0]) + " |", "|" + "---|" * width]
    lines += ["| " + " | ".join(r) + " |" for r in rows[1:]]
    return "\n".join(lines)


# ---- markitdown (all formats)
def s_markitdown():
    from markitdown import MarkItDown
    return MarkItDown(enable_plugins=False)


def c_markitdown(md, path: str) -> str:
    return md.convert(path).text_content


# ---- PDF
def s_pdfium():
    import pypdfium2
    return pypdfium2


def c_pdfium_range(pdfium, path: str) -> str:
    pdf = pdfium.PdfDocument(path)
    try:
        out = []
        for page in pdf:
            tp = page.get_textpage()
            out.append(tp.get_text_range())
            tp.close()
            page.close()
        return "\n\n".join(out)
    finally:
        pdf.close()


def c_pdfium_bounded(pdfium, path: str) -> str:
    pdf = pdfium.PdfDocument(path)
    try:
        out = []
        for page in pdf:
            tp = page.get_textpage()
            out.append(tp.get_text_bounded())
            tp.close()
            page.close()
        return "\n\n".join(out)
    finally:
        pdf.close()


def c_pdfium_headings(pdfium, path: str) -> str:
    """pypdfium2 text plus '#' for lines whose font is clearly larger than the body font."""
    import pypdfium2.raw as raw

    pdf = pdfium.PdfDocument(path)
    lines: list[tuple[float, str]] = []
    try:
        for page in pdf:
            tp = page.get_textpage()
            text = tp.get_text_range()
            n = raw.FPDFText_CountChars(tp)
            # get_text_range keeps one UTF-16 unit per char index (\r\n are 2 generated chars)
            cur: list[str] = []
            size = 0.0
            for i, ch in enumerate(text[:n] if len(text) >= n else text):
                if ch == "\n":
                    lines.append((size, "".join(cur).rstrip("\r")))
                    cur, size = [], 0.0
                    continue
                cur.append(ch)
                if not ch.isspace():
                    size = max(size, raw.FPDFText_GetFontSize(tp, i))
            if cur:
                lines.append((size, "".join(cur)))
            lines.append((0.0, ""))
            tp.close()
            page.close()
    finally:
        pdf.close()
    weights = collections.Counter()
    for sz, ln in lines:
        if ln.strip():
            weights[round(sz, 1)] += len(ln)
    body = weights.most_common(1)[0][0] if weights else 0.0
    big = sorted({round(sz, 1) for sz, ln in lines if ln.strip() and sz >= body * 1.15},
                 reverse=True)
    level = {sz: min(i + 1, 6) for i, sz in enumerate(big)}
    out = []
    for sz, ln in lines:
        lv = level.get(round(sz, 1))
        if lv and ln.strip() and len(ln) < 200:
            out.append("")
            out.append("#" * lv + " " + ln.strip())
            out.append("")
        else:
            out.append(ln)
    return "\n".join(out)


def s_pypdf():
    import pypdf
    return pypdf


def c_pypdf(pypdf, path: str) -> str:
    r = pypdf.PdfReader(path)
    return "\n\n".join(p.extract_text() or "" for p in r.pages)


def c_pypdf_layout(pypdf, path: str) -> str:
    r = pypdf.PdfReader(path)
    return "\n\n".join(p.extract_text(extraction_mode="layout") or "" for p in r.pages)


def s_pdfminer():
    import pdfminer.high_level
    return pdfminer.high_level


def c_pdfminer(hl, path: str) -> str:
    return hl.extract_text(path)


# ---- DOCX
def s_mammoth_mdfy():
    import mammoth
    import markdownify
    return mammoth, markdownify


def c_mammoth_mdfy(st, path: str) -> str:
    mammoth, markdownify = st
    with open(path, "rb") as f:
        html = mammoth.convert_to_html(f).value
    return markdownify.markdownify(html, heading_style="ATX")


def s_mammoth():
    import mammoth
    return mammoth


def c_mammoth_md(mammoth, path: str) -> str:
    with open(path, "rb") as f:
        return mammoth.convert_to_markdown(f).value


def s_pydocx():
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph
    return docx, Table, Paragraph


def c_pydocx(st, path: str) -> str:
    docx, Table, Paragraph = st
    d = docx.Document(path)
    out = []
    for block in d.iter_inner_content():
        if isinstance(block, Paragraph):
            text = block.text.strip()
            if not text:
                continue
            style = (block.style.name if block.style is not None else "") or ""
            m = re.match(r"Heading (\d)", style)
            if m:
                out.append("#" * int(m.group(1)) + " " + text)
            elif style == "Title":
                out.append("# " + text)
            elif style.startswith("List"):
                out.append("- " + text)
                continue
            else:
                out.append(text)
        elif isinstance(block, Table):
            out.append(_md_table([[c.text for c in row.cells] for row in block.rows]))
        out.append("")
    return "\n".join(out)


# ---- HTML
_DROP = ["script", "style", "nav", "footer", "header", "aside", "noscript", "form",
         "iframe", "svg", "template"]


def s_bs4_mdfy():
    import bs4
    import markdownify
    return bs4, markdownify


def c_bs4_mdfy(st, path: str) -> str:
    bs4, markdownify = st
    with open(path, "rb") as f:
        soup = bs4.BeautifulSoup(f.read(), "lxml")
    for tag in soup(_DROP):
        tag.decompose()
    root = soup.find("main") or soup.find("article") or soup.body or soup
    return markdownify.MarkdownConverter(heading_style="ATX", strip=["img"]).convert_soup(root)


def s_slx_mdfy():
    import markdownify
    from selectolax.lexbor import LexborHTMLParser
    return LexborHTMLParser, markdownify


def c_slx_mdfy(st, path: str) -> str:
    P, markdownify = st
    with open(path, "rb") as f:
        tree = P(f.read())
    tree.strip_tags(_DROP)
    root = tree.css_first("main") or tree.css_first("article") or tree.body
    return markdownify.markdownify(root.html, heading_style="ATX", strip=["img"])


def s_html2text():
    import html2text
    return html2text


def c_html2text(h2t, path: str) -> str:
    h = h2t.HTML2Text()
    h.body_width = 0
    h.ignore_images = True
    return h.handle(Path(path).read_text(encoding="utf-8"))


def s_trafilatura():
    import trafilatura
    return trafilatura


def c_trafilatura(tf, path: str) -> str:
    return tf.extract(Path(path).read_bytes(), output_format="markdown", include_tables=True,
                      include_links=False, include_comments=False,
                      include_formatting=True) or ""


# ---- PPTX / XLSX / EPUB / CSV direct
def s_pptx():
    import pptx
    return pptx


def c_pptx(pptx, path: str) -> str:
    prs = pptx.Presentation(path)
    out = []
    for i, slide in enumerate(prs.slides, 1):
        title_shape = slide.shapes.title
        title = title_shape.text_frame.text.strip() if title_shape is not None else ""
        out.append(f"# {title or f'Slide {i}'}\n")
        for sh in slide.shapes:
            if sh is title_shape:
                continue
            if sh.has_text_frame:
                for p in sh.text_frame.paragraphs:
                    t = "".join(r.text for r in p.runs).strip()
                    if t:
                        out.append("  " * p.level + "- " + t)
            elif getattr(sh, "has_table", False) and sh.has_table:
                out.append(_md_table([[c.text for c in r.cells] for r in sh.table.rows]))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame.text.strip()
            if notes:
                out.append("\nNotes: " + notes)
        out.append("")
    return "\n".join(out)


def s_openpyxl():
    import openpyxl
    return openpyxl


def c_openpyxl(openpyxl, path: str) -> str:
    wb = openpyxl.load_workbook(path, read_only=True, data_only=True)
    out = []
    try:
        for ws in wb.worksheets:
            rows = [["" if v is None else str(v) for v in r] for r in ws.iter_rows(values_only=True)]
            rows = [r for r in rows if any(r)]
            out.append(f"## {ws.title}\n")
            out.append(_md_table(rows))
            out.append("")
    finally:
        wb.close()
    return "\n".join(out)


def s_ebooklib():
    import ebooklib
    import markdownify
    from ebooklib import epub
    return ebooklib, epub, markdownify


def c_ebooklib(st, path: str) -> str:
    ebooklib, epub, markdownify = st
    book = epub.read_epub(path, options={"ignore_ncx": True})
    out = []
    for idref, _linear in book.spine:
        item = book.get_item_with_id(idref)
        if item is None or item.get_type() != ebooklib.ITEM_DOCUMENT:
            continue
        if isinstance(item, epub.EpubNav):
            continue
        out.append(markdownify.markdownify(item.get_content().decode("utf-8", "replace"),
                                           heading_style="ATX", strip=["img"]))
    return "\n\n".join(out)


def s_csv():
    return csv


def c_csv(csvmod, path: str) -> str:
    with open(path, newline="", encoding="utf-8", errors="replace") as f:
        rows = list(csvmod.reader(f))
    return _md_table(rows)


CONVERTERS: dict[str, list[tuple[str, str, str, list[str]]]] = {
    # fmt: [(name, setup, convert, pip roots for dependency weight)]
    "pdf": [
        ("pypdfium2 get_text_range", "s_pdfium", "c_pdfium_range", ["pypdfium2"]),
        ("pypdfium2 get_text_bounded", "s_pdfium", "c_pdfium_bounded", ["pypdfium2"]),
        ("pypdfium2 +fontsize headings", "s_pdfium", "c_pdfium_headings", ["pypdfium2"]),
        ("pypdf extract_text", "s_pypdf", "c_pypdf", ["pypdf"]),
        ("pypdf layout mode", "s_pypdf", "c_pypdf_layout", ["pypdf"]),
        ("pdfminer.six extract_text", "s_pdfminer", "c_pdfminer", ["pdfminer.six"]),
        ("markitdown", "s_markitdown", "c_markitdown", ["markitdown[pdf]"]),
    ],
    "docx": [
        ("mammoth->markdownify", "s_mammoth_mdfy", "c_mammoth_mdfy", ["mammoth", "markdownify"]),
        ("mammoth convert_to_markdown", "s_mammoth", "c_mammoth_md", ["mammoth"]),
        ("python-docx direct", "s_pydocx", "c_pydocx", ["python-docx"]),
        ("markitdown", "s_markitdown", "c_markitdown", ["markitdown[docx]"]),
    ],
    "html": [
        ("bs4(lxml)+markdownify, boilerplate dropped", "s_bs4_mdfy", "c_bs4_mdfy",
         ["beautifulsoup4", "lxml", "markdownify"]),
        ("selectolax strip+markdownify", "s_slx_mdfy", "c_slx_mdfy",
         ["selectolax", "markdownify"]),
        ("html2text", "s_html2text", "c_html2text", ["html2text"]),
        ("trafilatura markdown", "s_trafilatura", "c_trafilatura", ["trafilatura"]),
        ("markitdown", "s_markitdown", "c_markitdown", ["markitdown"]),
    ],
    "pptx": [
        ("python-pptx direct", "s_pptx", "c_pptx", ["python-pptx"]),
        ("markitdown", "s_markitdown", "c_markitdown", ["markitdown[pptx]"]),
    ],
    "xlsx": [
        ("openpyxl direct", "s_openpyxl", "c_openpyxl", ["openpyxl"]),
        ("markitdown", "s_markitdown", "c_markitdown", ["markitdown[xlsx]"]),
    ],
    "epub": [
        ("ebooklib+markdownify", "s_ebooklib", "c_ebooklib", ["ebooklib", "markdownify"]),
        ("markitdown", "s_markitdown", "c_markitdown", ["markitdown"]),
    ],
    "csv": [
        ("csv module direct", "s_csv", "c_csv", []),
        ("markitdown", "s_markitdown", "c_markitdown", ["markitdown"]),
    ],
}


# --------------------------------------------------------------------------------------
# Worker (fresh subprocess per converter+format)
# --------------------------------------------------------------------------------------

def _rss_kb() -> int:
    # VmHWM, not ru_maxrss: on Linux ru_maxrss survives exec, so a worker would report the
    # parent's peak.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def worker(setup: str, conv: str, files: list[str], runs: int, outdir: str) -> dict:
    rss0 = _rss_kb()
    t0 = time.perf_counter()
    state = globals()[setup]()
    import_s = time.perf_counter() - t0
    rss1 = _rss_kb()
    fn = globals()[conv]
    per_file = []
    for i, p in enumerate(files):
        rec: dict = {"path": p}
        try:
            t = time.perf_counter()
            text = fn(state, p)
            rec["first_ms"] = (time.perf_counter() - t) * 1000
            times = []
            n = runs if rec["first_ms"] < 3000 else max(2, runs // 2)
            for _ in range(n):
                t = time.perf_counter()
                fn(state, p)
                times.append((time.perf_counter() - t) * 1000)
            rec["runs"] = len(times)
            rec["p50_ms"] = statistics.median(times)
            rec["min_ms"] = min(times)
            out = Path(outdir) / f"{conv}-{i}.md"
            out.write_text(text or "", encoding="utf-8")
            rec["out"] = str(out)
        except Exception as e:  # record crashes
            rec["error"] = f"{type(e).__name__}: {e}"[:500]
        per_file.append(rec)
    return {"import_s": import_s, "rss_base_kb": rss0, "rss_after_import_kb": rss1,
            "rss_peak_kb": _rss_kb(), "files": per_file}


def import_only(setup: str) -> float:
    t0 = time.perf_counter()
    globals()[setup]()
    return time.perf_counter() - t0


# --------------------------------------------------------------------------------------
# Scoring
# --------------------------------------------------------------------------------------

def norm(s: str) -> str:
    s = s.replace("\\", "")
    s = re.sub(r"[*_`]+", "", s)
    s = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", s)  # links -> text
    return " ".join(s.split())


def tokens(s: str) -> collections.Counter:
    return collections.Counter(w.lower() for w in re.findall(r"\w+", s))


_SEP = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")


def score(md: str, truth: dict | None) -> dict:
    r: dict = {"chars": len(md), "words": sum(tokens(md).values())}
    lines = md.splitlines()
    head_lines = [norm(m.group(2)) for ln in lines if (m := re.match(r"^\s*(#{1,6})\s+(.*)", ln))]
    r["md_headings"] = len(head_lines)
    r["md_tables"] = sum(1 for ln in lines if _SEP.match(ln) and "-" in ln and "|" in ln)
    if truth is None:
        return r
    nmd = norm(md)
    sents = truth["sentences"]
    hit = [s for _, s in sents if norm(s) in nmd]
    r["sentence_recall"] = round(len(hit) / len(sents), 4) if sents else None
    by_region = collections.defaultdict(lambda: [0, 0])
    for reg, s in sents:
        by_region[reg][1] += 1
        by_region[reg][0] += norm(s) in nmd
    r["sentence_recall_by_region"] = {k: round(a / b, 4) for k, (a, b) in by_region.items()}
    sent_set = {s for _, s in sents}
    truth_text = " ".join(sent_set) + " " + " ".join(h for _, h in truth["headings"])
    truth_text += " " + " ".join(c for tab in truth["tables"] for row in tab for c in row
                                 if c not in sent_set)
    tt, mt = tokens(truth_text), tokens(md)
    r["token_recall"] = round(sum(min(c, mt[w]) for w, c in tt.items()) / max(1, sum(tt.values())), 4)
    heads = truth["headings"]
    hs = set(head_lines)
    found = [h for _, h in heads if norm(h) in hs]
    r["headings_kept"] = f"{len(found)}/{len(heads)}"
    r["headings_kept_frac"] = round(len(found) / len(heads), 4) if heads else None
    levels_ok = 0
    hl = {}
    for ln in lines:
        m = re.match(r"^\s*(#{1,6})\s+(.*)", ln)
        if m:
            hl.setdefault(norm(m.group(2)), len(m.group(1)))
    rel = [(lv, hl.get(norm(h))) for lv, h in heads if norm(h) in hl]
    # relative level order preserved: deeper truth level -> not shallower output level
    if rel:
        base = min(o for _, o in rel) - min(lv for lv, _ in rel)
        levels_ok = sum(1 for lv, o in rel if o - base == lv)
    r["heading_levels_ok"] = f"{levels_ok}/{len(heads)}"
    tabs = truth["tables"]
    if tabs:
        table_rows = " ".join(norm(ln) for ln in lines if ln.count("|") >= 2)
        cells = [c for tab in tabs for row in tab for c in row]
        r["table_cells_in_md_tables"] = round(sum(norm(c) in table_rows for c in cells) / len(cells), 4)
        r["tables_expected"] = len(tabs)
    bp = truth["boilerplate"]
    if bp:
        leaked = [b for b in bp if b.lower() in md.lower()]
        r["boilerplate_leaked"] = f"{len(leaked)}/{len(bp)}"
        r["boilerplate_leaked_list"] = leaked
    return r


# --------------------------------------------------------------------------------------
# Dependency weight
# --------------------------------------------------------------------------------------

def dep_closure(roots: list[str]) -> dict:
    from importlib import metadata as md

    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name

    def size(dist) -> int:
        tot = 0
        for f in dist.files or []:
            try:
                tot += os.path.getsize(dist.locate_file(f))
            except OSError:
                pass
        return tot

    seen: dict[str, tuple[str, int]] = {}
    stack = [Requirement(r) for r in roots]
    while stack:
        req = stack.pop()
        name = canonicalize_name(req.name)
        try:
            dist = md.distribution(req.name)
        except md.PackageNotFoundError:
            continue
        key = (name, tuple(sorted(req.extras)))
        if key in seen:
            continue
        seen[key] = (f"{dist.metadata['Name']}=={dist.version}", size(dist))
        for raw_req in dist.metadata.get_all("Requires-Dist") or []:
            sub = Requirement(raw_req)
            envs = [{"extra": e} for e in (req.extras or {""})]
            if sub.marker is None or any(sub.marker.evaluate(e) for e in envs):
                stack.append(sub)
    pkgs = {}
    for (name, _), (spec, sz) in seen.items():
        pkgs[name] = (spec, sz)
    return {"packages": sorted(v[0] for v in pkgs.values()),
            "mb": round(sum(v[1] for v in pkgs.values()) / 1e6, 1),
            "_sizes": {k: v[1] for k, v in pkgs.items()}}


def main_venv_packages() -> set[str]:
    if not MAIN_VENV_PY.exists():
        return set()
    r = subprocess.run([str(MAIN_VENV_PY), "-c",
                        "import importlib.metadata as m,re;"
                        "print('\\n'.join(re.sub(r'[-_.]+','-',d.metadata['Name']).lower() "
                        "for d in m.distributions()))"],
                       capture_output=True, text=True, timeout=120)
    return set(r.stdout.split())


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------

def run_sub(args: list[str], timeout: int = 1800) -> dict:
    r = subprocess.run([sys.executable, __file__, *args], capture_output=True, text=True,
                       timeout=timeout)
    if r.returncode != 0:
        return {"crash": (r.stderr or r.stdout)[-2000:]}
    return json.loads(r.stdout.strip().splitlines()[-1])


def fmt_ms(x: float | None) -> str:
    return "-" if x is None else (f"{x:.1f}" if x < 100 else f"{x:.0f}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--only", default="")
    ap.add_argument("--import-repeats", type=int, default=3)
    ap.add_argument("--worker", nargs=4, metavar=("SETUP", "CONV", "FILES_JSON", "OUTDIR"))
    ap.add_argument("--import-only", metavar="SETUP")
    a = ap.parse_args()
    if a.worker:
        setup, conv, files_json, outdir = a.worker
        print(json.dumps(worker(setup, conv, json.loads(files_json), a.runs, outdir)))
        return
    if a.import_only:
        print(json.dumps(import_only(a.import_only)))
        return

    only = set(filter(None, a.only.split(","))) or None
    tmp = Path(tempfile.mkdtemp(prefix="convbench-"))
    t0 = time.perf_counter()
    (tmp / "docs").mkdir()
    docs = generate(tmp / "docs", only)
    print(f"generated docs in {time.perf_counter() - t0:.1f}s under {tmp}", file=sys.stderr)
    main_pkgs = main_venv_packages()
    results: dict = {"python": sys.version.split()[0], "cpus": os.cpu_count(), "runs": a.runs,
                     "tmpdir": str(tmp), "formats": {}}
    import_cache: dict[str, dict] = {}
    for fmt, files in docs.items():
        fres = {"files": [{k: v for k, v in f.items() if k != "truth"} for f in files],
                "converters": []}
        for name, setup, conv, roots in CONVERTERS[fmt]:
            outdir = tmp / "out" / fmt / conv
            outdir.mkdir(parents=True, exist_ok=True)
            print(f"[{fmt}] {name} ...", file=sys.stderr, flush=True)
            w = run_sub(["--runs", str(a.runs), "--worker", setup, conv,
                         json.dumps([f["path"] for f in files]), str(outdir)])
            if setup not in import_cache:
                ts = []
                for _ in range(a.import_repeats):
                    x = run_sub(["--import-only", setup])
                    if isinstance(x, float):
                        ts.append(x)
                import_cache[setup] = {"import_ms_median": round(statistics.median(ts) * 1000, 1)
                                       if ts else None}
            dep = dep_closure(roots) if roots else {"packages": [], "mb": 0.0, "_sizes": {}}
            new_vs_main = {k: v for k, v in dep["_sizes"].items() if k not in main_pkgs}
            entry = {"name": name, "setup": setup, "convert": conv, "pip_roots": roots,
                     "deps": dep["packages"], "deps_mb": dep["mb"],
                     "deps_mb_not_in_main_venv": round(sum(new_vs_main.values()) / 1e6, 1),
                     **import_cache[setup]}
            if "crash" in w:
                entry["crash"] = w["crash"]
                fres["converters"].append(entry)
                continue
            entry["import_ms_in_worker"] = round(w["import_s"] * 1000, 1)
            entry["rss_import_mb"] = round((w["rss_after_import_kb"] - w["rss_base_kb"]) / 1024, 1)
            entry["rss_convert_delta_mb"] = round((w["rss_peak_kb"] - w["rss_after_import_kb"]) / 1024, 1)
            entry["per_file"] = []
            for f, rec in zip(files, w["files"], strict=True):
                pf = {"file": f["name"], "bytes": f["bytes"]}
                if "error" in rec:
                    pf["error"] = rec["error"]
                else:
                    md = Path(rec["out"]).read_text(encoding="utf-8")
                    pf.update(p50_ms=round(rec["p50_ms"], 2), first_ms=round(rec["first_ms"], 2),
                              runs=rec["runs"],
                              mb_per_s=round(f["bytes"] / 1e6 / (rec["p50_ms"] / 1000), 2))
                    pf.update(score(md, f["truth"]))
                    pf["sample"] = md[:600]
                entry["per_file"].append(pf)
            fres["converters"].append(entry)
        # cross-agreement on real PDFs (no ground truth): token recall vs pdfminer and pypdfium2
        results["formats"][fmt] = fres
    # agreement on real PDFs: each converter's token recall against pypdfium2 range output
    if "pdf" in results["formats"]:
        convs = results["formats"]["pdf"]["converters"]
        ref = next((c for c in convs if c["convert"] == "c_pdfium_range"), None)
        for c in convs:
            for j, pf in enumerate(c.get("per_file", [])):
                if not pf["file"].startswith("real:") or ref is None or "error" in pf:
                    continue
                a_md = Path(tmp / "out" / "pdf" / c["convert"] / f"{c['convert']}-{j}.md").read_text()
                r_md = Path(tmp / "out" / "pdf" / "c_pdfium_range" / f"c_pdfium_range-{j}.md").read_text()
                ta, tr = tokens(a_md), tokens(r_md)
                pf["token_recall_vs_pdfium"] = round(
                    sum(min(cnt, ta[w]) for w, cnt in tr.items()) / max(1, sum(tr.values())), 4)
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    RESULTS.write_text(json.dumps(results, indent=1))
    print_tables(results)
    print(f"\nraw results: {RESULTS}", file=sys.stderr)


def print_tables(results: dict) -> None:
    for fmt, fres in results["formats"].items():
        print(f"\n### {fmt}\n")
        print("| converter | file | p50 ms | MB/s | sent. recall | token recall | headings | "
              "md tables | table cells | boilerplate | import ms | RSS MB (imp/conv) | deps MB (new) |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
        for c in fres["converters"]:
            if "crash" in c:
                print(f"| {c['name']} | CRASH | {c['crash'][-120:]!r} |")
                continue
            for pf in c["per_file"]:
                if "error" in pf:
                    print(f"| {c['name']} | {pf['file']} | ERROR {pf['error'][:80]} |")
                    continue
                sr = pf.get("sentence_recall")
                reg = pf.get("sentence_recall_by_region", {})
                srs = "-" if sr is None else f"{sr:.2f}" + (
                    f" (cols {reg['columns']:.2f})" if "columns" in reg else "")
                tr = pf.get("token_recall", pf.get("token_recall_vs_pdfium"))
                trs = "-" if tr is None else f"{tr:.3f}" + ("*" if "token_recall" not in pf else "")
                print(f"| {c['name']} | {pf['file']} | {fmt_ms(pf['p50_ms'])} | {pf['mb_per_s']} | "
                      f"{srs} | {trs} | {pf.get('headings_kept', pf['md_headings'])} | "
                      f"{pf['md_tables']}/{pf.get('tables_expected', '-')} | "
                      f"{pf.get('table_cells_in_md_tables', '-')} | {pf.get('boilerplate_leaked', '-')} | "
                      f"{c['import_ms_median']} | {c['rss_import_mb']}/{c['rss_convert_delta_mb']} | "
                      f"{c['deps_mb']} ({c['deps_mb_not_in_main_venv']}) |")
    print("\n(* = token recall vs pypdfium2 get_text_range output, real PDFs have no ground truth)")


if __name__ == "__main__":
    main()
