"""Systems experiment drivers, one subpackage per paper.

=========  ========  ========================  ==================================================
package    paper     command line              studies (results: simulations/results/PAPER)
=========  ========  ========================  ==================================================
ann        SmartANN  systems ann | smartann    smartann-designs
tracing    ARGUS     systems trace | argus     argus-cases, -calibration, -overhead, -scaling
elastic    LiveR     systems elastic | liver   liver-downtime, -scaling
rdma       SHIFT     systems rdma | shift      shift-downtime, -transports, -training, -overhead
netsched   vClos     systems netsched | vclos  vclos-collision, -testbed, -large
=========  ========  ========================  ==================================================

The package names say what a driver does (``systems tracing`` is accepted for ``systems trace``);
the paper names are the command-line aliases, the study prefixes, the results folders and the
``simulations/PAPER.py`` scripts.

Every driver's experiment class exposes ``run_once(rng, rep, **config)`` (one repetition's
rows) and a ``run()`` that goes through the experiment engine
(:func:`causalkit.simulation.run_experiment`): repetition ``r`` is seeded from
``SeedSequence([seed, r])`` and a results file ``out=`` makes a run resumable.
"""
