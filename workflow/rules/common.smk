# Paths and target lists shared by the rules.
DATA = config["data_root"]
RESULTS = config["results_root"]


wildcard_constraints:
    dataset=r"[A-Za-z0-9_\-]+",
    P=r"\d+",
    strategy=r"pre|post|hybrid",


def volume_tables():
    return expand(f"{RESULTS}/volume/{{dataset}}.csv", dataset=config["datasets"]) + [f"{RESULTS}/volume.md"]


def plan_dirs(dataset):
    return expand(
        f"{DATA}/plans/{dataset}/P{{P}}/{{strategy}}",
        P=config["process_counts"],
        strategy=config["strategies"],
    )
