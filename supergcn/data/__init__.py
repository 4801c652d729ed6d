"""Data: the canonical on-disk graph, the dataset registry and atomic, self-describing storage."""
