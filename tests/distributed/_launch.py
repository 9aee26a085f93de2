"""Runs a worker script in N local processes the way torchrun would (same
environment variables), with a hard wall-clock limit so a hang fails the test
instead of stalling the suite."""
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

WORKERS = Path(__file__).parent / "workers"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(script, nprocs=2, *, wall_s=240, ranks=None, args=(), env=None, tmp_path=None):
    """Starts ranks (default: all) of a world of `nprocs`; returns one dict
    per started rank: returncode, output, elapsed seconds, and the JSON the
    worker wrote to $TPU_DIST_RESULT (or None)."""
    port = free_port()
    ranks = list(range(nprocs)) if ranks is None else ranks
    procs = []
    start = time.monotonic()
    for rank in ranks:
        result = Path(tmp_path or "/tmp") / f"result_{os.getpid()}_{port}_{rank}.json"
        result.unlink(missing_ok=True)
        e = dict(os.environ)
        e.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                 LOCAL_RANK=str(rank), WORLD_SIZE=str(nprocs), LOCAL_WORLD_SIZE=str(nprocs),
                 TPU_DIST_RESULT=str(result), OMP_NUM_THREADS="1", PYTHONUNBUFFERED="1")
        e.update(env or {})
        p = subprocess.Popen([sys.executable, str(WORKERS / script), *args], env=e,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        procs.append((rank, p, result))
    out = []
    for rank, p, result in procs:
        try:
            text, _ = p.communicate(timeout=max(1.0, wall_s - (time.monotonic() - start)))
            rc = p.returncode
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
            rc = "hung"
        data = json.loads(result.read_text()) if result.exists() else None
        result.unlink(missing_ok=True)
        out.append(dict(rank=rank, returncode=rc, output=text, data=data,
                        elapsed=time.monotonic() - start))
    return out


def check_all_ok(runs):
    for r in runs:
        assert r["returncode"] == 0, f"rank {r['rank']} exited with {r['returncode']}:\n{r['output'][-4000:]}"
