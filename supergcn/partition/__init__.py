"""Partitioning: how a prepared graph's nodes are split into P parts (the options, the
METIS and KaMinPar engines and MixGCN's reverse Cuthill-McKee row ranges, the balance
constraints) and the partition directory that records the split for the steps after it."""
