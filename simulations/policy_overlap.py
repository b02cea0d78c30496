"""Overlap grid: alarms, misses and trimmed coverage from no shift to no overlap."""
from causalkit.studies import study_main

study_main("policy-overlap")
