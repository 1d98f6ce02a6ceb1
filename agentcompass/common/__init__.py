"""Mechanisms every part of AgentCompass shares: the data dir, Hub downloads, file locks, the pip installer,
bounded loading, backoff, error kinds."""
