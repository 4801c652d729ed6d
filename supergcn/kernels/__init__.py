"""Kernels: Numba setup, the CSR gathers behind every aggregation, GAT's edge-level kernels,
the fused activation, fixed-order sums, and Int2/4/8 quantization with its wire format.
The API reference lists the modules."""
