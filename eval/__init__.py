"""Evaluations: metrics (and, next, the `cag eval` harness). Import as `from eval import metrics`."""
