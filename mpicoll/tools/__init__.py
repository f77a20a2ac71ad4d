"""The command-line tools behind ``python -m mpicoll``, calibration, the launcher's helpers and the test bed."""
