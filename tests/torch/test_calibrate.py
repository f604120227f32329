"""`hpdsl calibrate`: measured as `hpdsl train` runs (ranks at once, one thread each), written as a device that prices."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import attrs
import pytest

pytest.importorskip("torch")

from hpdsl.api import bind_model, compile_paths  # noqa: E402
from hpdsl.cost.estimate import estimate  # noqa: E402
from hpdsl.cost.facts.devices import host_facts  # noqa: E402
from hpdsl.model.strategy import Strategy  # noqa: E402
from hpdsl.torch.calibrate import Measured, calibrate, device_text, sustained_seconds  # noqa: E402
from hpdsl.torch.calibrate_attention import score_work  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


def test_a_sustained_time_is_the_mean_over_the_window_not_the_best_call() -> None:
    calls = [0]

    def run() -> None:  # every third call is slow: a time slice lost to another process
        calls[0] += 1
        time.sleep(0.02 if calls[0] % 3 == 0 else 0.001)

    seconds = sustained_seconds(run, window=0.1, least=3)
    assert seconds > 0.005  # the best call (1 ms) would be the old calibration's answer
    assert calls[0] >= 4  # the warm-up and at least three timed calls


MEASURED = Measured(((64, 2.0e9), (256, 8.0e9)), 1.0e10, 5.0e8, 2, 1, op_overhead=2.0e-4, link_latency=3.0e-5,
                    optimizer_bandwidth=2.0e9, tensor_overhead=4.0e-5, dtensor_overhead=6.0e-4,
                    dtensor_op_overhead=9.0e-4, shard_overhead=4.0e-3, comm_overlap=0.0,
                    collectives=(("all_gather", 2.5e8), ("reduce_scatter", 1.0e8), ("all_to_all", 5.0e8),
                                 ("p2p", 1.0e9)), call_overhead=1.2e-5, eager_bandwidth=1.1e10,
                    attention=((50.8, 1.0e9), (128.0, 2.0e9)))
"""What a calibration might measure: every fact stated."""


def test_the_written_device_compiles_and_prices_its_host_facts(tmp_path: Path) -> None:
    measured = MEASURED
    path = tmp_path / "here.hpf"
    path.write_text(device_text("here", measured, 2**34), encoding="utf-8")
    device = compile_paths([path], stdlib=False).devices["here"]
    assert (device.op_overhead, device.link_latency, device.optimizer_bandwidth) == (2.0e-4, 3.0e-5, 2.0e9)
    assert [(p.size, p.efficiency) for p in device.matmul] == [(64.0, 0.25), (256.0, 1.0)]
    assert host_facts(str(path)) == (2.0e-4, 2.0e9, 4.0e-5, 6.0e-4, 9.0e-4, 4.0e-3, 0.0, 1.2e-5, 1.1e10)
    assert [(p.size, p.efficiency) for p in device.attention] == [(50.8, 0.125), (128.0, 0.25)]
    assert (device.tensor_overhead, device.dtensor_overhead) == (4.0e-5, 6.0e-4)
    # Its links as a cluster of the same file: each collective's share of the fastest (p2p here).
    cluster = compile_paths([path], stdlib=False).clusters["here_links"]
    (tier,) = cluster.tiers
    assert (cluster.device, tier.bandwidth, tier.latency) == ("here", 1.0e9, 3.0e-5)
    assert dict(tier.efficiency) == {"all_reduce": 0.5, "all_gather": 0.25, "reduce_scatter": 0.1,
                                     "all_to_all": 0.5, "p2p": 1.0}
    llama = bind_model([ROOT / "examples" / "llama3_8b.hpf"], "llama3_8b")
    machine = estimate(llama, Strategy(tp=2, global_batch=1, device=str(path))).to_json()["machine"]
    assert machine["op_overhead"] == 2.0e-4 and machine["link_latency"] == 3.0e-5
    assert machine["dtensor_overhead"] == 6.0e-4
    assert (machine["call_overhead"], machine["eager_bandwidth"]) == (1.2e-5, 1.1e10)


def test_a_device_without_eager_facts_is_written_without_them(tmp_path: Path) -> None:
    measured = attrs.evolve(MEASURED, call_overhead=0.0, eager_bandwidth=0.0, attention=())
    path = tmp_path / "old.hpf"
    path.write_text(device_text("old", measured, 2**34), encoding="utf-8")
    device = compile_paths([path], stdlib=False).devices["old"]
    assert (device.call_overhead, device.attention) == (0.0, ())


def test_the_attention_curve_counts_the_score_work_the_attention_family_declares() -> None:
    # Per query, head and attended key: QKᵀ and A·V (2·64 each), the softmax (13/3) and its cast (1) forward,
    # twice that backward, QKᵀ, the softmax and the cast again in flash's backward; 128 keys a query (causal).
    forward, again = 4 * 64 + 16 / 3, 2 * 64 + 16 / 3
    assert score_work(256, heads=4, head_dim=64) == pytest.approx(256 * 4 * 128 * (3 * forward + again), rel=1e-12)


def test_calibration_measures_on_every_rank_at_once() -> None:
    measured = calibrate(2, 1, sizes=(64, 128), window=0.02)
    assert (measured.ranks, measured.threads) == (2, 1)
    assert [n for n, _ in measured.matmul] == [64, 128] and all(f > 0 for _, f in measured.matmul)
    assert measured.memory_bandwidth > 0 and measured.collective_bandwidth > 0
    assert 0 < measured.op_overhead < 1 and 0 < measured.link_latency < 1 and measured.optimizer_bandwidth > 0
    assert 0 < measured.call_overhead < 1 and measured.eager_bandwidth > 0
    assert [round(s) for s, _ in measured.attention] == [51, 81, 128, 203, 323]
    assert all(flops > 0 for _, flops in measured.attention)
    assert 0 < measured.tensor_overhead < 1 and 0 < measured.dtensor_overhead < 1
    assert 0 < measured.dtensor_op_overhead < 1 and 0 <= measured.shard_overhead < 1
    assert 0 <= measured.comm_overlap <= 1
    assert [c for c, _ in measured.collectives] == ["all_gather", "reduce_scatter", "all_to_all", "p2p"]
    assert all(bandwidth > 0 for _, bandwidth in measured.collectives)


@pytest.mark.parametrize(("flags", "message"), [(("--ranks", "1"), "--ranks must be at least 2"),
                                                (("--threads", "-1"), "--threads must be 0")])
def test_a_bad_setting_is_a_usage_error(tmp_path: Path, flags: tuple[str, ...], message: str) -> None:
    run = subprocess.run([sys.executable, "-m", "hpdsl.cli", "calibrate", "-o", str(tmp_path / "x.hpf"), *flags],
                         cwd=ROOT, capture_output=True, text=True, check=False)
    assert run.returncode != 0 and message in run.stderr
    assert "Traceback" not in run.stderr and not (tmp_path / "x.hpf").exists()
