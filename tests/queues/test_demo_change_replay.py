"""The demo's proposed change bites: replayed over the demo's history, raising Medical
imaging's A100 guarantee from 8 to 16 shortens its waits, ends most of its borrowing and costs
the other training work a little — deltas the change's replay page marks. Each cluster's jobs
go through the model of its scheduler (issue 38): the training pool's through the Kueue model,
the inference pool's through the Slurm model; the generic engine replays none of them."""

from datetime import UTC, datetime

import pytest
from django.urls import reverse

from governance import services as rules
from governance.models import ChangeStatus, RuleChange, User
from queues.models import ReplayStatus
from queues.services import change_replay_start
from queues.services.replay import change_replay_run
from queues.services.workload.demo import demo_workload_seed
from reports.selectors.change_replay import (
    change_replay_page,
    replay_metrics,
    replay_waits,
    side_figures,
)
from reports.selectors.review._common import Names

NOW = datetime(2026, 11, 20, 9, tzinfo=UTC)


@pytest.mark.django_db
def test_the_demos_proposed_change_has_deltas_where_it_aims(client):
    rules.demo_seed(password="pw", now=NOW)
    demo_workload_seed(days=21, now=NOW)
    change = RuleChange.objects.get(status=ChangeStatus.PROPOSED)
    assert "Medical imaging" in change.title
    ops = User.objects.get(username="ops")
    run, _queued = change_replay_start(change=change, user=ops, now=NOW)
    run = change_replay_run(replay_id=run.pk)
    assert run is not None and run.status == ReplayStatus.DONE, run and run.error
    # The demo's clusters pick the models; no job goes to the engine.
    models = {group["cluster"]: group for group in run.result["models"]}
    assert set(models) == {"training-kueue", "inference-slurm"}
    assert (models["training-kueue"]["model"], models["training-kueue"]["fallback"]) == (
        "kueue",
        "",
    )
    assert (models["inference-slurm"]["model"], models["inference-slurm"]["fallback"]) == (
        "slurm",
        "",
    )
    assert all(group["jobs"] > 0 for group in models.values())
    names = Names.load()
    figures = {
        side: side_figures(replay_metrics(run=run, side=side, names=names), names)
        for side in ("in_force", "with_change")
    }
    before = figures["in_force"]["projects"]["medical-imaging"]
    after = figures["with_change"]["projects"]["medical-imaging"]
    waits = {
        side: {row["project"]: row for row in replay_waits(run=run, side=side)["by_project"]}
        for side in ("in_force", "with_change")
    }
    # The project it targets: guaranteed twice the GPUs, it waits less and borrows less.
    assert after["guarantee_gpus"] == before["guarantee_gpus"] + 8
    assert waits["with_change"]["medical-imaging"]["p90"] < (
        waits["in_force"]["medical-imaging"]["p90"] / 2
    )
    assert after["borrowed_gpu_hours"] < before["borrowed_gpu_hours"] / 2
    # It loses no work to preemption any more, so the useful GPU-hours it receives do not
    # fall. (Its raw GPU-hours may: before, Kueue's fair sharing preempted it and it ran the
    # lost work again, which counted as received.)
    assert after["preemptions"] < before["preemptions"]
    assert after["gpu_hours_lost"] < before["gpu_hours_lost"]
    useful = {
        side: row["gpu_hours"] - row["gpu_hours_lost"]
        for side, row in (("in_force", before), ("with_change", after))
    }
    assert useful["with_change"] >= useful["in_force"]
    # The others pay: the rest of the training A100 work borrows less in all.
    others = [slug for slug in figures["in_force"]["projects"] if slug != "medical-imaging"]
    borrowed = {
        side: sum(figures[side]["projects"][slug]["borrowed_gpu_hours"] for slug in others)
        for side in ("in_force", "with_change")
    }
    assert borrowed["with_change"] < borrowed["in_force"]
    # The page marks the deltas.
    page = change_replay_page(change=change)
    row = next(group for group in page.projects if group.slug == "medical-imaging")
    verdicts = {cell.label: cell.verdict for cell in row.cells}
    assert verdicts["p90 wait (min)"] == "better" and verdicts["Share guaranteed"] == "neutral"
    # What a newcomer sees on the replay page: both models, never the generic engine.
    client.force_login(ops)
    html = client.get(reverse("change_replay", args=[change.pk])).content.decode()
    assert 'data-model="kueue"' in html and 'data-model="slurm"' in html
    assert 'data-model="engine"' not in html and "generic engine ran" not in html
