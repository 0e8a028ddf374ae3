"""Settings from the TOML file and the environment; URL masking."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from click.testing import CliRunner

from andreas import config
from andreas.cli import main
from andreas.config import Settings, default_sqlite_path, load_settings, mask_url
from andreas.errors import InputError


@pytest.fixture(autouse=True)
def no_system_config(monkeypatch, tmp_path):
    monkeypatch.setattr(config, "DEFAULT_CONFIG_PATH", tmp_path / "absent" / "andreas.toml")


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "andreas.toml"
    path.write_text(text)
    return str(path)


def test_defaults_are_an_sqlite_file_in_the_user_data_dir():
    s = load_settings({"HOME": "/home/ops"})
    assert s.db_url == "sqlite:////home/ops/.local/share/andreas/andreas.db"
    assert (s.db_url_source, s.raw_retention_days, s.connect_retries) == ("default", 7.0, 5)
    assert load_settings({"XDG_DATA_HOME": "/data"}).db_url == "sqlite:////data/andreas/andreas.db"
    assert default_sqlite_path({"HOME": "/h"}) == Path("/h/.local/share/andreas/andreas.db")


def test_file_then_environment(tmp_path):
    path = write(tmp_path, '[store]\nurl = "mysql+pymysql://mgr:pw@db/andreas"\n'
                           'password_file = "/etc/andreas/pw"\nraw_retention_days = 14\n'
                           'connect_retries = 2\n')
    s = load_settings({"ANDREAS_CONFIG": path})
    assert s == Settings(db_url="mysql+pymysql://mgr:pw@db/andreas",
                         db_url_source=f"{path} [store] url", db_password_file="/etc/andreas/pw",
                         raw_retention_days=14.0, connect_retries=2, config_path=path)
    s = load_settings({"ANDREAS_CONFIG": path, "ANDREAS_DB_URL": "sqlite:///x.db",
                       "ANDREAS_DB_PASSWORD_FILE": "/run/pw"})
    assert (s.db_url, s.db_url_source, s.db_password_file) == ("sqlite:///x.db",
                                                               "ANDREAS_DB_URL", "/run/pw")
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.db_url = "other"


def test_the_default_config_file_is_read_when_present(tmp_path, monkeypatch):
    path = write(tmp_path, '[store]\nurl = "sqlite:////srv/andreas.db"\n')
    monkeypatch.setattr(config, "DEFAULT_CONFIG_PATH", Path(path))
    assert load_settings({}).db_url == "sqlite:////srv/andreas.db"


@pytest.mark.parametrize("text, message", [
    ("[store\nurl = 1", "not valid TOML"),
    ("[stor]\nurl = 'x'", r"unknown section \[stor\]"),
    ("[store]\nulr = 'x'", "unknown key 'ulr'"),
    ("[store]\nraw_retention_days = 'seven'", "raw_retention_days has the wrong type"),
    ("[store]\nraw_retention_days = 0", "raw_retention_days must be > 0"),
    ("[store]\nconnect_retries = -1", "connect_retries must be >= 0"),
    ("[store]\nconnect_retries = true", "connect_retries has the wrong type"),
    ("store = 3", "'store' must be a table"),
])
def test_bad_config_files_name_the_file_and_the_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(InputError, match=message) as err:
        load_settings({"ANDREAS_CONFIG": path})
    assert str(err.value).startswith(path)


def test_a_wrong_url_type_does_not_print_it(tmp_path):
    path = write(tmp_path, "[store]\nurl = ['mysql+pymysql://u:hunter2@db/a']\n")
    with pytest.raises(InputError, match="url has the wrong type") as err:
        load_settings({"ANDREAS_CONFIG": path})
    assert "hunter2" not in str(err.value) and str(err.value).endswith("wrong type: a list")


def test_missing_explicit_config_file(tmp_path):
    with pytest.raises(InputError, match=r"ANDREAS_CONFIG=.*: config file not found"):
        load_settings({"ANDREAS_CONFIG": str(tmp_path / "nope.toml")})


@pytest.mark.parametrize("url, masked", [
    ("mysql+pymysql://u:pw@db:3306/andreas", "mysql+pymysql://u:***@db:3306/andreas"),
    ("mysql+pymysql://u@db/andreas", "mysql+pymysql://u@db/andreas"),
    ("mysql+pymysql://u:p@ss@db/andreas", "mysql+pymysql://u:***@db/andreas"),
    ("sqlite:////var/lib/andreas.db", "sqlite:////var/lib/andreas.db"),
    ("junk:secret@", "junk:***@"),
    ("u:secret@host", "u:***@host"),
])
def test_mask_url(url, masked):
    assert mask_url(url) == masked


def test_cli_reports_where_the_url_came_from(tmp_path):
    db = tmp_path / "a.db"
    path = write(tmp_path, f'[store]\nurl = "sqlite:///{db}"\n')
    env = {"ANDREAS_CONFIG": path, "ANDREAS_DB_URL": None, "ANDREAS_DB_PASSWORD_FILE": None}
    assert CliRunner().invoke(main, ["db", "upgrade"], env=env).exit_code == 0
    result = CliRunner().invoke(main, ["db", "current"], env=env)
    assert result.exit_code == 0
    assert f"url: sqlite:///{db} (from {path} [store] url)" in result.output
    bad = CliRunner().invoke(main, ["db", "current"], env={**env, "ANDREAS_CONFIG": "/nope"})
    assert bad.exit_code == 2
    assert bad.output == "andreas: error: ANDREAS_CONFIG=/nope: config file not found\n"


@pytest.mark.parametrize("text, message", [
    ("[manager]\npolicy = 'fastest'", "[manager] policy must be one of greedy, rg, pr"),
    ("[manager]\nperiod_s = nan", "[manager] period_s must be a finite number"),
    ("[manager]\nlock = 'never'", "[manager] lock must be one of wait, exit, got 'never'"),
    ("[executor]\ncheckpoint_root = 'relative/dir'", "checkpoint_root must be an absolute path"),
    ("[executor]\nimage_allowlist = ['ok', '']", "image_allowlist must be a list of non-empty"),
    ("[report]\ngrid_co2_g_per_kwh = true", "grid_co2_g_per_kwh has the wrong type: True"),
])
def test_every_key_is_checked_against_its_dataclass(tmp_path, text, message):
    path = tmp_path / "andreas.toml"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        load_settings({"ANDREAS_CONFIG": str(path)})
    assert message in str(err.value) and str(path) in str(err.value)


def test_environment_values_are_named_by_their_variable(tmp_path):
    with pytest.raises(InputError, match="^ANDREAS_POLICY must be one of greedy, rg"):
        load_settings({"ANDREAS_POLICY": "fastest", "ANDREAS_CONFIG": ""})


@pytest.mark.parametrize("table, message", [
    ("extra_volumes = ['/var/run/docker.sock:/s']", "must not be given to jobs"),
    ("extra_volumes = ['/data:/andreas/checkpoint']", "is the checkpoint mount"),
    ("extra_volumes = ['data:/data']", "must be an absolute path"),
    ("extra_volumes = ['/a:/b:rx']", "not host:container[:ro|rw]"),
    ("image_allowlist = ['reg*/ml/*']", "the registry host 'reg*' must be written out"),
    ("image_allowlist = ['registry.*/x']", "must be written out"),
    ("user = 'bad user'", "must be a numeric uid[:gid]"),
    ("memory_limit_mib = -1", "memory_limit_mib must be >= 0"),
    ("pids_limit = 1e9", "pids_limit has the wrong type"),
])
def test_container_settings_are_checked_when_the_config_is_loaded(tmp_path, table, message):
    """Issue 16: a bad volume or a pattern that could match another registry is refused
    at load, naming the file, the key and the value, not at a job's start."""
    config = tmp_path / "andreas.toml"
    config.write_text(f"[executor]\n{table}\n")
    with pytest.raises(InputError) as err:
        load_settings({"ANDREAS_CONFIG": str(config)})
    assert message in str(err.value) and str(config) in str(err.value)


@pytest.mark.parametrize("url", [
    "mysql+pymysql://andreas@db/andreas?password=s3cret",
    "mysql+pymysql://andreas@db/andreas?charset=utf8mb4&passwd=s3cret",
    "mysql+pymysql://andreas:s3cret@db/andreas?PWD=s3cret",
])
def test_a_password_in_the_query_is_masked_too(url):
    """Issue 16: the ?password= form was printed as it was."""
    from sqlalchemy.engine import make_url

    assert "s3cret" not in mask_url(url) and "***" in mask_url(url)
    assert "s3cret" not in mask_url(make_url(url))


def test_a_password_file_others_may_read_gets_a_warning(tmp_path, caplog):
    from andreas.store.engine import read_password_file

    path = tmp_path / "pw"
    path.write_text("s3cret\n")
    path.chmod(0o600)
    with caplog.at_level("WARNING", logger="andreas.store.engine"):
        assert read_password_file(str(path)) == "s3cret"
    assert caplog.records == []
    path.chmod(0o644)
    with caplog.at_level("WARNING", logger="andreas.store.engine"):
        assert read_password_file(str(path)) == "s3cret"
    (record,) = caplog.records
    assert "mode 0644" in record.getMessage() and "chmod 600" in record.getMessage()
    path.write_bytes(b"\xff\xfe")
    with pytest.raises(InputError, match="not UTF-8"):
        read_password_file(str(path))


# ------------------------------------------------------------------ issue 32, point 9
SENSITIVE_SPELLINGS = [
    "//var/run/docker.sock", "/var//run/docker.sock", "/var/run/./docker.sock",
    "/var/run/docker.sock/", "/run/docker.sock", "/./", "/", "//", "/.", "/etc/shadow",
    "/etc", "/proc/1/root", "/proc", "/dev/sda", "/sys/fs/cgroup", "/var/lib/docker",
    "/var/lib/docker/overlay2", "/root/.ssh", "/root", "/run/containerd/containerd.sock",
    "/var/run/containerd/containerd.sock", "/var/lib/containerd", "/home", "/home/alice",
    "/var", "/var/lib", "/boot", "/var/lib/andreas-agent/spool", "/var/log",
    "/srv/ckpt", "/srv/ckpt/other-job", "/srv",
]


@pytest.mark.parametrize("host", SENSITIVE_SPELLINGS)
def test_sensitive_host_paths_are_refused_in_every_spelling(tmp_path, host):
    """Issue 32: `//var/run/docker.sock`, `/var//run/docker.sock` and `/./` passed the
    allow-list (the Docker socket and the root in disguise), and so did /etc/shadow,
    /proc/1/root, /dev/sda, /sys/fs/cgroup, /var/lib/docker, /root/.ssh, containerd's
    socket and /home. The checkpoint root (every job's checkpoints) is refused too."""
    config = tmp_path / "andreas.toml"
    config.write_text(f"[executor]\ncheckpoint_root = '/srv/ckpt'\nextra_volumes = "
                      f"['{host}:/mnt:ro']\n")
    with pytest.raises(InputError) as err:
        load_settings({"ANDREAS_CONFIG": str(config)})
    assert "must not be given to jobs" in str(err.value) or "'..'" in str(err.value)
    assert str(config) in str(err.value) and "extra_volumes" in str(err.value)


@pytest.mark.parametrize("table, message", [
    ("extra_volumes = ['/data/../etc:/x']", "must not contain '..'"),
    ("extra_volumes = ['/data:/']", "the container path must not be /"),
    ("extra_volumes = ['/data://andreas//checkpoint/']", "is the checkpoint mount"),
    ('extra_volumes = ["/da\\u0007ta:/x"]', "control characters"),
    ("mps_pipe_dir = '/run'", "must not be given to jobs"),
    ("mps_pipe_dir = '/run/docker.sock'", "must not be given to jobs"),
    ("network = 'container:4f2a'", "never container:<id>"),
    ("network = 'container:andreas-job-1'", "never container:<id>"),
    ("network = 'host'", "needs allow_host_network"),
    ("network = ''", "must be bridge, none"),
    ("user = 'root'", "must be a numeric uid"),
    ("user = '0:0'", "uid or gid 0 is root"),
    ("user = '0'", "uid or gid 0 is root"),
    ("user = '000'", "uid or gid 0 is root"),
    ("user = '00:1000'", "uid or gid 0 is root"),
    ("user = '1000:0'", "uid or gid 0 is root"),
    ("user = 'root:root'", "must be a numeric uid"),
    ("user = 'nobody'", "must be a numeric uid"),
    ("user = '+0'", "must be a numeric uid"),
    ("user = '1000\\n'", "must be a numeric uid"),
    ("fake_gpu_dir = '/var/run'", "must not be given to jobs"),
    ("mps_pipe_dir = '/'", "must not be given to jobs"),
])
def test_foreign_namespaces_root_users_and_odd_paths_are_refused(tmp_path, table, message):
    config = tmp_path / "andreas.toml"
    config.write_text(f"[executor]\n{table}\n")
    with pytest.raises(InputError) as err:
        load_settings({"ANDREAS_CONFIG": str(config)})
    assert message in str(err.value) and str(config) in str(err.value)


def test_harmless_paths_are_normalised_and_kept(tmp_path):
    config = tmp_path / "andreas.toml"
    config.write_text("[executor]\nextra_volumes = ['/usr:/usr:ro', '//opt//rt/./:/rt/:ro']\n"
                      "network = 'none'\nuser = '1000:1000'\n")
    settings = load_settings({"ANDREAS_CONFIG": str(config)})
    from andreas.config import parse_extra_volume
    assert [parse_extra_volume(v, "/andreas/checkpoint") for v in
            settings.executor.extra_volumes] == [("/usr", "/usr", "ro"), ("/opt/rt", "/rt", "ro")]


def test_the_slurm_executor_and_its_table(tmp_path):
    path = write(tmp_path, '[executor]\nkind = "slurm"\npending_timeout_s = 120\n'
                           '[executor.slurm]\npartition = "gpu"\noutput_dir = "/shared/out"\n'
                           'account = "ml"\nsbatch_args = ["--cpus-per-task=8"]\n'
                           'command_timeout_s = 15\n[power]\nenabled = true\n')
    s = load_settings({"ANDREAS_CONFIG": path}).executor
    assert (s.kind, s.pending_timeout_s) == ("slurm", 120.0)
    assert (s.slurm.partition, s.slurm.output_dir, s.slurm.account) == ("gpu", "/shared/out",
                                                                         "ml")
    assert s.slurm.sbatch_args == ("--cpus-per-task=8",) and s.slurm.command_timeout_s == 15.0
    assert load_settings({"ANDREAS_CONFIG": write(tmp_path, "")}).executor.kind == "docker"


@pytest.mark.parametrize("text,message", [
    ('[executor]\nkind = "kubernetes"\n', "[executor] kind must be one of docker, slurm, "
                                          "got 'kubernetes'"),
    ('[executor]\nkind = "slurm"\n', "[executor.slurm] partition: needed with [executor] "
                                     'kind = "slurm"'),
    ('[executor]\nkind = "slurm"\n[executor.slurm]\npartition = "gpu"\n',
     "[executor.slurm] output_dir: needed"),
    ('[executor.slurm]\noutput_dir = "shared/out"\n',
     "[executor.slurm] output_dir must be an absolute path, got 'shared/out'"),
    ('[executor.slurm]\npartition = "gpu; rm -rf /"\n',
     "[executor.slurm] partition 'gpu; rm -rf /': 1-64 letters"),
    ('[executor.slurm]\nsbatch_args = ["--deadline=now+1hour"]\n',
     "andreas sets --deadline itself (and never --deadline: Slurm would cancel the job)"),
    ('[executor.slurm]\nsbatch_args = ["-w", "sn1"]\n', "andreas sets -w itself"),
    ('[executor.slurm]\nsbatch_args = ["--time", "10"]\n',
     "sbatch_args '10': each item is one sbatch option"),
    ('[executor.slurm]\ncommand_timeout_s = 0\n',
     "[executor.slurm] command_timeout_s must be > 0, got 0"),
    ('[executor.slurm]\npartiton = "gpu"\n', "[executor.slurm] unknown key 'partiton'"),
    ('[executor]\nslurm = 3\n', "[executor] slurm must be a table"),
])
def test_bad_slurm_settings_are_one_line_naming_the_key(tmp_path, text, message):
    path = write(tmp_path, text)
    with pytest.raises(InputError) as e:
        load_settings({"ANDREAS_CONFIG": path})
    assert message in str(e.value) and "\n" not in str(e.value)
    r = CliRunner().invoke(main, ["queue"], env={"ANDREAS_CONFIG": path})
    assert r.exit_code == 2 and message in r.output, r.output
