"""Text in images and scanned PDFs, read by OCR and found by meaning through the search tool:
real pictures rendered by the test in several fonts and sizes, turned, faded and speckled,
PDFs made of them, a decompression bomb and a long scan, indexed by the real pipeline with
the built-in model (the fake embedder where no search needs meaning). The tests of OCR ask
for `engine` and skip, with the reason, where the extra is not installed; the tests of the
path without it run everywhere."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.machinery import ModuleSpec
from pathlib import Path
from typing import Any

import anyio
import msgspec
import pytest
from ocr_pictures import picture, png_bomb, save, scanned_pdf, transparent
from PIL import Image
from structlog.testing import capture_logs
from support.mcp_harness import until
from support.runtime import fake, make_config, running, shared, with_fields
from support.tools import Tools

from pocketmcp.config import Config
from pocketmcp.convert import ocr
from pocketmcp.convert.limits import Limits, OcrLimits
from pocketmcp.convert.pool import Converter, ocr_off
from pocketmcp.core.text import sha256
from pocketmcp.embed.local import LocalEmbedder
from pocketmcp.embed.priority import NICE, level
from pocketmcp.errors import ConfigError, DocumentError
from pocketmcp.plans import Plan, serving
from pocketmcp.runtime import Runtime

# OCR runs at a lower priority: on a machine busy with other work it waits its turn.
pytestmark = pytest.mark.timeout(900)


@pytest.fixture
def engine(processes: dict[str, str]) -> None:
    """The OCR extra's engine, run in worker processes: skipped with the reason where it is
    not installed (Python 3.13 and newer, where it has no wheel: the one skip CI allows,
    tests/support/lanes.py)."""
    if ocr.missing() is not None:
        pytest.skip(str(ocr.missing()))

INVOICE = ("Harbour Plumbing invoice 4471. We replaced the leaking boiler valve in the "
           "kitchen and flushed the radiators. Amount due: 240 euros by 12 March.")
WHITEBOARD = ("Quarterly roadmap: migrate the billing service to the new database cluster "
              "before the summer freeze, then retire the old payment gateway.")
RECEIPT = ("Corner bakery receipt: two sourdough loaves, one cinnamon roll and a large "
           "cappuccino. Paid by card, thank you for your visit.")
NOTICE = ("Dear tenants, the water supply will be shut off on Tuesday morning while the "
          "building's pipes are repaired. Please store some drinking water.")
FLYER = ("Volunteers wanted for the river clean-up on Saturday: bring gloves and boots, we "
         "collect plastic bottles and fishing nets along the banks.")
LEASE = ("Lease agreement between the landlord and the tenant. The monthly rent is payable "
         "on the first day of each month and the deposit equals two months of rent.")
TELESCOPE = ("Observing log: the telescope mirror was cleaned and collimated; Jupiter and "
             "its four largest moons were clearly visible after midnight.")
TEXT_PAGE = ("Seed catalogue. Heirloom tomato varieties for greenhouse growing, sown in "
             "February and planted out after the last frost.")


def ocr_config(tmp_path: Path, **env: str) -> Config:
    return make_config(tmp_path, {"CONVERT_TIMEOUT_S": "300", **env})


@asynccontextmanager
async def indexed(config: Config, watch: bool = False, plan: Plan | None = None, **kw: Any
                  ) -> AsyncIterator[Runtime]:
    """A runtime whose first scan is done (`plan`, else scanning and serving, or watching with
    `watch`); `kw` goes to `running`. Closed however the block ends."""
    if plan is None:
        plan = serving(True) if watch else Plan(feed="scan", keep_serving=True)
    async with running(config, plan, **kw) as rt:
        assert rt.pipeline is not None
        with anyio.fail_after(600):
            await rt.pipeline.scan_done.wait()
        yield rt


async def vectors_in(tools: Tools) -> None:
    """Until every chunk has its vector: the text is searchable by keywords first."""
    await until(lambda: tools("status"), lambda s: s["chunks_waiting"] == 0, 300)


async def top_path(tools: Tools, query: str) -> dict[str, Any]:
    matches = await tools.search(query, top_k=3, unique_docs=True, score_threshold=0)
    assert matches, query
    return matches[0]


@pytest.mark.usefixtures("engine")
async def test_images_and_scans_are_found_by_meaning(tmp_path: Path,
                                                     embedder: LocalEmbedder) -> None:
    inbox = tmp_path / "inbox"
    inbox.mkdir()
    config = ocr_config(tmp_path, ALLOWED_ROOTS=str(inbox))
    kb = config.watched.root
    (kb / "photos").mkdir()
    save(transparent(picture(INVOICE, face="DejaVuSans", size=26)), kb / "invoice.png")
    save(picture(WHITEBOARD, face="DejaVuSerif", size=30, angle=90).convert("RGB"),
         kb / "whiteboard.jpg", quality=90)
    save(picture(RECEIPT, face="DejaVuSansMono", size=24, angle=180), kb / "receipt.webp")
    save(picture(NOTICE, face="DejaVuSans", size=28, ink=120, paper=175),
         kb / "photos" / "notice.tiff")
    save(picture(FLYER, face="DejaVuSerif-Bold", size=30, noise=0.04), kb / "flyer.bmp")
    scanned_pdf(kb / "lease.pdf", [picture(LEASE[:90], size=22, width=1240),
                                   picture(LEASE[90:], size=22, width=1240)])
    scanned_pdf(kb / "mixed.pdf", [TEXT_PAGE, picture(TELESCOPE, size=24, width=1240)])
    png_bomb(kb / "bomb.png")
    (kb / "garden.md").write_text("# Garden\n\nPrune the apple trees in late winter.\n")

    async with indexed(config, watch=True, embedding=shared(embedder, config)) as rt:
        tools = Tools(rt)
        await vectors_in(tools)
        cases = {
            "how much do I owe the plumber for fixing the boiler": "invoice.png",
            "plan to move payments to a new database this quarter": "whiteboard.jpg",
            "what bread did I buy at the bakery": "receipt.webp",
            "when will the water be turned off in the building": "photos/notice.tiff",
            "cleaning rubbish out of the river with volunteers": "flyer.bmp",
            "when is the rent due under the lease": "lease.pdf",
            "looking at Jupiter's moons through the telescope": "mixed.pdf",
            "when to prune fruit trees": "garden.md",
        }
        for query, path in cases.items():
            match = await top_path(tools, query)
            assert match["path"] == path, (query, match["path"], match["preview"])
            if path != "garden.md":  # the result says where the text came from
                assert "OCR" in match["section"], match

        tomato = await top_path(tools, "heirloom tomatoes for the greenhouse")
        assert (tomato["path"], tomato["section"]) == ("mixed.pdf", "Page 1")
        mixed = await tools("get_document", doc_id=tomato["doc_id"])
        assert "pages 2," in mixed["metadata"]["ocr"], mixed["metadata"]
        assert "Page 2 (OCR)" in mixed["text"] and "Jupiter" in mixed["text"]

        status = await tools("status")
        assert status["ocr"].startswith("on: rapidocr-onnxruntime 1.4.4"), status["ocr"]
        progress = rt.progress()
        assert progress.files_skipped == 1
        [skip] = progress.recent_skips
        assert skip.path == "bomb.png" and "refused before decoding" in skip.reason, skip
        assert progress.files_added == 8

        # Renamed, moved and re-indexed by force: the text comes from the OCR cache.
        converter = rt.converter
        runs = converter.ocr_runs
        assert runs == 7  # five images, two scanned PDFs
        (kb / "invoice.png").rename(kb / "photos" / "plumber.png")
        reindexed = await tools("reindex", force=True)
        assert reindexed["files_added"] == 1, reindexed
        await vectors_in(tools)
        assert converter.ocr_runs == runs, "OCR ran again for content it had read"
        assert converter.cache.hits >= 7
        match = await top_path(tools, "how much do I owe the plumber for fixing the boiler")
        assert match["path"] == "photos/plumber.png"

        # ingest_file reads an image too (here one whose text the cache holds).
        (inbox / "scan.webp").write_bytes((kb / "receipt.webp").read_bytes())
        result = await tools("ingest_file", path=str(inbox / "scan.webp"), library="inbox")
        assert (result["status"], result["format"]) == ("indexed", "image")
        found = await tools.search("sourdough bread receipt", library="inbox")
        assert found[0]["doc_id"] == result["doc_id"]
        assert converter.ocr_runs == runs


@pytest.mark.usefixtures("engine")
async def test_a_long_scan_stops_at_its_page_cap_and_the_folder_is_indexed(
        tmp_path: Path, embedder: LocalEmbedder) -> None:
    config = ocr_config(tmp_path)
    config = with_fields(config, convert={"ocr": msgspec.structs.replace(config.convert.ocr,
                                                                         max_pages=3)})
    kb = config.watched.root
    pages = [picture(f"Archive box {n}: minutes of the rowing club meeting", size=22,
                     width=700, margin=10) for n in range(1, 301)]
    scanned_pdf(kb / "archive.pdf", pages, dpi=100)
    (kb / "kayak.md").write_text("# Kayak\n\nThe kayak needs a new spray deck.\n")
    async with indexed(config, embedding=shared(embedder, config)) as rt:
        tools = Tools(rt)
        progress = rt.progress()
        assert (progress.files_added, progress.files_skipped) == (2, 0)
        assert rt.converter.ocr_runs == 1
        # The OCR worker yields to searches: it runs at the one level of all indexing work,
        # NICE below the server, not lowered twice.
        [worker] = rt.converter._ocr_pool._idle
        assert os.getpriority(os.PRIO_PROCESS, worker.process.pid) == level() == min(
            19, os.getpriority(os.PRIO_PROCESS, os.getpid()) + NICE)
        match = await top_path(tools, "rowing club meeting minutes")
        assert match["path"] == "archive.pdf"
        document = await tools("get_document", doc_id=match["doc_id"])
        assert "of 300 scanned; at most 3 are read" in document["metadata"]["ocr"]
        text = document["text"]
        assert "Page 3 (OCR)" in text and "Page 4 (OCR)" not in text
        assert "Archive box 3" in text and "Archive box 4" not in text
        assert (await top_path(tools, "boat equipment to replace"))["path"] == "kayak.md"


@pytest.mark.usefixtures("engine")
async def test_text_files_are_not_held_up_by_images_waiting_for_ocr(tmp_path: Path) -> None:
    # One file read at a time, two images first in the scan's order: the note is indexed
    # while they wait for the OCR worker, not after them.
    config = ocr_config(tmp_path, READ_CONCURRENCY="1")
    kb = config.watched.root
    save(picture(RECEIPT), kb / "a-receipt.png")
    save(picture(FLYER), kb / "b-flyer.png")
    (kb / "c-garden.md").write_text("# Garden\n\nPrune the apple trees in late winter.\n")
    order: list[str] = []
    async with indexed(config, on_event=lambda e: order.append(e.get("path", ""))
                       if e["event"] == "inserted" else None, embedding=fake(config)):
        pass
    assert order[0] == "c-garden.md" and sorted(order) == [
        "a-receipt.png", "b-flyer.png", "c-garden.md"], order


@pytest.mark.usefixtures("engine")
async def test_with_postgres_the_ocr_cache_is_in_the_indexs_own_folder(
        tmp_path: Path, pg_url: str, pg_schema: str) -> None:
    config = ocr_config(tmp_path, STORE="postgres", DATABASE_URL=pg_url, PG_SCHEMA=pg_schema)
    save(picture(RECEIPT, size=22, width=700), config.watched.root / "receipt.png")
    cache = config.main_place().beside("ocr")
    assert pg_schema in str(cache) and stat.S_IMODE(cache.parent.stat().st_mode) == 0o700
    async with indexed(config, embedding=fake(config)) as rt:
        assert rt.converter.ocr_runs == 1
        match = await top_path(Tools(rt), "what bread did I buy at the bakery")
        assert match["path"] == "receipt.png" and "OCR" in match["section"]
    assert len(list(cache.glob("*/*.msgpack"))) == 1
    # The index rebuilt from scratch: its text comes from the cache.
    async with indexed(config, plan=Plan(feed="scan", keep_serving=True, rebuild=True),
                       embedding=fake(config)) as rt:
        assert (rt.converter.ocr_runs, rt.converter.cache.hits) == (0, 1)
        assert rt.progress().files_added == 1


async def test_with_ocr_off_images_are_skipped_saying_why(tmp_path: Path) -> None:
    config = ocr_config(tmp_path, OCR="off")
    kb = config.watched.root
    save(picture(INVOICE), kb / "invoice.png")
    scanned_pdf(kb / "lease.pdf", [picture(LEASE, size=22, width=1240)])
    (kb / "garden.md").write_text("# Garden\n\nPrune the apple trees in late winter.\n")
    async with indexed(config, embedding=fake(config)) as rt:
        progress = rt.progress()
        reasons = {s.path: s.reason for s in progress.recent_skips}
        assert reasons == {"invoice.png": "image not read: OCR is off (OCR=off)",
                           "lease.pdf": "scanned PDF with no text layer not read: OCR is off "
                                        "(OCR=off)"}
        assert progress.files_added == 1 and rt.converter.ocr_runs == 0
        assert (await Tools(rt)("status"))["ocr"] == "off: OCR is off (OCR=off)"


@pytest.mark.usefixtures("engine")
async def test_a_model_folder_is_used_and_a_wrong_one_refused(tmp_path: Path) -> None:
    import io
    import shutil

    import rapidocr_onnxruntime

    models = tmp_path / "models"
    shutil.copytree(Path(rapidocr_onnxruntime.__file__).parent / "models", models)
    image = io.BytesIO()
    picture(RECEIPT[:60], size=24, width=900).save(image, "PNG")
    data = image.getvalue()
    for folder, expected in ((models, "Corner bakery receipt"),
                             (tmp_path, "holds no PP-OCR detection and recognition models")):
        conv = Converter(Limits(ocr=OcrLimits(model_dir=str(folder))))
        try:
            if folder == models:
                got = await conv.convert("image", data, "r.png", sha256(data))
                assert expected in got.text, got.text
            else:
                with pytest.raises(DocumentError, match=expected):
                    await conv.convert("image", data, "r.png", sha256(data))
        finally:
            await conv.aclose()


@pytest.mark.usefixtures("processes")
def test_without_the_extra_index_says_which_images_it_skipped_and_why(tmp_path: Path) -> None:
    # This environment without the OCR engine: its packages seen through links, all but
    # rapidocr's, by an interpreter that reads no site folder of its own.
    import sysconfig

    packages = Path(sysconfig.get_path("purelib"))
    lean = tmp_path / "site"
    lean.mkdir()
    for entry in packages.iterdir():
        if not entry.name.lower().startswith("rapidocr"):
            (lean / entry.name).symlink_to(entry)
    kb = tmp_path / "kb"
    kb.mkdir()
    save(picture(INVOICE), kb / "invoice.png")
    (kb / "garden.md").write_text("# Garden\n\nPrune the apple trees in late winter.\n")
    root = Path(__file__).parents[2]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), str(lean)]),
           "SQLITE_PATH": str(tmp_path / "index.db"), "WATCH_DIR": str(kb)}
    done = subprocess.run([sys.executable, "-S", "-m", "pocketmcp", "index"], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 3, done.stderr[-2000:]  # indexed, some files skipped
    assert "1 added" in done.stdout and "1 skipped" in done.stdout, done.stdout
    assert ("invoice.png: image not read: OCR needs rapidocr-onnxruntime, which is not "
            "installed: install the OCR extra: pip install 'pocketmcp[ocr]'") in done.stdout


def test_without_the_extra_the_reason_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "rapidocr_onnxruntime" else real(name))
    assert ocr_off(OcrLimits()) == ("OCR needs rapidocr-onnxruntime, which is not installed: "
                                    "install the OCR extra: pip install 'pocketmcp[ocr]'")


def test_ocr_on_without_the_extra_is_refused_at_start(monkeypatch: pytest.MonkeyPatch,
                                                      tmp_path: Path) -> None:
    import importlib.util

    # Only OpenCV missing: the engine found (whether it is installed or not, as on Python
    # 3.13, where it has no wheel).
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: (
        None if name == "cv2" else ModuleSpec(name, None) if name == "rapidocr_onnxruntime"
        else real(name)))
    with pytest.raises(ConfigError, match=r"OCR accepts auto or off: OCR needs "
                                          r"opencv-python-headless.*pocketmcp\[ocr\]"):
        ocr_config(tmp_path, OCR="on")
    assert ocr_config(tmp_path, OCR="auto").convert.ocr.mode == "auto"


@pytest.mark.usefixtures("processes")
def test_the_server_imports_no_ocr_engine() -> None:
    code = ("import sys, pocketmcp.runtime, pocketmcp.mcp.server, pocketmcp.convert.pool; "
            "heavy = {'rapidocr_onnxruntime', 'cv2', 'PIL'} & set(sys.modules); "
            "assert not heavy, heavy")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120,
                   env={**os.environ, "PYTHONPATH": str(Path(__file__).parents[2])})


@pytest.mark.usefixtures("engine")
async def test_blank_pages_and_images_make_no_chunk_and_are_counted(tmp_path: Path) -> None:
    """A white image, a scan of white pages and the blank pages of a scan with text give no
    "Page N (OCR)" chunk (once, heading-only chunks ranked above the threshold for "page");
    the files with no text at all are counted; an unreadable image is skipped with a reason
    that names no object of the worker."""
    config = ocr_config(tmp_path)
    kb = config.watched.root
    white = Image.new("L", (900, 600), 255)
    save(white, kb / "blank.png")
    scanned_pdf(kb / "blank.pdf", [white, white, white])
    scanned_pdf(kb / "lease.pdf", [white, picture(LEASE[:90], size=22, width=1240), white])
    (kb / "broken.png").write_bytes(b"\x89PNG not an image at all" * 10)
    async with indexed(config, embedding=fake(config)) as rt:
        tools = Tools(rt)
        progress = rt.progress()
        assert rt.pipeline is not None and rt.pipeline.stats.no_text == 2
        [skip] = progress.recent_skips
        assert skip.path == "broken.png" and "not a readable image" in skip.reason, skip
        assert " object at 0x" not in skip.reason, skip.reason
        listed = {d["path"]: d for d in (await tools("list_documents"))["documents"]}
        assert {"blank.png", "blank.pdf", "lease.pdf"} <= set(listed)
        for name in ("blank.png", "blank.pdf"):
            assert listed[name]["chunk_count"] == 0, listed[name]
        lease = await tools("get_document", doc_id=listed["lease.pdf"]["doc_id"])
        assert "Page 2 (OCR)" in lease["text"] and "Lease agreement" in lease["text"]
        assert "Page 1" not in lease["text"] and "Page 3" not in lease["text"]
        found = await tools.search("page", top_k=10, score_threshold=0)
        assert {m["path"] for m in found} <= {"lease.pdf"}, found


@pytest.mark.usefixtures("engine")
async def test_a_scan_stops_at_the_files_ocr_time_budget(tmp_path: Path) -> None:
    config = ocr_config(tmp_path)
    assert config.convert.ocr_budget_s == 600  # twice CONVERT_TIMEOUT_S (300 here)
    config = with_fields(config, convert={"ocr_budget_s": 1.0})
    kb = config.watched.root
    pages = [picture(f"Archive box {n}: minutes of the rowing club meeting", size=22,
                     width=700, margin=10) for n in range(1, 41)]
    scanned_pdf(kb / "archive.pdf", pages, dpi=100)
    with capture_logs() as logged:
        async with indexed(config, embedding=fake(config)) as rt:
            tools = Tools(rt)
            [doc] = (await tools("list_documents"))["documents"]
            document = await tools("get_document", doc_id=doc["doc_id"])
            assert "Archive box 1" in document["text"]
            assert "Archive box 40" not in document["text"]
            said = document["metadata"]["ocr"]
            assert "stopped at the OCR time budget of 1 s (twice CONVERT_TIMEOUT_S)" in said, said
            assert "scanned; at most" not in said, said  # 40 pages: under the page cap
            assert rt.converter.cache.folder is not None
            assert not list(rt.converter.cache.folder.rglob("*.msgpack"))  # not kept as read
    [spent] = [e for e in logged if e["event"] == "ocr_time_budget"]
    assert spent["path"] == "archive.pdf" and spent["code"] == "OCR_BUDGET_SPENT"
    assert spent["unread"] >= 1 and spent["read"] + spent["unread"] == 40
