"""Single-process checks of the model, the ZeRO-1 optimizer, the experiment front end and CLI."""

import numpy as np
import pytest
import torch

from causalkit.systems.elastic import ElasticExperiment, ModelSpec
from causalkit.systems.elastic import ParallelLayout as L
from causalkit.systems.elastic.comm import MockComm
from causalkit.systems.elastic.experiment import parse_schedule
from causalkit.systems.elastic.model import Stage, global_init, make_batch
from causalkit.systems.elastic.optim import ZeroAdam
from causalkit.systems.elastic.schedule import train_single_process, train_step


def test_zero_adam_matches_torch_adam():
    spec = ModelSpec(layers=2, dtype="float64", lr=1e-2)
    solo = MockComm(1, 0)
    ours = Stage(spec, L(1, 1, 1), 0, solo, init=True)
    ref = Stage(spec, L(1, 1, 1), 0, solo, init=True)
    opt = ZeroAdam(ours, solo, 1, 0, spec.lr)
    torch_opt = torch.optim.Adam(list(ref.params.values()), lr=spec.lr, foreach=False)
    for step in range(4):
        train_step(ours, opt, solo, solo, step)
        tokens, targets = make_batch(spec, step)
        for i in range(spec.micro_batches):
            sl = slice(i * 12, (i + 1) * 12)
            ref.loss(ref.forward(tokens[sl]), targets[sl]).backward()
        torch_opt.step()
        torch_opt.zero_grad()
    for name, p in ours.params.items():
        np.testing.assert_allclose(p.detach().numpy(), ref.params[name].detach().numpy(),
                                   rtol=1e-9, atol=1e-11)  # same formula, other rounding


def test_shards_are_slices_of_the_global_init():
    spec = ModelSpec(layers=2)
    stage = Stage(spec, L(3, 2, 1), 5, MockComm(3, 2), init=True)   # pp=1, tp=2
    assert stage.coords == (1, 0, 2) and stage.last and not stage.first
    w = stage.params["layers.1.mlp.fc1.weight"]
    np.testing.assert_array_equal(w.detach().numpy(),
                                  global_init(spec, "layers.1.mlp.fc1.weight")[64:96].numpy())
    assert "embed.weight" not in stage.params and "head.weight" in stage.params


def test_single_process_training_reduces_the_loss():
    losses = train_single_process(ModelSpec(layers=2, lr=1e-2), 30)
    assert np.mean(losses[-5:]) < np.mean(losses[:5]) - 0.1


def test_schedule_parsing_and_experiment_validation():
    spec = ModelSpec()
    assert [str(x) for x in parse_schedule("2,1x3x1, 4", spec)] == ["2x1x1", "1x3x1", "2x2x1"]
    with pytest.raises(ValueError, match=r"schedule\[1\] 5x1x1"):
        parse_schedule(["2x1x1", "5x1x1"], spec)
    with pytest.raises(TypeError, match=r"schedule\[0\]"):
        parse_schedule([2.5], spec)
    with pytest.raises(ValueError, match="mode"):
        ElasticExperiment([2, 3], mode="hot").run()
    with pytest.raises(ValueError, match="steps must be >= 3 per schedule entry"):
        ElasticExperiment([2, 3, 2], steps=5).run()
    with pytest.raises(ValueError, match="no TP x PP x DP layout on 7"):
        ElasticExperiment([2, 7]).run()


def test_cli_plan_only(capsys):
    from causalkit.cli import main

    assert main(["systems", "elastic", "--schedule", "2,3,4,2", "--plan-only"]) == 0
    out = capsys.readouterr().out
    assert "2x1x1 -> 3x1x1 -> 2x2x1 -> 2x1x1" in out and "peak_staging_bytes" in out
    assert main(["systems", "elastic", "--schedule", "2,1x9x1", "--plan-only"]) == 2
    assert "exceeds layers" in capsys.readouterr().err


def test_cli_bad_steps_is_a_one_line_error(capsys):
    from causalkit.cli import main

    assert main(["systems", "elastic", "--schedule", "2,3", "--steps", "4"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("causalkit systems elastic: steps must be >= 3")
