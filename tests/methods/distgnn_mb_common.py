"""What tests/methods/test_distgnn_mb.py and its MPI job (distgnn_mb_job.py) agree on."""

HIDDEN, LAYERS, EPOCHS, LR, SEED = 16, 3, 2, 0.01, 5
#: Seeds per step and fan-outs (input layer first): synthetic-tiny's training nodes make
#: several steps an epoch, and degrees above and below each fan-out.
BATCH, FANOUTS = 300, "4,3,5"
#: Embeddings pushed per peer, layer and step: fewer than the candidates of most steps.
PUSH = 20
#: The runs at each P, each from its model's initial weights (``init-<model>.pt``): one rank
#: (no halo, so no cache and no push) for each of DistGNN-MB's models, and three ranks with
#: the push (both models) and without it. The SAGE push's caches are asked for 10^12 lines: a
#: rank keeps only as many as it has halos (the lines of 10^12 rows would need petabytes).
RUNS = {1: {"mb": {"model": "sage"}, "mb-gat": {"model": "gat"}},
        3: {"mb-push": {"model": "sage", "hec_push": PUSH, "hec_size": 10**12},
            "mb-gat-push": {"model": "gat", "hec_push": PUSH},
            "mb-local": {"model": "sage", "hec_push": 0}}}
