"""Runnable examples: ``mpirun -n N python -m mpicoll.examples.<name>``.

Each example says in its docstring which N it supports, prints what a learner
should see, and checks its own result.
"""
