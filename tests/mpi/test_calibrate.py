"""calibrate measures positive, plausible constants and writes them where `local` reads them."""

from __future__ import annotations

import json

import pytest

from mpicoll.tools.calibrate import measure

from conftest import WORLD, check


@pytest.mark.mpi
def test_measure_gives_plausible_constants():
    if WORLD.size < 2:
        with pytest.raises(ValueError, match="at least 2"):
            measure(WORLD)
        return
    values = measure(WORLD, reps=20, big=1 << 20)
    check(0 < values["alpha"] < 0.1 and 0 < values["beta"] < 1e-6 and 0 < values["gamma"] < 1e-6, str(values))
    check(values == WORLD.bcast(values, root=0), "ranks disagree")


@pytest.mark.mpi
def test_calibrate_writes_the_file(tmp_path_factory, monkeypatch):
    if WORLD.size < 2:
        pytest.skip("needs 2 processes")
    from mpicoll.analysis.presets import preset
    from mpicoll.tools.calibrate import calibrate

    base = WORLD.bcast(str(tmp_path_factory.mktemp("cal")) if WORLD.rank == 0 else None, root=0)
    monkeypatch.setenv("MPICOLL_CALIBRATION", f"{base}/calibration.json")
    values = calibrate(WORLD, f"{base}/copy.json")
    if WORLD.rank == 0:
        with open(f"{base}/copy.json") as f:
            saved = json.load(f)
        check(saved["alpha"] == values["alpha"] and preset("local").alpha == values["alpha"], str(saved))
    else:
        check(True)
