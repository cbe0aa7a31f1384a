"""The check of a Slurm request against what the partition's nodes offer, before anything is submitted."""

from __future__ import annotations

from lade_bench.launchers.slurm_cluster import Partition, request_problems

CPU_NODE = {"NodeName": "n1", "CPUTot": "2", "RealMemory": "18078", "Gres": "(null)", "AvailableFeatures": "(null)"}
GPU_NODE = {"NodeName": "g1", "CPUTot": "64", "RealMemory": "515000", "Gres": "gpu:a100:4(S:0-1)",
            "AvailableFeatures": "a100,ib"}  # fmt: skip
SLURM_GPU = {"gpus_per_node": 1, "tasks_per_node": 1, "cpus_per_task": 8, "mem_gb": 64, "timeout_min": 240}
SLURM_CPU = {"gpus_per_node": None, "tasks_per_node": 1, "cpus_per_task": 2, "mem_gb": 4, "timeout_min": 60}


def _cluster(max_time_min=None) -> dict[str, Partition]:
    return {
        "debug": Partition("debug", True, "UP", max_time_min, None, None, [CPU_NODE]),
        "gpu": Partition("gpu", False, "UP", 24 * 60, None, None, [GPU_NODE]),
    }


def test_the_shipped_gpu_preset_on_a_cpu_partition_names_each_setting_and_the_offer():
    problems = request_problems(SLURM_GPU, _cluster())
    assert [p.split(":")[0] for p in problems] == [
        "hydra.launcher.cpus_per_task=8 (x tasks_per_node=1)",
        "hydra.launcher.mem_gb=64",
        "hydra.launcher.gpus_per_node=1",
    ]
    assert "partition debug: 1 node(s), at most 2 CPUs, 18 GB and 0 GPU(s) per node" in problems[2]
    assert problems[2].endswith("for cells on CPUs use hydra/launcher=slurm_cpu")


def test_the_cpu_preset_fits_a_small_node_and_the_gpu_preset_a_gpu_partition():
    assert request_problems(SLURM_CPU, _cluster()) == []
    assert request_problems({**SLURM_GPU, "partition": "gpu", "constraint": "a100"}, _cluster()) == []
    assert request_problems({**SLURM_GPU, "partition": "debug,gpu"}, _cluster()) == []  # one of them can


def test_partition_time_limit_constraint_and_gres_are_checked():
    (missing,) = request_problems({**SLURM_CPU, "partition": "a100"}, _cluster())
    assert missing == "hydra.launcher.partition=a100: the cluster has no partition a100; it has debug (default), gpu"
    (late,) = request_problems({**SLURM_CPU, "timeout_min": 120}, _cluster(max_time_min=60))
    assert late.startswith("hydra.launcher.timeout_min=120: above the partition's time limit")
    (feature,) = request_problems({**SLURM_GPU, "partition": "gpu", "constraint": "h100"}, _cluster())
    assert feature == "hydra.launcher.constraint=h100: no node of partition gpu has that feature (features: a100, ib)"
    (gres,) = request_problems({**SLURM_GPU, "gpus_per_node": None, "gres": "gpu:8", "partition": "gpu"}, _cluster())
    assert gres.startswith("hydra.launcher.gres=gpu:8: asks for 8 GPU(s) per node")


def test_no_partition_and_no_default():
    cluster = {"a": Partition("a", False, "UP", None, None, None, [CPU_NODE])}
    assert request_problems(SLURM_CPU, cluster) == [
        "hydra.launcher.partition is not set and the cluster has no default partition; it has a"
    ]
