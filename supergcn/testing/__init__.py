"""Reference code for the tests and benchmarks (:mod:`supergcn.testing.plans`)."""
