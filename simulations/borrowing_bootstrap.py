"""Pipeline-bootstrap coverage of the papers' AIB and ACIB on the Paper A design without bias
(200 replications x 100 resamples; resumable)."""
from causalkit.studies import study_main

study_main("borrowing-bootstrap-paper-a")
