"""Kernels: numba setup, the CSR gather behind every aggregation, and Int2/4/8 quantization with its wire format."""
