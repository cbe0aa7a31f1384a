"""lade_bench's submitit launchers, as Hydra plugins (Hydra only instantiates launchers from ``hydra_plugins``).

Hydra imports every module under ``hydra_plugins`` when it starts, so this one stays thin: it
registers two launcher configs and two launcher classes, and leaves the work to
``lade_bench.launchers``. Without hydra-submitit-launcher installed (the ``slurm`` extra) it
registers nothing.

* ``hydra/launcher: lade_slurm`` (the base of the ``slurm_gpu`` and ``slurm_cpu`` presets): the
  plugin's Slurm launcher, plus a check of the request against the cluster before submitting, a wait
  that ends when a job leaves the queue without a result or cannot ever start, the queue's state in
  the sweep folder for ``python -m lade_bench.status``, and the user's command in each manifest.
* ``hydra/launcher: lade_local`` (the base of ``local_parallel``): the plugin's local launcher with
  the user's command in each manifest and each log line once.
"""

from dataclasses import dataclass

from hydra.core.config_store import ConfigStore

try:
    from hydra_plugins.hydra_submitit_launcher.config import LocalQueueConf, SlurmQueueConf
except ImportError:  # the slurm extra is not installed: the presets that need it say so when used
    SlurmQueueConf = LocalQueueConf = None  # type: ignore[assignment,misc]

if SlurmQueueConf is not None:

    @dataclass
    class LadeSlurmQueueConf(SlurmQueueConf):
        """The plugin's Slurm options plus how lade_bench waits for the jobs (see ``lade_bench.launchers``)."""

        _target_: str = "hydra_plugins.lade_bench_launchers.launchers.LadeSlurmLauncher"
        # Seconds between two looks at the queue (squeue) while the launch waits for its jobs.
        poll_s: float = 30.0
        # Seconds a job may be out of the queue before its result file must be there (shared file systems lag).
        result_grace_s: float = 60.0
        # Compare the request with what the partition's nodes offer (scontrol) before submitting.
        check_resources: bool = True

    @dataclass
    class LadeLocalQueueConf(LocalQueueConf):
        """The plugin's local options (the launcher adds the user's command and single log lines)."""

        _target_: str = "hydra_plugins.lade_bench_launchers.launchers.LadeLocalLauncher"

    ConfigStore.instance().store(
        group="hydra/launcher", name="lade_slurm", node=LadeSlurmQueueConf(), provider="lade_bench"
    )
    ConfigStore.instance().store(
        group="hydra/launcher", name="lade_local", node=LadeLocalQueueConf(), provider="lade_bench"
    )
