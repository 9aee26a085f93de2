"""Interrupts (common/interrupt.h): SIGINT at random moments of a loop of tpu
ops raises KeyboardInterrupt, leaves no result half-written and the process
usable; a long wait is interrupted while it waits."""
import json
import random
import signal
import threading
import time

import pytest


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_sigint_at_random_moments(fault, mode, rounds=4):
    p = fault.start("interrupt_loop", mode, rounds)
    # A child that never answers is killed, so a lost interrupt fails the
    # test (its readline ends) instead of hanging the suite.
    watchdog = threading.Timer(300, p.kill)
    watchdog.start()
    try:
        assert p.stdout.readline().strip() == "ready"
        rng = random.Random(mode)
        seen = 0
        while seen < rounds:
            time.sleep(rng.uniform(0.05, 1.0))
            p.send_signal(signal.SIGINT)
            line = p.stdout.readline()  # the child says when it has taken one
            assert line.startswith("interrupt"), (line, p.stderr.read()[-3000:])
            seen += 1
        # The rest through the same buffered reader: the child's last
        # "interrupt" line and its summary can arrive in one read, and
        # communicate() reads the pipe itself, past what readline() buffered
        # (the summary was once lost that way under CI's load).
        out, err = p.stdout.read(), p.stderr.read()
        p.wait(timeout=300)
    finally:
        watchdog.cancel()
        if p.poll() is None:
            p.kill()
    assert p.returncode == 0, err[-3000:]
    s = json.loads(out.strip().splitlines()[-1])
    assert s["interrupts"] == rounds and s["wrong"] == 0, s


@pytest.mark.parametrize("mode", ["strict", "defer_and_fuse"])
def test_sigint_during_a_long_wait(fault, mode):
    s = fault.summary(fault.run("interrupt_wait", mode, timeout=400))
    print(s)  # seconds_to_interrupt / seconds_to_finish: the report's figures
    assert s["interrupted"] and s["in_progress_at_interrupt"] > 0, s
    assert s["right"], s


def test_sigint_while_a_graph_waits_for_its_inputs(fault):
    # The graph read last was interrupted before it was launched: it must
    # stay pending (it once stayed marked flushed, and its result read as
    # zeros), then run when read again.
    s = fault.summary(fault.run("interrupt_producer_wait", timeout=400, TORCH_TPU_FUSE_MAX_OPS=100))
    assert s["interrupted"] and s["in_flight_at_interrupt"] > 0, s
    assert s["right"], s
