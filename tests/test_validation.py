"""Every bad input is rejected early with an error naming the argument."""

import numpy as np
import pandas as pd
import pytest

from causalkit import _validation as v


def test_check_array_accepts_frames_and_vectors():
    frame = pd.DataFrame({"a": [1, 2], "b": [True, False]})
    assert v.check_array(frame).shape == (2, 2)
    assert v.check_array(np.arange(3)).shape == (3, 1)
    assert v.feature_names_of(frame) == ["a", "b"]
    assert v.feature_names_of(np.zeros((2, 3))) == ["x0", "x1", "x2"]


@pytest.mark.parametrize("bad, error, message", [
    (np.array([[1.0, np.nan]]), ValueError, "X contains NaN"),
    (np.array([[1.0, np.inf]]), ValueError, "infinite"),
    (np.zeros((0, 2)), ValueError, "at least 1 row"),
    (np.zeros((2, 0)), ValueError, "no columns"),
    (np.zeros((2, 2, 2)), ValueError, "2-dimensional"),
    (None, ValueError, "X is required"),
    (pd.DataFrame({"c": ["a", "b"]}), TypeError, "non-numeric columns"),
])
def test_check_array_rejects(bad, error, message):
    with pytest.raises(error, match=message):
        v.check_array(bad, "X")


def test_check_vector_length_and_nan():
    with pytest.raises(ValueError, match="y has length 3 but X has 4 rows"):
        v.check_vector(np.ones(3), "y", n=4)
    with pytest.raises(ValueError, match="y contains NaN"):
        v.check_vector([1.0, np.nan], "y")
    assert np.isnan(v.check_vector([1.0, np.nan], "y", allow_nan=True)[1])


def test_check_consistent_length_names_every_argument():
    with pytest.raises(ValueError, match="X=3, y=2"):
        v.check_consistent_length(X=np.zeros((3, 1)), y=np.zeros(2))


def test_check_binary():
    np.testing.assert_array_equal(v.check_binary([True, False, 1.0]), [1, 0, 1])
    with pytest.raises(ValueError, match=r"treatment must be binary \(0/1\); found values \[2.0\]"):
        v.check_binary([0, 1, 2])


def test_one_arm_is_rejected():
    with pytest.raises(ValueError, match="both arms"):
        v.check_both_arms(np.ones(4), "treatment")


def test_trial_indicator_and_external_controls():
    with pytest.raises(ValueError, match="no trial units"):
        v.check_trial_indicator(np.zeros(3), n=3)
    with pytest.raises(ValueError, match="trial has length 2"):
        v.check_trial_indicator(np.ones(2), n=3)
    a = np.array([1, 0, 1])
    s = np.array([1, 1, 0])
    with pytest.raises(ValueError, match="rows 2 have treatment 1"):
        v.check_external_controls(a, s)
    with pytest.raises(ValueError, match="within the trial"):
        v.check_external_controls(np.array([1, 1, 0]), np.array([1, 1, 0]))


@pytest.mark.parametrize("fn, args, message", [
    (v.check_alpha, (0.0,), "alpha"),
    (v.check_alpha, ("0.05",), "alpha"),
    (v.check_positive_int, (0, "n_boot"), "n_boot"),
    (v.check_positive_int, (2.5, "reps"), "reps"),
    (v.check_positive_int, (True, "reps"), "reps"),
    (v.check_fraction, (1.5, "share"), "share"),
])
def test_scalar_checks(fn, args, message):
    with pytest.raises(ValueError, match=message):
        fn(*args)


def test_check_random_state():
    a = v.check_random_state(3).normal()
    b = v.check_random_state(3).normal()
    assert a == b
    gen = np.random.default_rng(0)
    assert v.check_random_state(gen) is gen
    with pytest.raises(TypeError, match="random_state"):
        v.check_random_state("seed")
