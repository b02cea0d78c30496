"""Coverage of the learned policy's true value by the learner's two-sample pipeline bootstrap."""
from causalkit.studies import study_main

study_main("policy-bootstrap")
