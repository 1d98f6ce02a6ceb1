"""Mechanisms every part of AgentCompass shares: the data dir, Hub downloads, file locks, bounded loading, backoff,
error kinds."""
