"""A folder of bad input, generated: every file must end indexed or skipped with a reason,
within a time bound, and the server must go on.

Used by tests/e2e/test_reliability.py (small) and scripts/reliability.py (full size).
`make_corpus` returns what each path is and what may become of it:
- "indexed or skipped": anything hostile; either outcome is fine, but one must be logged;
- "indexed": ordinary text under an odd name, or odd text that is still text;
- "not followed": a symlink leading out of the folder (never indexed, nothing logged).
"""

from __future__ import annotations

import json
import os
import random
import zipfile
from pathlib import Path
from typing import Any

from support import docs

ANY = "indexed or skipped"
INDEXED = "indexed"
NOT_FOLLOWED = "not followed"


def _write(kb: Path, rel: str, data: bytes | str) -> str:
    path = kb / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return rel


def make_corpus(kb: Path, *, full: bool, max_file_bytes: int) -> dict[str, str]:
    """Write the corpus into `kb`; {path: what may become of it}. `full` makes the large
    cases their real size (bombs of 1-2 GB unpacked, a million CSV columns)."""
    rng = random.Random(16)
    scale = 1 if full else 20  # the small form divides the big sizes
    out: dict[str, str] = {}

    def add(rel: str, data: bytes | str, expect: str = ANY) -> None:
        out[_write(kb, rel, data)] = expect

    # Binary, huge, invalid UTF-8, NUL bytes, empty.
    add("binary.md", bytes(rng.randrange(256) for _ in range(20_000)))
    add("png-named.txt", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(4000))
    add("huge.txt", b"word " * (max_file_bytes // 5 + 10))
    add("latin1.txt", "Crème brûlée, façade, naïve.".encode("latin-1") * 50)
    add("invalid-utf8.md", b"# Title\n\n" + b"\xff\xfe\xc3\x28 valid words " * 500)
    add("nul-bytes.txt", b"text\x00with\x00nul\x00bytes " * 300)
    add("empty.md", b"")
    add("blank.txt", " \n\t\n" * 1000)
    # Odd names around ordinary text.
    text = "# Odd name\n\nAn ordinary note about lighthouses under an odd file name.\n"
    for rel in ("with space.md", "ünïcödé-名前.md", "-leading-dash.md", "emoji-🦦.md",
                "a" * 200 + ".md", "deep/" * 30 + "nested.md", "semi;colon&amp.md",
                "quote'\"name.md", "UPPER.MD.md"):
        add(rel, text, INDEXED)
    # Symlinks out of the folder (a file and a folder).
    outside = kb.parent / "outside"
    outside.mkdir(exist_ok=True)
    (outside / "secret.md").write_text("# Secret\n\nNever indexed: outside the folder.\n")
    for rel, target, is_dir in (("link-out.md", outside / "secret.md", False),
                                ("link-dir", outside, True)):
        link = kb / rel
        if not link.is_symlink():
            link.symlink_to(target, target_is_directory=is_dir)
        out[rel] = NOT_FOLLOWED
    # Truncated and foreign documents.
    pdf = docs.pdf(kb.parent / "whole.pdf", "Whole", [("A", "Some text " * 50)]).read_bytes()
    add("truncated.pdf", pdf[: len(pdf) // 2])
    docx = docs.docx(kb.parent / "whole.docx", "Whole", [("A", "Some text " * 50)]).read_bytes()
    add("truncated.docx", docx[: len(docx) // 2])
    add("text-named.pdf", "not a PDF at all\n" * 100)
    add("zip-named.docx", _zip_of({"hello.txt": "no Word parts here"}))
    # Bombs (the short form leaves them to tests/convert/test_convert.py: they take the
    # converter's time limit).
    if full:
        docs.zip_bomb_docx(kb / "zip-bomb.docx", 2048)
        out["zip-bomb.docx"] = ANY
        docs.billion_laughs_docx(kb / "laughs.docx")
        out["laughs.docx"] = ANY
        docs.pdf_bomb(kb / "pdf-bomb.pdf", 1024)
        out["pdf-bomb.pdf"] = ANY
    # Pathological CSV, HTML and Markdown.
    columns = 1_000_000 // scale
    add("wide.csv", ",".join(str(i % 10) for i in range(columns)) + "\n")
    add("tall.csv", "a,b\n" + "".join(f"{i},{i * 7 % 13}\n" for i in range(200_000 // scale)))
    add("ragged.csv", "".join(",".join("x" * rng.randrange(1, 40)
                                       for _ in range(rng.randrange(1, 60))) + "\n"
                              for _ in range(2000)))
    add("quotes.csv", '"' + "unterminated quote, " * 20_000 + "\n")
    docs.deep_html(kb / "deep.html", 100_000 // scale)
    out["deep.html"] = ANY
    add("unclosed.html", "<html><body>" + "<p><b><i>unclosed " * 20_000)
    add("script-only.html", "<html><script>" + "var x = 1;" * 50_000 + "</script></html>")
    add("nested-lists.md", "".join("  " * i + "- item\n" for i in range(2000 if full else 500)))
    add("nested-quotes.md", ">" * (50_000 // scale) + " deep quote\n")
    add("headings.md", "".join(f"{'#' * (i % 6 + 1)} H{i}\n" for i in range(50_000 // scale)))
    add("unclosed-fence.md", "# Code\n\n```python\n" + "x = 1\n" * 50_000)
    add("wide-table.md", "|" + "|".join(f"c{i}" for i in range(10_000)) + "|\n|"
        + "|".join("-" for _ in range(10_000)) + "|\n")
    add("front-matter-only.md", "---\ntitle: " + "x" * 100_000 + "\n---\n")
    add("bad-front-matter.md", "---\n: : : [unclosed\n\tkey: {\n---\n# Body\n\nText.\n")
    # One-line files.
    add("one-line.txt", " ".join(f"w{i % 977}x{i % 13}" for i in range(40_000)))
    add("one-word.txt", "x" * (300_000 // scale))
    add("one-line.md", "# " + "heading " * 40_000)
    return out


def _zip_of(members: dict[str, str]) -> bytes:
    import io

    data = io.BytesIO()
    with zipfile.ZipFile(data, "w") as archive:
        for name, text in members.items():
            archive.writestr(name, text)
    return data.getvalue()


def outcomes(lines: list[dict[str, Any]], held: set[str]) -> dict[str, str]:
    """{path: "indexed" | "skipped: reason"} from an index run's log lines and the paths
    the index holds."""
    found: dict[str, str] = {rel: "indexed" for rel in held}
    for line in lines:
        if line.get("event") == "skipped" and line.get("path") and line["path"] not in found:
            found[str(line["path"])] = f"skipped: {line.get('reason')}"
    return found


def judge(expected: dict[str, str], found: dict[str, str]) -> list[str]:
    """What went wrong: files neither indexed nor skipped with a reason, files indexed that
    should not be, files that should be indexed and were not."""
    problems: list[str] = []
    for rel, expect in expected.items():
        got = found.get(rel)
        if expect == NOT_FOLLOWED and got == "indexed":
            problems.append(f"{rel}: a symlink out of the folder was indexed")
        elif expect == INDEXED and got != "indexed":
            problems.append(f"{rel}: not indexed ({got})")
        elif expect == ANY and got is None:
            problems.append(f"{rel}: neither indexed nor skipped with a reason")
        elif expect == ANY and got.startswith("skipped") and got in ("skipped: None",
                                                                       "skipped: "):
            problems.append(f"{rel}: skipped without a reason")
    return problems


def summary(expected: dict[str, str], found: dict[str, str]) -> dict[str, Any]:
    return {"files": len(expected),
            "indexed": sum(1 for r in expected if found.get(r) == "indexed"),
            "skipped": sum(1 for r in expected if (found.get(r) or "").startswith("skipped")),
            "not_followed": sum(1 for r, e in expected.items() if e == NOT_FOLLOWED
                                and r not in found),
            "reasons": sorted({found[r].split(":", 1)[1].strip()[:80] for r in expected
                               if (found.get(r) or "").startswith("skipped")})}


def dumps(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, sort_keys=True)


def folder_size(kb: Path) -> int:
    return sum(os.path.getsize(p) for p in kb.rglob("*") if p.is_file() and not p.is_symlink())
