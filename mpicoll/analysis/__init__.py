"""Schedules interpreted without MPI: simulated, proved, traced, costed and drawn."""
