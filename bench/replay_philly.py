"""The replay against the Helios paper's Philly simulation (SC '21, Fig. 13), every VC.

Run on demand, from the repository root, with the shared traces beside the repository:

    nice .venv/bin/python bench/replay_philly.py [--traces ../shared/traces]

For each of the eleven virtual clusters it replays the Philly jobs (``philly_pollux_jobs``)
under FIFO and shortest-job-first (``queues.replay.policies``) on the VC's GPUs (nodes × 8)
and prints the average job completion time and queueing delay next to the paper's, with
whether the two policies are ordered as the paper orders them (SJF shorter, or a tie within
1 %). The test suite checks three VCs from a committed sample
(``tests/queues/test_replay_truth.py``).
"""

from __future__ import annotations

import argparse
import csv
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from queues.replay.policies import averages, philly_jobs


def ordered(ours: tuple[float, float], theirs: tuple[float, float]) -> str:
    gap = (theirs[0] - theirs[1]) / theirs[0]
    if abs(gap) < 0.01:
        return "tie, as the paper" if abs(ours[0] - ours[1]) <= 0.01 * max(ours[0], 1) else "NO"
    if ours[1] < ours[0]:
        return "SJF shorter, as the paper"
    if abs(ours[0] - ours[1]) <= 0.01 * max(ours[0], 1):
        return "tie (the paper: SJF shorter)"
    return "NO: SJF longer"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--traces", default=str(Path("..") / "shared" / "traces"))
    args = parser.parse_args()
    traces = Path(args.traces)
    if not (traces / "philly_pollux_jobs.csv.gz").exists():
        sys.exit(f"No Philly trace in {traces}: pass --traces.")
    with (traces / "philly_vc_nodes.csv").open() as rows:
        capacity = {row["vc"]: 8.0 * int(row["node num"]) for row in csv.DictReader(rows)}
    with (traces / "ref_helios_sc21_fig13_philly_sim_per_vc.csv").open() as rows:
        ref = {
            (row["vc"], row["metric"]): (float(row["fifo"]), float(row["sjf"]))
            for row in csv.DictReader(rows)
        }
    for vc, gpus in capacity.items():
        jobs = philly_jobs(traces / "philly_pollux_jobs.csv.gz", vc, gpus)
        fifo_jct, fifo_delay = averages(jobs, gpus, "fifo")
        sjf_jct, sjf_delay = averages(jobs, gpus, "sjf")
        jct, delay = ref[(vc, "avg_jct_s")], ref[(vc, "avg_queue_delay_s")]
        print(
            f"{vc} {len(jobs):>6} jobs {gpus:>4.0f} GPUs | JCT FIFO {fifo_jct:>8,.0f} SJF "
            f"{sjf_jct:>8,.0f} (paper {jct[0]:>8,.0f} {jct[1]:>8,.0f}) "
            f"{ordered((fifo_jct, sjf_jct), jct)} | delay FIFO {fifo_delay:>7,.0f} SJF "
            f"{sjf_delay:>7,.0f} (paper {delay[0]:>7,.0f} {delay[1]:>7,.0f}) "
            f"{ordered((fifo_delay, sjf_delay), delay)}",
            flush=True,
        )


if __name__ == "__main__":
    main()
