"""Benchmark suites: tasks, the files an agent sees, and the graders that score its work."""
