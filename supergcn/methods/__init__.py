"""The compared methods, one room each, named for the method: what each changes of
SuperGCN's exchange, stated once in its module's docstring.

SuperGCN itself is the pipeline's default path, not a room here: its hybrid pre/post plan
by a minimum vertex cover (:mod:`supergcn.plan.builder`), its exchange with Int2/4/8
messages (:mod:`supergcn.distributed.rank_operators`, :mod:`supergcn.kernels.quantization`)
and its masked label propagation (:mod:`supergcn.train.labels`).

* :mod:`supergcn.methods.distgnn` — DistGNN's delayed remote partial aggregates
  (``--schedule cd-<r>`` / ``0c``);
* :mod:`supergcn.methods.adaqp` and :mod:`supergcn.methods.adaqp_solver` — AdaQP's
  adaptive bit widths (``--bits adaptive``) and the solver that assigns them;
* :mod:`supergcn.methods.pipegcn` — PipeGCN's rows and gradients one epoch stale, exchanged
  behind the next epoch's compute (``--schedule pipe|pipe-f|pipe-g|pipe-fg``);
* :mod:`supergcn.methods.bnsgcn` — BNS-GCN's boundary rows sampled each epoch
  (``--boundary-rate p``);
* :mod:`supergcn.methods.mixgcn` — MixGCN's mixture of parallelism: the aggregation split by
  feature columns over a replicated adjacency, the update by rows (``--parallelism mop``);
* :mod:`supergcn.methods.distgnn_mb` — DistGNN-MB's mini-batch training on each rank's own
  partition, halo rows from the cache its peers push into (``--batch-size B``), with
  :mod:`supergcn.methods.distgnn_mb_graph` — DistGNN-MB's sampling graph of a rank: its
  solid nodes, their halos as leaves, and db_halo (the solid nodes that are halos on each
  peer), on which :mod:`supergcn.kernels.sampling` draws the mini-batches.
* :mod:`supergcn.methods.distgnn_mb_cache` — DistGNN-MB's Historical Embedding Cache (fixed
  lines, expiry, oldest line first) and the degree-biased choice of the rows a rank pushes.

DistGNN-MB's mini-batch training, still to come, gets a room of its own beside these
(``methods/distgnn_mb.py``). ``tests/test_layout.py`` holds this list to the modules present.
"""
