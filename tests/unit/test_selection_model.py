""""auto" from measurements: the executor terms of the cost model, the model's choice, its precedence and data."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from mpicoll import config
from mpicoll.analysis.cost import Machine, cost
from mpicoll.analysis.presets import DEFAULT_LOCAL
from mpicoll.families import registry
from mpicoll.selection import choose as selection
from mpicoll.selection import model as costed
from mpicoll.selection import tuning as agreement

BASE = Machine(alpha=2e-6, beta=1e-9, gamma=3e-10)
PRICED = replace(BASE, round_overhead=1e-6, message_overhead=5e-7, step_overhead=7e-7, copy=2e-10)


@pytest.fixture
def files(tmp_path, monkeypatch):
    """Point the tuning and calibration files at (absent) files of this test; forget what was read."""
    monkeypatch.delenv("MPICOLL_ALGO", raising=False)
    monkeypatch.setenv("MPICOLL_TUNING", str(tmp_path / "tuning.json"))
    monkeypatch.setenv("MPICOLL_CALIBRATION", str(tmp_path / "calibration.json"))
    selection.reload_tuning()
    yield tmp_path
    monkeypatch.undo()
    selection.reload_tuning()


def _rank_overhead(collective: str, algorithm: str, size: int, machine: Machine) -> float:
    """Rank 0's executor overhead, round by round (every rank of a symmetric algorithm has the same)."""
    sched = registry.schedule(collective, algorithm, 0, size)
    return sum(machine.round_overhead + machine.message_overhead * (len(r.sends) + len(r.recvs))
               + machine.step_overhead * len(r.steps) for r in sched.rounds if r)


@pytest.mark.parametrize("algorithm", ["recursive_doubling", "ring", "rabenseifner"])
def test_overheads_add_per_round_message_and_step(algorithm):
    plain = cost("allreduce", algorithm, 8, 1 << 16, BASE)
    priced = cost("allreduce", algorithm, 8, 1 << 16, replace(PRICED, copy=0.0))
    assert plain.overhead == 0.0
    assert priced.overhead == pytest.approx(_rank_overhead("allreduce", algorithm, 8, PRICED), rel=1e-12)
    assert (priced.latency, priced.bandwidth, priced.reduction) == (plain.latency, plain.bandwidth, plain.reduction)
    assert priced.time == pytest.approx(plain.time + priced.overhead, rel=1e-12)


def test_more_rounds_cost_more_overhead():
    # at 8 bytes the ring's 2(p-1) rounds must lose to recursive doubling's lg p once rounds are priced
    few = cost("allreduce", "recursive_doubling", 8, 8, PRICED).overhead
    many = cost("allreduce", "ring", 8, 8, PRICED).overhead
    assert many > 2 * few > 0


def test_copies_are_priced_per_byte():
    # bruck's allgather ends with a local rotation: copy-priced bytes grow with the message
    small = cost("allgather", "bruck", 5, 1 << 10, PRICED).overhead
    large = cost("allgather", "bruck", 5, 1 << 20, PRICED).overhead
    assert large > small
    unpriced = cost("allgather", "bruck", 5, 1 << 20, replace(PRICED, copy=0.0)).overhead
    assert large > unpriced


def test_not_duplex_adds_the_bytes_a_rank_sends_and_receives():
    both = cost("allgather", "ring", 2, 1 << 20, BASE)
    turns = cost("allgather", "ring", 2, 1 << 20, replace(BASE, duplex=False))
    assert turns.latency == pytest.approx(both.latency) and turns.bandwidth == pytest.approx(2 * both.bandwidth)
    one_way = cost("bcast", "binomial", 2, 1 << 20, BASE, root=0)     # a lone send: nothing to add
    assert cost("bcast", "binomial", 2, 1 << 20, replace(BASE, duplex=False), root=0).time == one_way.time


@pytest.mark.parametrize("duplex", [True, False])
@pytest.mark.parametrize("size", [5, 8])
def test_rotated_costing_stays_exact_with_the_executor_terms(size, duplex):
    machine = replace(PRICED, duplex=duplex)
    for collective in registry.collectives():
        for name in registry.algorithms(collective):
            alg = registry.get(collective, name)
            if not alg.rotates:
                continue
            for nbytes in (1000, 1 << 20):
                fast = cost(collective, name, size, nbytes, machine, sample=True)
                exact = cost(collective, name, size, nbytes, machine, sample=False)
                assert fast.time == pytest.approx(exact.time, rel=1e-9), (collective, name, nbytes)
                assert fast.overhead == pytest.approx(exact.overhead, rel=1e-9), (collective, name, nbytes)


def _write_calibration(path, machine: Machine) -> None:
    path.write_text(json.dumps({"alpha": machine.alpha, "beta": machine.beta, "gamma": machine.gamma,
                                "duplex": machine.duplex}))


def test_the_model_follows_the_calibrated_constants(files):
    names = costed.candidates("allreduce", 8, True)
    latency_bound = Machine(alpha=1e-3, beta=1e-15, gamma=1e-15)
    _write_calibration(files / "calibration.json", latency_bound)
    selection.reload_tuning()
    chosen, _ = selection.choose("allreduce", "auto", size=8, nbytes=1 << 20, count=1 << 17)
    rounds = {n: cost("allreduce", n, 8, 1 << 20, latency_bound, **costed.build_params("allreduce", n, 1 << 20)).rounds
              for n in names}
    assert rounds[chosen] == min(rounds.values()), (chosen, rounds)
    bandwidth_bound = Machine(alpha=1e-12, beta=1e-9, gamma=1e-9)
    _write_calibration(files / "calibration.json", bandwidth_bound)
    selection.reload_tuning()
    chosen, _ = selection.choose("allreduce", "auto", size=8, nbytes=1 << 20, count=1 << 17)
    moved = {n: c.bandwidth + c.reduction for n, c in
             costed.predicted("allreduce", 8, 1 << 20, bandwidth_bound, names).items()}
    assert moved[chosen] == pytest.approx(min(moved.values()), rel=0.01), (chosen, moved)
    assert chosen in ("ring", "rabenseifner")


def test_precedence_environment_then_tuning_then_model(files, monkeypatch):
    (files / "tuning.json").write_text(json.dumps({"allreduce": {"4": [[1000, "linear"], [None, "binomial"]]}}))
    selection.reload_tuning()
    assert selection.choose("allreduce", "auto", size=4, nbytes=8, count=1)[0] == "recursive_doubling"  # count < p
    assert selection.choose("allreduce", "auto", size=4, nbytes=800, count=100)[0] == "linear"
    assert selection.choose("allreduce", "auto", size=4, nbytes=8000, count=1000)[0] == "binomial"
    monkeypatch.setenv("MPICOLL_ALGO", "allreduce=ring")
    assert selection.choose("allreduce", "auto", size=4, nbytes=800, count=100)[0] == "ring"
    monkeypatch.delenv("MPICOLL_ALGO")
    shared = agreement.local()    # no band for p = 5: the model decides
    rule = selection._auto("allreduce")(size=5, nbytes=8000, count=1000, commutative=True)
    model = costed.best("allreduce", size=5, nbytes=8000, commutative=True, machine=shared.machine,
                        key=shared.key, rule=rule)
    assert selection.choose("allreduce", "auto", size=5, nbytes=8000, count=1000)[0] == model


def test_bands_cover_only_the_measured_sizes_and_debug_2_names_the_file(files, monkeypatch, capsys):
    from mpicoll.bench.tune import bands

    rows = bands([(8, "binomial")])            # bench --sizes 8 --tune: a rule for 8-byte calls only
    assert rows == [[8, None], [9, "binomial"], [None, None]]
    assert bands([(1 << 10, "linear"), (1 << 20, "ring")])[1:3] == [[32768, "linear"], [(1 << 20) + 1, "ring"]]
    (files / "tuning.json").write_text(json.dumps({"allreduce": {"4": [[64, None], [128, "linear"],
                                                                        [None, None]]}}))
    monkeypatch.setenv("MPICOLL_DEBUG", "2")
    selection.reload_tuning()
    model_choice = selection.choose("allreduce", "auto", size=4, nbytes=1 << 26, count=1 << 23)[0]
    assert model_choice != "linear"
    assert selection.choose("allreduce", "auto", size=4, nbytes=32, count=4)[0] != "linear"   # below: not measured
    assert "tuning file" not in capsys.readouterr().err
    assert selection.choose("allreduce", "auto", size=4, nbytes=96, count=12)[0] == "linear"
    err = capsys.readouterr().err
    assert f"decided by the tuning file {files / 'tuning.json'}" in err and "auto -> linear" in err


def test_model_says_when_a_tuning_file_decides(files):
    from mpicoll.analysis.presets import preset
    from mpicoll.tools import commands

    (files / "tuning.json").write_text(json.dumps({"allreduce": {"4": [[None, "linear"]]}}))
    selection.reload_tuning()
    text = commands.model("allreduce", 4, 1 << 20, preset("local")).table()
    assert f"on this machine auto runs linear, decided by the tuning file {files / 'tuning.json'}" in text
    assert "no tuning file" in text


def test_rule_tables_beyond_the_model(files):
    p = costed.MODEL_LIMIT + 1
    for collective in ("allreduce", "bcast", "alltoall"):
        rule = selection._auto(collective)(size=p, nbytes=1 << 20, count=1 << 17, commutative=True)
        assert selection.choose(collective, "auto", size=p, nbytes=1 << 20, count=1 << 17)[0] == rule
    # the v-collectives keep theirs at any size
    assert selection.choose("alltoallv", "auto", size=8, nbytes=1 << 20, count=1 << 17)[0] == "pairwise"


def test_the_decision_cache_is_bounded(files, monkeypatch):
    monkeypatch.setattr(costed, "CACHE_ENTRIES", 4)
    for k in range(12):
        selection.choose("allgather", "auto", size=3, nbytes=8 << k, count=1 << k)
        assert len(costed._CACHE) <= 4
    assert costed.bucket(0) == 0 and costed.bucket(1) == 1 and costed.bucket(1000) == 1024 == costed.bucket(1024)


def test_where_the_constants_come_from(files):
    assert agreement.local().machine == DEFAULT_LOCAL and "built-in" in agreement.local().source
    _write_calibration(files / "calibration.json", BASE)
    selection.reload_tuning()
    shared = agreement.local()
    assert shared.machine.alpha == BASE.alpha and str(files) in shared.source
    # no executor overheads in the file: the built-in preset's are taken
    assert shared.machine.step_overhead == DEFAULT_LOCAL.step_overhead
    assert agreement.Shared.from_json(shared.to_json()) == shared
    (files / "calibration.json").write_text('{"alpha": "fast"}')
    selection.reload_tuning()
    with pytest.raises(ValueError, match="alpha"):
        agreement.local()


def test_reload_forgets_decisions(files):
    selection.choose("bcast", "auto", size=3, nbytes=4096, count=512)
    generation = config.generation()
    assert costed._CACHE
    selection.reload_tuning()
    assert not costed._CACHE and config.generation() == generation + 1


def test_autocheck_ratios_from_a_sweep(tmp_path, capsys):
    from mpicoll.bench import autocheck

    def stats(auto: tuple, **forced: tuple) -> dict:
        out = {"memcpy": {"median_s": 1e-7, "min_s": 1e-7}, "builtin": {"median_s": 1e-6, "min_s": 1e-6},
               "auto": {"median_s": auto[0], "min_s": auto[1], "ok": True, "ran": "ring"}}
        out.update({n: {"median_s": m, "min_s": lo, "ok": True} for n, (m, lo) in forced.items()})
        return out

    sweep = [{"collective": "allreduce", "p": 2, "sizes": [
        {"bytes": 8, "count": 1, "stats": stats((2.0, 1.0), ring=(2.0, 1.0), linear=(1.0, 0.5))},
        {"bytes": 1 << 20, "count": 1 << 17, "stats": stats((1.0, 1.0), ring=(1.0, 1.0), linear=(3.0, 2.0))}]}]
    rows = autocheck.ratios(sweep)
    assert [(r["ratio_median"], r["ratio_min"], r["fastest_median"]) for r in rows] == [(2.0, 2.0, "linear"),
                                                                                          (1.0, 1.0, "ring")]
    assert rows[0]["auto"] == "ring"
    (tmp_path / "sweep.json").write_text(json.dumps(sweep))
    autocheck.main(["--from", str(tmp_path / "sweep.json")])
    out = capsys.readouterr().out
    assert "over 1.10" in out and "within 10% (by either) at 1 of 2 sizes" in out


@pytest.mark.parametrize("collective", sorted(__import__("mpicoll.selection.rules", fromlist=["RULES"]).RULES))
def test_each_call_module_shows_its_rule_table_as_the_rule_decides(collective):
    """One source for each "auto" rule: the rows of :mod:`mpicoll.selection.rules` (words and predicate side by
    side); the docstring of ``mpicoll.calls.<collective>`` shows the table they render, or, for a rule of one
    row, names its algorithm.  And every row is reachable: some call takes it."""
    import importlib
    import itertools

    from mpicoll.selection.rules import RULES

    rule = RULES[collective]
    doc = importlib.import_module(f"mpicoll.calls.{collective}").__doc__
    if len(rule.rows) > 1:
        assert rule.table() in doc, f"mpicoll/calls/{collective}.py's table differs from its rule:\n{rule.table()}"
    else:
        assert rule.rows[0].algorithm in doc
    taken = {rule(size=p, nbytes=n, count=c, commutative=k) for p, n, c, k in itertools.product(
        (1, 2, 3, 4, 6, 8, 16, 64, 96, 128), (0, 1 << 8, 1 << 12, 1 << 17, 1 << 20, 1 << 23), (0, 1, 1 << 20),
        (True, False))}
    assert taken == {row.algorithm for row in rule.rows}, f"unreachable rows in {collective}'s rule"
