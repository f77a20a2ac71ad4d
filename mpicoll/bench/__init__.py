"""Benchmarks: ``python -m mpicoll.bench`` (every algorithm against the built-in), OSU's demos, auto's check."""
