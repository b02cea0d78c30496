"""Reference study: target value estimators (bias, RMSE, coverage) and learned-policy regret."""
from causalkit.studies import study_main

study_main("policy-reference")
