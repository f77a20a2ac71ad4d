"""The schedule language: schedules, layouts, collective contracts and node layouts (NumPy at most, no MPI)."""
