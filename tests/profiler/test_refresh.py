"""Production refinement: epoch events refit app_models and write measured app_profiles
rows, recent epochs weighing more; profiler rows stay where production has no data. On
SQLite and MariaDB."""

from __future__ import annotations

import pytest
from sqlalchemy import select

from andreas.manager.estimates import Estimator
from andreas.profiler.store import MIN_MEASURED, refresh_models, write_model
from andreas.profiler.fit import fit_amdahl
from andreas.store import AppModel, AppProfile, insert_epoch_events
from tests.manager.helpers import add_job, add_node

NOW = 1_800_000_000.0
DAY = 86400.0


def epochs(node_id: int, job: str, g: int, seconds: float, count: int, age_s: float,
           attempt: int = 1) -> list[dict]:
    """``count`` epochs of ``seconds`` on g V100, the last ending ``age_s`` before NOW."""
    end = NOW - age_s
    out = []
    for k in range(count):
        e_end = end - (count - 1 - k) * seconds
        out.append(dict(job_id=job, attempt=attempt, epoch=k + 1, start_s=e_end - seconds,
                        end_s=e_end, node_id=node_id, gpu_type="V100", gpus=g))
    return out


def profiles(store) -> dict[int, tuple[float, str, int]]:
    with store.session() as s:
        return {g: (t, src, n) for g, t, src, n in s.execute(
            select(AppProfile.gpus, AppProfile.epoch_time_s, AppProfile.source,
                   AppProfile.samples).where(AppProfile.application == "newapp"))}


def model(store, app: str = "newapp") -> AppModel | None:
    with store.session() as s:
        return s.get(AppModel, (app, "V100"))


@pytest.fixture
def world(pstore):
    """newapp: 10 old slow epochs (30 days ago, 200 s) and 5 recent fast ones (1 h, 100 s)
    on 1 GPU, 5 recent on 2 GPUs (60 s); the profiler measured 1, 2 and 4 GPUs long ago."""
    n = add_node(pstore, "n", gpus=4)
    add_job(pstore, "old", application="newapp")
    add_job(pstore, "new", application="newapp")
    add_job(pstore, "two", application="newapp")
    with pstore.session() as s:
        insert_epoch_events(s, epochs(n, "old", 1, 200.0, 10, 30 * DAY))
        insert_epoch_events(s, epochs(n, "new", 1, 100.0, 5, 3600.0))
        insert_epoch_events(s, epochs(n, "two", 2, 60.0, 5, 3600.0))
        s.add_all([AppProfile(application="newapp", gpu_type="V100", gpus=g, epoch_time_s=t,
                              source="profiler", samples=2, updated_s=NOW - 40 * DAY)
                   for g, t in ((1, 150.0), (2, 90.0), (4, 40.0))])
        write_model(s, "newapp", "V100", fit_amdahl([1, 2, 4], [150.0, 90.0, 40.0]),
                    source="profiler", now_s=NOW - 40 * DAY)
        write_model(s, "quiet", "V100", fit_amdahl([1, 2], [50.0, 30.0]), source="profiler",
                    now_s=NOW - 40 * DAY)
    return pstore


def test_recent_epochs_weigh_more(world):
    with world.session() as s:
        done = refresh_models(s, NOW, half_life_s=DAY)
    assert [(r.app, r.gpu_type, r.measured_gpus, r.epochs) for r in done] == \
        [("newapp", "V100", (1, 2), 20)]
    rows = profiles(world)
    # unweighted, the median of 15 epochs on 1 GPU would be the old 200 s
    assert rows[1] == (100.0, "measured", 15)
    assert rows[2] == (60.0, "measured", 5)
    assert rows[4] == (40.0, "profiler", 2)              # no production data: kept
    m = model(world)
    assert m.source == "measured" and m.model == "amdahl" and list(m.gpu_counts) == [1, 2, 4]
    assert m.t1_s * (m.serial_fraction + (1 - m.serial_fraction)) == pytest.approx(100, rel=0.02)
    assert m.t1_s * (m.serial_fraction + (1 - m.serial_fraction) / 2) == \
        pytest.approx(60, rel=0.02)
    assert m.updated_s == NOW and m.samples == 20 + 2     # events + the kept profiler row
    quiet = model(world, "quiet")
    assert quiet.source == "profiler" and quiet.updated_s == NOW - 40 * DAY


def test_without_recency_old_epochs_count_as_much(world):
    with world.session() as s:
        refresh_models(s, NOW, half_life_s=1e12)
    assert profiles(world)[1][0] == 200.0                # median of 10 x 200 and 5 x 100


def test_refresh_is_repeatable_and_picks_up_new_epochs(world):
    for _ in range(2):
        with world.session() as s:
            refresh_models(s, NOW, half_life_s=DAY)
    assert profiles(world)[1] == (100.0, "measured", 15)
    n_id = add_node(world, "m", gpus=4)
    add_job(world, "four", application="newapp")
    with world.session() as s:
        insert_epoch_events(s, epochs(n_id, "four", 4, 35.0, MIN_MEASURED, 60.0))
        refresh_models(s, NOW, half_life_s=DAY)
    assert profiles(world)[4] == (35.0, "measured", MIN_MEASURED)
    assert model(world).samples == 20 + MIN_MEASURED


def test_too_few_epochs_leave_the_profiler_row(pstore):
    n = add_node(pstore, "n", gpus=2)
    add_job(pstore, "j", application="newapp")
    with pstore.session() as s:
        s.add(AppProfile(application="newapp", gpu_type="V100", gpus=2, epoch_time_s=90.0,
                         source="profiler", samples=2, updated_s=NOW))
        insert_epoch_events(s, epochs(n, "j", 2, 80.0, MIN_MEASURED - 1, 60.0))
        done = refresh_models(s, NOW)
    assert profiles(pstore)[2] == (90.0, "profiler", 2)
    assert done[0].measured_gpus == () and done[0].fit.gpu_counts == (2,)
    assert done[0].fit.prior                             # one g: the serial fraction is a prior


def test_no_epochs_no_writes(pstore):
    with pstore.session() as s:
        assert refresh_models(s, NOW) == []


def test_estimates_show_the_model_confidence(world):
    with world.session() as s:
        refresh_models(s, NOW, half_life_s=DAY)
        # g=3 has no row: the model answers, tagged with its error and confidence
        est = Estimator().epoch_tables(s, ["newapp"], {"V100": 8})[("newapp", "V100")]
    assert est[0].source == "measured"                   # 15 recent epochs in the events
    assert est[2].source.startswith("model(mape ") and est[2].confidence == 1.0
    assert est[7].confidence < est[2].confidence         # 8 GPUs: extrapolated beyond 4
    assert f"conf {est[7].confidence:.2f}" in est[7].source
