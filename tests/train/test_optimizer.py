"""The trainer's Adam is torch.optim.Adam to the bit, and does not import torch's compiler
while nothing compiles (supergcn.train.optimizer). Each case runs in a fresh process: the
test process may have imported torch._dynamo already."""

import json
import subprocess
import sys
import textwrap

#: Trains a small model with each optimizer in turn for a few steps (weight decay,
#: zero_grad, a state_dict round trip, a step pre-hook), and prints its parameters' bits,
#: whether torch._dynamo was imported, and the hook's calls.
SCRIPT = textwrap.dedent("""
    import json, sys
    import torch
    from supergcn.train.optimizer import adam

    def train(make):
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 3))
        optimizer = make(model.parameters(), lr=0.01, weight_decay=5e-4)
        calls = []
        optimizer.register_step_pre_hook(lambda *args: calls.append(1))
        data = torch.Generator().manual_seed(1)
        for _ in range(5):
            optimizer.zero_grad()
            model(torch.randn(32, 8, generator=data)).square().mean().backward()
            optimizer.step()
            optimizer.load_state_dict(optimizer.state_dict())
        bits = [p.detach().view(torch.int32).flatten().tolist() for p in model.parameters()]
        return {"bits": bits, "hook_calls": len(calls), "compiler": "torch._dynamo" in sys.modules}

    first = {"ours": adam, "torch": torch.optim.Adam}[sys.argv[1]]
    runs = [train(first), train(torch.optim.Adam), train(adam)]
    print(json.dumps(runs))
""")


def runs_starting_with(optimizer: str) -> list[dict]:
    done = subprocess.run([sys.executable, "-c", SCRIPT, optimizer], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_training_with_it_leaves_the_compiler_unimported_where_torchs_adam_imports_it():
    ours_first, torch_first = runs_starting_with("ours"), runs_starting_with("torch")
    assert not ours_first[0]["compiler"]
    assert torch_first[0]["compiler"]  # the import this module saves (else it has no reason to be)


def test_its_updates_are_torchs_to_the_bit_before_and_after_the_compiler_is_loaded():
    """Ours before torch's Adam loads the compiler, torch's, and ours behind torch's guards
    again: the same parameters, and the step hook called once a step each time."""
    ours, torch_adam, ours_guarded = runs_starting_with("ours")
    assert ours["bits"] == torch_adam["bits"] == ours_guarded["bits"]
    assert ours["hook_calls"] == torch_adam["hook_calls"] == ours_guarded["hook_calls"] == 5
