"""Benchmarks behind `leanseg bench`: each configuration runs in its own subprocess."""
