"""``python -m mpicoll doctor``'s merging of the ranks' flight records, on records made up here."""

from __future__ import annotations

import json

import pytest

from mpicoll.tools import doctor


def call(seq, collective="allreduce", algorithm="ring", nbytes=64, *, kind="blocking", done=True, **outcome):
    entry = {"kind": kind, "seq": seq, "collective": collective, "algorithm": algorithm, "bytes": nbytes,
             "start": 100.0 + float(str(seq).split(".")[0]), "end": 101.0 if done and not outcome else None}
    entry.update(outcome)
    return entry


def record(rank, calls, members=(0, 1, 2, 3), reason="CollectiveTimeout", ordinal=0, comm_rank=None):
    return {"rank": rank, "pid": 1, "host": "h", "reason": reason, "time": 0.0,
            "comms": [{"members": list(members), "ordinal": ordinal, "rank": rank if comm_rank is None else comm_rank,
                       "calls": calls}]}


def timeout(seq, rnd, peers, algorithm="ring"):
    return call(seq, algorithm=algorithm, done=False, error="CollectiveTimeout", message="", round=rnd, peers=peers,
                failed=[])


def test_ranks_text():
    assert doctor.ranks_text([3]) == "rank 3"
    assert doctor.ranks_text([2, 0]) == "ranks 0, 2"
    assert doctor.ranks_text([0, 1, 2, 5, 7, 8]) == "ranks 0-2, 5, 7, 8"


def test_the_issue_missing_rank_at_4():
    records = {r: record(r, [call(1181), timeout(1182, 1, [3])]) for r in range(3)}
    records[3] = record(3, [call(1180), call(1181)], reason="exit")
    assert doctor.explain(records) == [
        "4 records (ranks 0-3), written on CollectiveTimeout (ranks 0-2); exit (rank 3)",
        "comm 1 (4 ranks):",
        "  rank 3 never entered call 1182 (Allreduce on comm 1); its last call there was Allreduce #1181 (completed)",
        "  ranks 0-2 wait in round 1 of ring for rank 3",
    ]


def test_a_collective_mismatch_names_both_groups():
    records = {r: record(r, [call(16), call(17, "bcast", "binomial", done=False)], members=(0, 1, 2), reason="SIGUSR1")
               for r in (0, 2)}
    records[1] = record(1, [call(16), call(17, done=False)], members=(0, 1, 2), reason="SIGUSR1")
    report = doctor.explain(records)
    assert report[2] == "  ranks 0, 2 are in Bcast #17, rank 1 is in Allreduce #17 (a mismatch)", report


def test_a_size_mismatch():
    records = {0: record(0, [call(5, nbytes=8)], members=(0, 1)), 1: record(1, [call(5, nbytes=16)], members=(0, 1))}
    assert doctor.explain(records)[2] == "  rank 0 called Allreduce #5 with 8 bytes, rank 1 called Allreduce #5 with " \
                                         "16 bytes (a mismatch)"


def test_a_death_seen_by_the_survivors():
    failed = dict(done=False, error="ProcFailedError", message="", peers=[], failed=[2])
    records = {0: record(0, [call(3, "allreduce", "rabenseifner", round=3, **failed)], reason="ProcFailedError"),
               1: record(1, [call(3, "allreduce", "rabenseifner", round=3, **failed)], reason="ProcFailedError"),
               3: record(3, [call(3, "allreduce", "rabenseifner", round=2, **failed)], reason="ProcFailedError")}
    assert doctor.explain(records)[1:] == [
        "comm 1 (4 ranks):",
        "  rank 2 died; ranks 0, 1, 3 learned it in call 3 (Allreduce on comm 1)",
        "  ranks 0, 1 stopped in round 3 of rabenseifner (ProcFailedError)",
        "  rank 3 stopped in round 2 of rabenseifner (ProcFailedError)",
        "  rank 2: no record (a process that died writes none; one stuck outside mpicoll writes on SIGUSR1 or at exit)",
    ]


def test_communicators_are_told_apart_by_members_and_ordinal_and_local_ranks_are_used():
    """Two communicators of world ranks 2 and 3 (ranks 0 and 1 in them): the second one's call is stuck."""
    records = {}
    for world, local in ((2, 0), (3, 1)):
        comms = [{"members": [2, 3], "ordinal": 0, "rank": local, "calls": [call(1)]},
                 {"members": [2, 3], "ordinal": 1, "rank": local,
                  "calls": [call(1, kind="nonblocking")] if local == 0 else [timeout(1, 0, [0])]}]
        records[world] = {"rank": world, "reason": "exit", "comms": comms}
    report = doctor.explain(records)
    assert report == [
        "2 records (ranks 2, 3), written on exit (ranks 2, 3)",
        "comm 1 (2 ranks, world ranks 2, 3):",
        "  every call completed on every rank with a record (ranks 0, 1)",
        "comm 2 (2 ranks, world ranks 2, 3):",
        "  rank 0 never entered call 1 (Allreduce on comm 2); it made no call there before",
        "  rank 1 waits in round 0 of ring for rank 0",
    ], report


def test_an_intercommunicator_is_headed_with_its_groups_and_a_communicator_without_calls_left_out():
    """World ranks 1 | 0, 2 merged as ranks 0 | 1, 2; rank 2 (world 2) never entered call 2; the private
    communicator of the group {0, 2}, which made no call, is not reported."""
    records = {}
    for world, merged in ((1, 0), (0, 1), (2, 2)):
        calls = [call(1, algorithm="intercomm", nbytes=-1),
                 call(1, algorithm="intercomm", nbytes=-1, kind="nonblocking")]
        if world != 2:
            calls.append(timeout(2, 1, [merged - 1 if merged else 1], algorithm="intercomm"))
        comms = [{"members": [1, 0, 2], "ordinal": 0, "rank": merged, "groups": [1, 2], "calls": calls}]
        if world != 1:
            comms.append({"members": [0, 2], "ordinal": 0, "rank": world // 2, "calls": []})
        records[world] = {"rank": world, "reason": "exit" if world == 2 else "CollectiveTimeout", "comms": comms}
    assert doctor.explain(records) == [
        "3 records (ranks 0-2), written on CollectiveTimeout (ranks 0, 1); exit (rank 2)",
        "comm 1 (intercommunicator of groups rank 0 | ranks 1, 2; world ranks 1 | 0, 2):",
        "  rank 2 never entered call 2 (Allreduce on comm 1); its last call there was Allreduce #1 (completed)",
        "  rank 0 waits in round 1 of intercomm for rank 1",
        "  rank 1 waits in round 1 of intercomm for rank 0",
    ]


def test_persistent_starts_are_ordered_by_number_then_start():
    calls = [call("4.9", kind="persistent"), call("4.10", kind="persistent", done=False)]
    records = {0: record(0, calls, members=(0,), reason="SIGUSR1")}
    assert doctor.explain(records)[2] == "  rank 0 waits in ring (still running when the record was written)"


def test_load_reads_a_folder_and_refuses_an_empty_one(tmp_path):
    with pytest.raises(ValueError, match="no flight records"):
        doctor.load(str(tmp_path))
    (tmp_path / "rank-0.json").write_text(json.dumps(record(0, [call(1)], members=(0,), reason="exit")))
    assert doctor.main([str(tmp_path)]) == 0
    (tmp_path / "rank-1.json").write_text("{not json")
    with pytest.raises(ValueError, match="rank-1.json: not a flight record"):
        doctor.load(str(tmp_path))
