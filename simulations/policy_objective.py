"""Target regret of the policy learner by objective (target, source, auto)."""
from causalkit.studies import study_main

study_main("policy-objective")
