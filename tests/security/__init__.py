"""Untrusted input: records, specs, traces, environments (issue 11)."""
