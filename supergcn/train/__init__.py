"""Training: the GNN layers, the trainer loop, checkpoints, the metrics writer and the PyG reference.

Sub-modules are imported where they are used (nothing is re-exported here), so that
light modules such as :mod:`supergcn.train.config` load without torch.
"""
