def test_world_builds(world):
    assert world.production.preemptible_tiers.count() == 2
