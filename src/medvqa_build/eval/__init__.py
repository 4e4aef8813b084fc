"""Scoring and baselines: what a build reports about answering its items."""
