"""The replay against published figures: FIFO vs shortest-job-first per Philly virtual cluster.

The Helios paper (SC '21, Fig. 13) simulated the Philly trace per virtual cluster (VC) under
FIFO and SJF. The engine replays the same jobs under both and must order the two policies as
the paper does: SJF never waits longer than FIFO, strictly shorter where the paper's gap is
large, and a tie where the paper shows one. The absolute levels differ, and by how much is
printed: the engine has no nodes (the Helios simulator places jobs on 8-GPU nodes, where
fragmentation makes multi-GPU jobs wait) and replays the trace's durations as one run each.

The data are the committed sample (``tests/queues/data``: three VCs, with provenance);
``bench/replay_philly.py`` runs all eleven from the shared traces.
"""

import csv
from pathlib import Path

import pytest

from queues.replay.policies import averages, philly_jobs

DATA = Path(__file__).parent / "data"


def reference() -> dict[tuple[str, str], tuple[float, float]]:
    with (DATA / "ref_helios_sc21_fig13_philly_sim_per_vc.csv").open() as rows:
        return {
            (row["vc"], row["metric"]): (float(row["fifo"]), float(row["sjf"]))
            for row in csv.DictReader(rows)
        }


@pytest.mark.parametrize("vc", ["2869ce", "103959", "ed69ec"])
def test_fifo_and_shortest_first_are_ordered_per_vc_as_the_helios_simulation_orders_them(vc):
    with (DATA / "philly_vc_nodes.csv").open() as rows:
        capacity = {row["vc"]: 8.0 * int(row["node num"]) for row in csv.DictReader(rows)}[vc]
    jobs = philly_jobs(DATA / "philly_sample_jobs.csv.gz", vc, capacity)
    fifo_jct, fifo_delay = averages(jobs, capacity, "fifo")
    sjf_jct, sjf_delay = averages(jobs, capacity, "sjf")
    ref_jct = reference()[(vc, "avg_jct_s")]
    ref_delay = reference()[(vc, "avg_queue_delay_s")]
    print(
        f"{vc} ({len(jobs)} jobs, {capacity:.0f} GPUs): "
        f"average JCT FIFO {fifo_jct:,.0f} s / SJF {sjf_jct:,.0f} s "
        f"(Helios {ref_jct[0]:,.0f} / {ref_jct[1]:,.0f}); "
        f"queueing delay FIFO {fifo_delay:,.0f} s / SJF {sjf_delay:,.0f} s "
        f"(Helios {ref_delay[0]:,.0f} / {ref_delay[1]:,.0f})"
    )
    for ours, theirs in (((fifo_jct, sjf_jct), ref_jct), ((fifo_delay, sjf_delay), ref_delay)):
        gap = (theirs[0] - theirs[1]) / theirs[0]
        if abs(gap) < 0.01:  # the paper: a tie
            assert abs(ours[0] - ours[1]) <= 0.01 * max(ours[0], 1.0)
        else:  # the paper: SJF shorter by more than 1 %
            assert gap > 0 and ours[1] < ours[0]
