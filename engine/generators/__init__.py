"""Synthetic input data for the pipelines."""

__all__ = ["server_logs"]
