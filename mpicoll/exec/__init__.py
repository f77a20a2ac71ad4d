"""Executors: each interprets the same schedules in its own way.

- :mod:`.blocking` runs one rank's schedule on MPI point-to-point calls;
- :mod:`.lockstep` steps all ranks' schedules together in one process, matching
  messages round by round; :mod:`.simulate` (NumPy data) and :mod:`.symbolic`
  (sets of contributions) build on it.
"""
