"""Max-min fair rates: closed forms and the bottleneck characterisation."""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from causalkit.systems.netsched.maxmin import incidence, max_min_rates


def test_two_flows_on_one_link_get_half_each():
    W = incidence([[0], [0]], [0, 1], n_links=1, n_entities=2)
    rates, rounds = max_min_rates(W, [100.0])
    np.testing.assert_allclose(rates, [50.0, 50.0])
    assert rounds == 1


def test_textbook_example():
    # links A (cap 1) and B (cap 2); flow 0 uses A, flow 1 uses A and B, flow 2 uses B.
    # Max-min: A is the bottleneck of flows 0, 1 (1/2 each); flow 2 gets the rest of B (3/2).
    W = incidence([[0, -1], [0, 1], [1, -1]], [0, 1, 2], n_links=2, n_entities=3)
    rates, _ = max_min_rates(W, [1.0, 2.0])
    np.testing.assert_allclose(rates, [0.5, 0.5, 1.5])


def test_weighted_entity_shares_like_its_flows():
    # a job with two flows on a link shared with a one-flow job: every flow gets C/3
    W = incidence([[0], [0], [0]], [0, 0, 1], n_links=1, n_entities=2)
    rates, _ = max_min_rates(W, [90.0])
    np.testing.assert_allclose(rates, [30.0, 30.0])


def test_caps_and_idle_entities():
    W = sp.csr_matrix(np.array([[1.0, 1.0, 0.0]]))
    rates, _ = max_min_rates(W, [10.0], caps=[2.0, np.inf, 7.0])
    np.testing.assert_allclose(rates, [2.0, 8.0, 7.0])


def test_bad_capacity_shape():
    W = incidence([[0]], [0], n_links=2, n_entities=1)
    with pytest.raises(ValueError, match="capacity"):
        max_min_rates(W, [1.0])


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 8), st.integers(1, 25), st.integers(0, 10_000))
def test_feasible_and_every_flow_has_a_bottleneck(n_links, n_flows, seed):
    rng = np.random.default_rng(seed)
    cap = rng.uniform(1, 10, n_links)
    hops = rng.integers(1, min(n_links, 3) + 1, n_flows)
    links = np.full((n_flows, 3), -1)
    for f, h in enumerate(hops):
        links[f, :h] = rng.choice(n_links, h, replace=False)
    W = incidence(links, np.arange(n_flows), n_links, n_flows)
    r, _ = max_min_rates(W, cap)
    load = W @ r
    assert np.all(load <= cap * (1 + 1e-9))
    # max-min fairness <=> each flow crosses a saturated link on which its rate is maximal
    Wd = W.toarray() > 0
    for f in range(n_flows):
        on = np.flatnonzero(Wd[:, f])
        ok = [np.isclose(load[l], cap[l]) and r[f] >= r[Wd[l]].max() * (1 - 1e-9) for l in on]
        assert any(ok), f"flow {f} has no bottleneck"
