"""``python -m mpicoll.launch``'s command line for either MPI family (no MPI is started here)."""

from __future__ import annotations

import pytest

from mpicoll.launch import mpirun_options, parse_args


def options(args: list[str]) -> list[tuple[str, list[str]]]:
    return parse_args([*args, "script.py"]).options


def test_open_mpi_gets_its_options_as_they_were_given():
    given = ["-x", "A", "--bind-to", "core", "--mca", "btl", "self", "--oversubscribe"]
    assert mpirun_options(options(given), "openmpi") == given


def test_genv_is_x_for_open_mpi():
    assert mpirun_options(options(["-genv", "A", "1 2"]), "openmpi") == ["-x", "A=1 2"]


def test_hydra_gets_its_own_spelling(monkeypatch):
    monkeypatch.setenv("A", "from-env")
    monkeypatch.delenv("UNSET_VAR", raising=False)
    given = ["-x", "A", "-x", "B=2", "-x", "UNSET_VAR", "-genv", "C", "3", "--bind-to", "core", "--map-by", "socket",
             "-H", "h1,h2", "--hostfile", "hosts", "-N", "2", "--tag-output", "--oversubscribe", "-v"]
    assert mpirun_options(options(given), "mpich") == [
        "-genv", "A", "from-env", "-genv", "B", "2", "-genv", "C", "3", "-bind-to", "core", "-map-by", "socket",
        "-hosts", "h1,h2", "-f", "hosts", "-ppn", "2", "-prepend-rank", "-verbose"]


@pytest.mark.parametrize("option", [["--mca", "btl", "self"], ["--display-map"], ["--report-bindings"]])
def test_hydra_refuses_what_it_has_nothing_like(option):
    with pytest.raises(ValueError, match=f"{option[0]} is an Open MPI option"):
        mpirun_options(options(option), "mpich")


def test_verbatim_arguments_before_a_double_dash_are_not_translated():
    launch = parse_args(["-genvlist", "A,B", "--", "script.py"])
    assert launch.options == [] and launch.mpirun_args == ["-genvlist", "A,B"] and launch.program == ["script.py"]


def test_with_ft_ulfm_leaves_out_the_finalize_barrier(monkeypatch):
    # Open MPI's MPI_Finalize barrier could wait for ever for a process that died: the ranks of a --with-ft
    # ulfm job skip it (docs/faults.md), unless the user set the variable
    monkeypatch.delenv("OMPI_MCA_async_mpi_finalize", raising=False)
    launch = parse_args(["-n", "4", "--with-ft", "ulfm", "script.py"])
    assert launch.options == [("--with-ft", ["ulfm"])] and launch.env == {"OMPI_MCA_async_mpi_finalize": "1"}
    assert parse_args(["--with-ft", "mpi", "script.py"]).env == {}
    monkeypatch.setenv("OMPI_MCA_async_mpi_finalize", "0")
    assert parse_args(["--with-ft", "ulfm", "script.py"]).env == {}
