"""Evaluators: retrieval/STS metrics, scenarios, inclination, probes, diagnostics."""
