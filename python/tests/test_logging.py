"""hmc.route_logging_to_python: hmc's log lines reach logging.getLogger("hmc") at logging's
levels, stop reaching it when routed back, and a process that exits while hmc's threads log
ends cleanly."""

import logging
import os
import subprocess
import sys
import textwrap
import time

import pytest

import hmc


class Records(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.records = []

    def emit(self, record):
        self.records.append(record)

    def wait_for(self, text, timeout=10.0):
        """The first record whose message holds text, waiting for it up to timeout seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            for r in list(self.records):
                if text in r.getMessage():
                    return r
            time.sleep(0.01)
        return None


@pytest.fixture
def records(monkeypatch):
    monkeypatch.setenv("HMC_LOG_LEVEL", "debug")  # read when a context is created
    logger = logging.getLogger("hmc")
    handler = Records()
    logger.addHandler(handler)
    old_level = logger.level
    logger.setLevel(1)
    yield handler
    hmc.route_logging_to_python(False)
    logger.removeHandler(handler)
    logger.setLevel(old_level)


def test_lines_reach_the_hmc_logger_at_their_level(records):
    hmc.route_logging_to_python()
    hmc.route_logging_to_python()  # again: still one routing, each line once
    with hmc.Context(progress_thread=False):
        pass
    ready = records.wait_for("ready: control plane")
    assert ready is not None, [r.getMessage() for r in records.records]
    assert ready.levelno == logging.INFO and ready.name == "hmc"
    assert not ready.getMessage().startswith("[hmc ")  # logging adds its own time and level
    time.sleep(0.2)
    assert sum("ready: control plane" in r.getMessage() for r in records.records) == 1
    assert {r.levelno for r in records.records} <= {
        logging.ERROR, logging.WARNING, logging.INFO, logging.DEBUG}  # HMC_LOG_LEVEL=debug


def test_routing_back_stops_the_lines(records):
    hmc.route_logging_to_python()
    with hmc.Context(progress_thread=False):
        pass
    assert records.wait_for("ready: control plane") is not None
    hmc.route_logging_to_python(False)  # delivers what was queued, then hands back to stderr
    seen = len(records.records)
    with hmc.Context(progress_thread=False):
        pass
    time.sleep(0.3)
    assert len(records.records) == seen


def test_warnings_and_debug_lines_keep_their_level(records, monkeypatch):
    # A ccl plugin named that does not exist: a warning at context creation; a connection: the
    # handshakes' debug lines, from the connecting thread and from hmc's own.
    monkeypatch.setenv("HMC_CCL_PLUGINS", "nosuch_ccl")
    hmc.route_logging_to_python()
    a, b = hmc.Context(), hmc.Context()
    try:
        from concurrent.futures import ThreadPoolExecutor
        with ThreadPoolExecutor(1) as pool:
            accepted = pool.submit(b.accept, 10000)
            a.connect(b.address(), 10000)
            accepted.result()
    finally:
        a.close()
        b.close()
    warning = records.wait_for("names 'nosuch_ccl'")
    assert warning is not None and warning.levelno == logging.WARNING
    handshake = records.wait_for("handshake with")
    assert handshake is not None and handshake.levelno == logging.DEBUG


# hmc's threads log while the interpreter exits: the contexts are never closed, their progress
# and control threads see the last peers close, and the contexts end during finalization. The
# threads that connect stop at exit before hmc's own atexit hooks run (a daemon thread left
# inside hmc_connect would race the C libraries' exit handlers); one
# daemon thread is still waiting in hmc (accept slices) when the interpreter goes.
EXIT_SCRIPT = textwrap.dedent("""
    import atexit, logging, sys, threading, time, hmc
    logging.basicConfig(stream=sys.stdout, level=1, format="%(levelname)s %(name)s %(message)s")
    hmc.route_logging_to_python()
    a, b, c = hmc.Context(), hmc.Context(), hmc.Context()
    stop = threading.Event()

    def connecting():  # handshakes, logged at debug level on both sides
        while not stop.is_set():
            a.connect(b.address(), 10000).close()

    def accepting():
        while not stop.is_set():
            try:
                b.accept(200).close()
            except hmc.TimeoutError:
                pass

    def waiting():  # still inside hmc at exit
        c.accept(60000)

    workers = [threading.Thread(target=f, daemon=True) for f in (connecting, accepting)]
    for w in workers:
        w.start()
    threading.Thread(target=waiting, daemon=True).start()

    def stop_workers():  # registered after hmc's hooks: runs before them
        stop.set()
        for w in workers:
            w.join(10)

    atexit.register(stop_workers)
    time.sleep(0.3)
    print("exiting", flush=True)
""")


@pytest.mark.parametrize("run", range(5))
def test_exit_while_hmc_threads_log(run):
    env = dict(os.environ, HMC_LOG_LEVEL="debug")
    p = subprocess.run([sys.executable, "-c", EXIT_SCRIPT], env=env, capture_output=True,
                       text=True, timeout=60)
    assert p.returncode == 0, (p.returncode, p.stdout[-2000:], p.stderr[-2000:])
    assert "exiting" in p.stdout
    assert " hmc " in p.stdout  # lines reached logging before the exit
