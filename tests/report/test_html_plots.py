"""The HTML report's plots as an operator first sees them (issue 34): the default 7-day
window holding a few minutes of samples (the power plot was empty, its axis running from
2025 to 2029), and 30 jobs (their energy labels overlapped). Checked on the figures
themselves and on the page rendered by headless Chromium (tests/report/test_cli.py)."""

from __future__ import annotations

import re
import subprocess

import pytest

from andreas.report.compute import PowerSeries
from andreas.report.html import _job_energy, _power
from andreas.store.models import JobAttempt, JobState
from andreas.store.samples import JobEnergyRow, PowerRow, insert_job_energy, insert_power_samples
from tests.report.test_cli import chromium
from tests.store.helpers import add_job, add_node, unique

from .conftest import run_cli

NOW = 1_800_000_000.0
START = NOW - 3600.0                  # three minutes of samples, an hour ago
JOBS = 30

# After load: per image, how many pixels are clearly coloured (plotted data; axes, text and
# grid are grey), via a canvas (data: URIs do not taint it).
PROBE = ("<script>addEventListener('load',()=>{const out=[...document.images].map(i=>{"
         "const c=document.createElement('canvas');c.width=i.naturalWidth;"
         "c.height=i.naturalHeight;const x=c.getContext('2d');x.drawImage(i,0,0);"
         "const d=x.getImageData(0,0,c.width,c.height).data;let n=0;"
         "for(let k=0;k<d.length;k+=4){const hi=Math.max(d[k],d[k+1],d[k+2]),"
         "lo=Math.min(d[k],d[k+1],d[k+2]);if(hi-lo>60)n++}return i.alt.slice(0,12)+':'+n});"
         "document.body.setAttribute('data-colour',out.join('|'))})</script>")


@pytest.fixture(scope="module")
def short_world(store):
    names = []
    node_ids = []
    for _ in range(2):
        name, node_id, gpus = add_node(store, gpus=2, gpu_type="V100")
        names.append(name)
        node_ids.append((node_id, gpus))
    power, energy = [], []
    for k in range(18):                              # 10-s samples for three minutes
        t = START + 10 * k
        for n, (node_id, gpus) in enumerate(node_ids):
            power.append(PowerRow(gpus[0], t, node_id, 1, 150.0 + 80 * n + 5 * (k % 4),
                                  1_500_000,
                                  energy_source="counter", power_source="average"))
    jobs = [add_job(store, id=unique("a-rather-long-job-name-for-the-report"),
                    state=JobState.COMPLETED, submit_s=START, due_s=NOW,
                    state_changed_s=START + 170) for _ in range(JOBS)]
    for i, job in enumerate(jobs):
        energy.append(JobEnergyRow(job, 1, START + 60, node_ids[i % 2][0], 60.0, 1,
                                   (i + 1) * 100_000_000, None))
    with store.session() as s:
        insert_power_samples(s, power)
        insert_job_energy(s, energy)
        for i, job in enumerate(jobs):
            s.add(JobAttempt(job_id=job, attempt=1, node_id=node_ids[i % 2][0], gpu_ids=[0],
                             start_s=START, end_s=START + 170, exit_code=0))
    return names, jobs


def test_the_power_axis_spans_the_samples_not_four_years():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    _power(ax, [PowerSeries(node="n1", t_s=(START,), power_w=(300.0,))])   # one bucket
    lo, hi = ax.get_xlim()                           # matplotlib dates: days
    assert 0 < hi - lo < 1 / 24                      # minutes, not 2025..2029
    assert ax.lines[0].get_marker() == "o"           # a single point is drawn
    plt.close(fig)


def test_thirty_job_labels_do_not_overlap():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from types import SimpleNamespace

    report = SimpleNamespace(jobs=[SimpleNamespace(job=f"{'j' * 40}-{i:02d}", energy_kwh=i + 1.0)
                                   for i in range(JOBS)])
    fig, ax = plt.subplots()
    _job_energy(ax, report)
    fig.set_size_inches(6.4, ax.andreas_height_in)
    fig.tight_layout()
    fig.canvas.draw()
    boxes = sorted((t.get_window_extent() for t in ax.get_yticklabels()), key=lambda b: b.y0)
    assert len(boxes) == JOBS
    assert all(a.y1 <= b.y0 + 0.5 for a, b in zip(boxes, boxes[1:]))   # no overlap
    assert all(len(t.get_text()) <= 28 for t in ax.get_yticklabels())
    plt.close(fig)


def test_the_default_window_page_shows_data_in_chromium(db_url, short_world, tmp_path):
    names, jobs = short_world
    page = tmp_path / "report.html"
    r = run_cli(db_url, "report", "--format", "html", "-o", str(page), now=NOW)   # -7d
    assert r.exit_code == 0, r.output
    text = page.read_text()
    probe = tmp_path / "probe.html"
    probe.write_text(text.replace("</body>", PROBE + "</body>"))
    done = subprocess.run(
        [chromium(), "--headless", "--disable-gpu", "--no-sandbox",
         f"--user-data-dir={tmp_path / 'profile'}", "--virtual-time-budget=5000",
         "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    found = re.search(r'data-colour="([^"]*)"', done.stdout)
    assert found, done.stdout[-2000:]
    colour = dict(item.split(":") for item in found.group(1).split("|"))
    # two lines with markers across the plot; the empty plot had only the legend's two
    # short samples (about 60 pixels)
    assert int(colour["Power per no"]) > 600, colour
    assert int(colour["Energy per j"]) > 5000, colour         # 30 bars
    assert names[0] in text and all(j in text for j in jobs)  # the tables keep whole ids
