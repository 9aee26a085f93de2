"""A rank that dies, stays silent or never joins: the others raise within the
group timeout (5 s in the worker), naming the collective; nothing hangs."""
from _launch import launch

TIMEOUT_S = 5
SLACK_S = 4


def test_killed_rank_raises_naming_the_collective():
    runs = launch("faults.py", 2, args=["killed"], wall_s=60)
    survivor = runs[0]
    assert survivor["returncode"] == 0, survivor["output"][-3000:]
    assert runs[1]["returncode"] == -9
    err = survivor["data"]["error"]
    assert err and "all_reduce" in err and "rank 0 of 2" in err, err
    assert survivor["data"]["collective_s"] < TIMEOUT_S + SLACK_S


def test_silent_rank_times_out_naming_the_collective():
    runs = launch("faults.py", 2, args=["silent"], wall_s=60)
    survivor = runs[0]
    assert survivor["returncode"] == 0, survivor["output"][-3000:]
    err = survivor["data"]["error"]
    assert err and "all_gather_into_tensor" in err and "5000 ms" in err, err
    assert survivor["data"]["collective_s"] < TIMEOUT_S + SLACK_S


def test_rank_that_never_joins_fails_init_within_timeout():
    runs = launch("faults.py", 2, ranks=[0], args=["never_joins"], wall_s=60)
    r = runs[0]
    assert r["returncode"] == 0, r["output"][-3000:]
    assert r["data"]["error"], r["data"]
    assert r["data"]["init_failed_s"] < TIMEOUT_S + SLACK_S + 3
