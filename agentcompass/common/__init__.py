"""Helpers shared by the engine, environments, models and benchmarks."""
