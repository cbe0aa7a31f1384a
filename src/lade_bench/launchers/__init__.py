"""Launching a sweep's cells as scheduler jobs: what lade_bench adds to Hydra's submitit launcher.

* ``slurm_cluster``: what a Slurm cluster offers (``scontrol``) and whether a request fits it, said
  before anything is submitted;
* ``slurm_queue``: the queue's state of a job array (``squeue``), and the pending reasons that mean
  a job can never start;
* ``slurm_launch``: submit, then wait until every job has a result, has left the queue without one,
  or can never start; record the queue's state in the sweep folder for ``python -m lade_bench.status``;
* ``job_side``: inside each job, the user's command for the manifest and each log line once.

The classes Hydra instantiates live in ``hydra_plugins.lade_bench_launchers`` (Hydra only accepts
launchers from that package); they only delegate here.
"""
