"""Systems experiment drivers, one subpackage per paper.

=========  ========  ===========================  =========================================
package    paper     command line                 studies / results folder
=========  ========  ===========================  =========================================
ann        SmartANN  systems ann | smartann       simulations/results/smartann
tracing    ARGUS     systems trace | argus        argus-cases; simulations/results/argus
elastic    LiveR     systems elastic | liver      simulations/results/liver
rdma       SHIFT     systems rdma | shift         shift-downtime, shift-transports; .../shift
netsched   vClos     systems netsched | vclos     vclos-collision, -testbed, -large; .../vclos
=========  ========  ===========================  =========================================

Every driver's experiment class exposes ``run_once(rng, rep, **config)`` (one repetition's
rows) and a ``run()`` that goes through the experiment engine
(:func:`causalkit.simulation.run_experiment`): repetition ``r`` is seeded from
``SeedSequence([seed, r])`` and a results file ``out=`` makes a run resumable.
"""
