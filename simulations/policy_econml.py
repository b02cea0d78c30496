"""Target regret and run time: causalkit target-trained learners vs econml source-trained trees."""
from causalkit.studies import study_main

study_main("policy-econml")
