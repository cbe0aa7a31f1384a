"""The launcher classes Hydra instantiates for ``lade_slurm`` and ``lade_local`` (see the package docstring)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

from hydra.core.utils import JobReturn

try:
    from hydra_plugins.hydra_submitit_launcher.submitit_launcher import LocalLauncher, SlurmLauncher
except ImportError:  # no slurm extra: Hydra's plugin scan imports this module anyway, so define nothing
    LocalLauncher = SlurmLauncher = object  # type: ignore[assignment,misc]
    _AVAILABLE = False
else:
    _AVAILABLE = True


class LadeSlurmLauncher(SlurmLauncher):  # type: ignore[misc,valid-type]
    """hydra-submitit-launcher's Slurm launcher plus lade_bench's checks and wait (``launchers.slurm_launch``)."""

    def __init__(self, poll_s: float = 30.0, result_grace_s: float = 60.0, check_resources: bool = True, **params: Any):
        super().__init__(**params)
        self.wait_settings = {"poll_s": poll_s, "result_grace_s": result_grace_s, "check_resources": check_resources}
        self.user_command: list[str] = []

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Check the request, submit the array, wait for every job (``lade_bench.launchers.slurm_launch``)."""
        from lade_bench.launchers.slurm_launch import launch_on_slurm

        self.user_command = list(sys.argv)  # pickled with this launcher: each job records it in its manifest
        return launch_on_slurm(self, job_overrides, initial_job_idx)

    def __call__(self, *args: Any) -> JobReturn:
        """In the job: record the user's command and make each log line appear once, then run the job."""
        from lade_bench.launchers.job_side import prepare_job

        prepare_job(self.user_command)
        return super().__call__(*args)


class LadeLocalLauncher(LocalLauncher):  # type: ignore[misc,valid-type]
    """hydra-submitit-launcher's local launcher; each job records the user's command and logs each line once."""

    def __init__(self, **params: Any):
        super().__init__(**params)
        self.user_command: list[str] = []

    def launch(self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int) -> Sequence[JobReturn]:
        """Submit the jobs as the plugin does, with the user's command travelling with them."""
        from lade_bench.launchers.job_side import quiet_submitit_duplicates

        self.user_command = list(sys.argv)
        quiet_submitit_duplicates()
        return super().launch(job_overrides, initial_job_idx)

    def __call__(self, *args: Any) -> JobReturn:
        """In the job: record the user's command and make each log line appear once, then run the job."""
        from lade_bench.launchers.job_side import prepare_job

        prepare_job(self.user_command)
        return super().__call__(*args)


if not _AVAILABLE:  # not plugins without their base: Hydra must not list them
    del LadeSlurmLauncher, LadeLocalLauncher
