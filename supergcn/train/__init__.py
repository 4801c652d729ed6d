"""Training: the training options, the stack of a model's layers, the trainer loop, label
propagation, checkpoints and the metrics writer.

Sub-modules are imported where they are used (nothing is re-exported here), so that
light modules such as :mod:`supergcn.train.config` load without torch.
"""
