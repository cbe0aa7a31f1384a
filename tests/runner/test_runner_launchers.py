"""Launcher presets (conf/hydra/launcher): every key commented, each composes, the Slurm one submits right."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import OmegaConf

from lade_bench.results.sweep_plan import read_launch

from .conftest import CONF_DIR

PRESETS = sorted(p.stem for p in (CONF_DIR / "hydra" / "launcher").glob("*.yaml"))
_KEY_WITH_VALUE = re.compile(r"^\s*[A-Za-z_]+:\s*[^\s#]")


def test_the_documented_presets_exist():
    assert PRESETS == ["local_parallel", "ray_gpu", "ray_local", "slurm_cpu", "slurm_gpu"]


@pytest.mark.parametrize("path", [*(CONF_DIR / "hydra" / "launcher").glob("*.yaml"), CONF_DIR / "settings.yaml"])
def test_every_preset_key_is_commented(path):
    lines = path.read_text().splitlines()
    start = 0 if path.name != "settings.yaml" else lines.index("cell_lock:")
    section = lines[start:] if path.name != "settings.yaml" else lines[start : start + 4]
    bare = [line for line in section if _KEY_WITH_VALUE.match(line) and "#" not in line and "_target_" not in line]
    assert bare == [], f"{path.name}: keys without a comment"


def _launcher(preset: str, *overrides: str):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = compose(
            "config", overrides=["+sweep=ablation_wg", f"hydra/launcher={preset}", *overrides], return_hydra_config=True
        )
    return OmegaConf.to_container(cfg.hydra.launcher, resolve=False)


def test_presets_give_one_gpu_per_timed_cell_and_none_to_local_ones():
    slurm = _launcher("slurm_gpu", "hydra.launcher.partition=gpu", "hydra.launcher.account=lab")
    assert slurm["_target_"].endswith("SlurmLauncher") and slurm["gpus_per_node"] == 1 and slurm["tasks_per_node"] == 1
    assert (slurm["partition"], slurm["account"], slurm["name"]) == ("gpu", "lab", "lade-${sweep_name}")
    assert slurm["max_num_timeout"] > 0  # a timed-out cell is requeued and resumes
    cpu = _launcher("slurm_cpu")
    assert cpu["_target_"].endswith("LadeSlurmLauncher") and cpu["gpus_per_node"] is None
    assert cpu["cpus_per_task"] <= 2 and cpu["mem_gb"] <= 4  # fits a small node (the CI's has 2 cores)
    assert cpu["additional_parameters"] == {"exclusive": True}  # timed cells never share a node
    ray = _launcher("ray_gpu")
    assert ray["_target_"].endswith("RayLauncher") and ray["ray"]["remote"]["num_gpus"] == 1
    assert _launcher("local_parallel")["gpus_per_node"] == 0
    assert _launcher("ray_local")["ray"]["init"]["num_gpus"] == 0


@pytest.mark.slow
def test_slurm_preset_submits_one_gpu_array_task_per_cell(tmp_path, cli_server):
    """The documented Slurm command, against stand-ins for sbatch/srun/sacct that record the job script.

    Its launch plan (``_plan/launch.json``, written before anything is submitted) is checked here too: one
    CLI launch serves both, as composing the sweep's 16 cells is most of either's cost.
    """
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    script = tmp_path / "submitted.sh"
    fakes = {
        # Keeps the job script; task 0 "ran" and returned a failure, the others never run.
        "sbatch": f'exec {sys.executable} {Path(__file__).with_name("fake_sbatch.py")} {script} "$@"',
        "srun": "exit 0",
        # Accounting knows how each job ended (sacct -n -X -P -o State prints the state alone).
        "sacct": "echo FAILED",
        # The jobs are gone from the queue at once (nothing listed).
        "squeue": "exit 0",
        # A GPU partition that can hold the request, so the check before submitting lets it through.
        "scontrol": 'if [ "$2" = partition ]; then echo "PartitionName=gpu Default=YES State=UP MaxTime=UNLIMITED"; '
        'else echo "NodeName=g1 CPUTot=16 RealMemory=262144 Gres=gpu:a100:4(S:0-1) Partitions=gpu"; fi',
    }
    for name, body in fakes.items():
        (bin_dir / name).write_text(f"#!/bin/sh\n{body}\n")
        (bin_dir / name).chmod(0o755)
    args = ["+sweep=ablation_wg", "hydra/launcher=slurm_gpu"]
    args += ["hydra.launcher.partition=gpu", "hydra.launcher.account=lab", f"output_root={tmp_path / 'runs'}"]
    args += ["hydra.launcher.poll_s=0.1", "hydra.launcher.result_grace_s=0"]
    # The stand-ins are found on PATH when the launcher calls them, so a child of the CLI server sees them.
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}
    done = cli_server.run(args, cwd=tmp_path, env=env, timeout=300)
    # The launch ends (it does not wait forever), names every cell and the rerun command, no traceback.
    said = done.stdout + done.stderr
    assert done.returncode == 3 and "16 cell(s) not done" in said and "Traceback" not in said, said[-3000:]
    # A job that returned its task's failure, and jobs that ended without a result: one line each.
    assert "N5W1G1-greedy: job 4242_0 failed: UncompletedJobError: Job not requeued because: timed-out too many" in said
    assert ": job 4242_1 ended FAILED without a result (log: " in said
    assert "python -m lade_bench.run +sweep=ablation_wg hydra/launcher=slurm_gpu" in said
    sbatch = script.read_text()
    for option in ("--array=0-15%16", "--gpus-per-node=1", "--ntasks-per-node=1", "--partition=gpu", "--account=lab",
                   "--job-name=lade-ablation_wg", "--time=240", "--mem=64GB", "--signal=USR2@120"):  # fmt: skip
        assert f"#SBATCH {option}\n" in sbatch, option
    logs = re.search(r"#SBATCH --output=(\S+)", sbatch)[1]
    assert Path(logs).is_relative_to(tmp_path / "runs" / "ablation_wg")  # job logs inside the sweep folder
    # The launch plan lists every cell of the sweep, in the sweeper's order, each named and keyed once.
    assert [p.name for p in (tmp_path / "runs").iterdir() if p.is_dir()] == ["ablation_wg"]
    jobs = read_launch(tmp_path / "runs" / "ablation_wg")["jobs"]
    names = [job["name"] for job in jobs]
    assert len(jobs) == 16 and names[0] == "llama2-7b-chat-mt_bench-N5W1G1-greedy" and len(set(names)) == 16
    assert len({job["key"] for job in jobs}) == 16
