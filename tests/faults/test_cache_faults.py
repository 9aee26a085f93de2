"""Faults of the persistent compile cache (runtime/disk_cache.h): damaged
entries (bit flips, truncation, garbage) never crash or give a wrong result;
a folder that cannot be written or created says so once; a writer killed half
way and two processes writing at once leave only good entries."""
import glob
import json
import os
import random
import resource
import signal
import time

import pytest

from cache_entries import KINDS, damage, entries


def fuzz(fault, trials, seed):
    s = fault.summary(fault.run("cache_fuzz", trials, seed, timeout=600))
    assert s["trials"] == trials and not s["wrong"] and not s["undetected"], s
    assert s["damaged_seen"] == trials and s["final_ok"] and s["recompiled_at_end"] == 0, s
    return s


# CI: 200 trials, two processes of 100.
@pytest.mark.parametrize("seed", [1, 2])
def test_bit_flip_fuzz(fault, seed):
    fuzz(fault, 100, seed)


@pytest.mark.faults_full
@pytest.mark.parametrize("seed", range(100, 110))
def test_bit_flip_fuzz_long(fault, seed):
    fuzz(fault, 300, seed)


def model_run(fault, name):
    out = fault.tmp / f"{name}.json"
    r = fault.run("cache_model", out)
    return json.load(open(out)), r


def close(a, b):
    return all(abs(x - y) <= 1e-4 * max(1.0, abs(y)) for x, y in zip(a, b))


@pytest.mark.parametrize("kind", ["bit", "garbage"] + [
    pytest.param(k, marks=pytest.mark.faults_full) for k in ("body_bit", "truncate", "zero_run")])
def test_every_entry_damaged(fault, kind):
    first, _ = model_run(fault, "first")
    assert close(first["losses"]["tpu"], first["losses"]["cpu"])
    rng = random.Random(kind)
    files = entries(fault.cache)
    assert files
    for path in files:
        damage(path, kind, rng)
    again, r = model_run(fault, "again")
    assert close(again["losses"]["tpu"], again["losses"]["cpu"])
    # Every program whose entry was read compiled again (none was trusted).
    assert again["counters"].get("disk_damaged", 0) >= 1
    assert again["counters"].get("disk_damaged", 0) == again["counters"].get("compiled", 0)
    assert r.stderr.count("cache entry is damaged") + r.stdout.count("cache entry is damaged") == 1
    third, _ = model_run(fault, "third")  # every damaged entry was replaced
    assert third["counters"].get("disk_damaged", 0) == 0
    assert third["counters"].get("compiled", 0) == 0


def test_folder_that_cannot_be_created_says_so_once(fault):
    blocker = fault.tmp / "file"
    blocker.write_text("not a folder")
    r = fault.run("cache_writer", 3, 4, TORCH_TPU_CACHE_DIR=blocker / "cache")
    assert json.loads(r.stdout.splitlines()[-1])["wrong"] == 0
    assert r.stderr.count("is not a readable folder") == 1, r.stderr


def test_full_disk_says_so_once(fault):
    # A file size limit makes every write of an entry fail (EFBIG), as a full
    # disk would (ENOSPC): caching stops, computing does not.
    code = (
        "import resource, signal, runpy, sys\n"
        "signal.signal(signal.SIGXFSZ, signal.SIG_IGN)\n"
        "resource.setrlimit(resource.RLIMIT_FSIZE, (512, 512))\n"
        f"sys.argv = ['cache_writer', '3', '5']\n"
        f"runpy.run_path({str(os.path.join(os.path.dirname(__file__), 'workers', 'cache_writer.py'))!r}, run_name='__main__')\n"
    )
    r = fault.run(code=code)
    s = json.loads(r.stdout.splitlines()[-1])
    assert s["wrong"] == 0 and s["counters"]["compiled"] >= 5
    assert r.stderr.count("cannot be written") == 1, r.stderr
    assert not entries(fault.cache)
    assert not glob.glob(os.path.join(fault.cache, "*.tmp.*"))  # failed writes clean up


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders anyway")
def test_read_only_folder_says_so_once(fault):
    fault.run("cache_writer", 3, 2)
    os.chmod(fault.cache, 0o555)
    try:
        r = fault.run("cache_writer", 3, 4)
    finally:
        os.chmod(fault.cache, 0o755)
    s = json.loads(r.stdout.splitlines()[-1])
    assert s["wrong"] == 0 and s["counters"].get("disk_hits", 0) >= 2  # still read
    assert r.stderr.count("cannot be written") == 1


def test_writer_killed_half_way(fault):
    rng = random.Random(7)
    for k in range(3):
        p = fault.start("cache_writer", 10 + 100 * k, 60)
        assert p.stdout.readline().strip() == "ready"
        time.sleep(rng.uniform(0.2, 2.0))
        p.send_signal(signal.SIGKILL)
        p.wait(timeout=60)
    # Whatever was renamed into place is whole: a reader finds no damage.
    r = fault.run("cache_writer", 10, 260)
    s = json.loads(r.stdout.splitlines()[-1])
    assert s["wrong"] == 0 and s["counters"].get("disk_damaged", 0) == 0, s


def test_two_processes_compile_into_one_cache(fault):
    procs = [fault.start("cache_writer", 5, 40) for _ in range(2)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        assert json.loads(out.splitlines()[-1])["wrong"] == 0
    r = fault.run("cache_writer", 5, 40)
    s = json.loads(r.stdout.splitlines()[-1])
    assert s["wrong"] == 0 and s["counters"].get("disk_damaged", 0) == 0
    assert s["counters"].get("compiled", 0) == 0, s  # every program came from the disk
