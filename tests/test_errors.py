"""Library errors name fields; a command renames the field to the option its user typed."""

from __future__ import annotations

import pytest

from andreas.errors import InputError, options


def test_a_command_names_its_option_and_other_errors_pass_unchanged():
    with pytest.raises(InputError) as err, options(node="--node", gpus="--gpus"):
        raise InputError("node 'gpu9': no such node", field="node")
    assert str(err.value) == "--node 'gpu9': no such node" and err.value.field == "--node"
    with pytest.raises(InputError) as err, options(node="--node"):
        raise InputError("reason '': must not be empty", field="reason")
    assert str(err.value) == "reason '': must not be empty"


def test_only_the_leading_field_is_renamed():
    e = InputError("node x: node is down", field="node").named("NODE")
    assert str(e) == "NODE x: node is down"
    assert str(InputError("no field here").named("--x")) == "no field here"


def test_the_agent_names_where_a_fake_gpu_spec_came_from(tmp_path):
    from agents.config import load_config

    toml = tmp_path / "agent.toml"
    toml.write_text('[agent]\nfake_gpus = "2xQuantum"\n')
    env = {"ANDREAS_DB_URL": "sqlite:///" + str(tmp_path / "a.db")}
    with pytest.raises(InputError, match=r"agent.toml: \[agent\] fake_gpus: unknown GPU type"):
        load_config(toml, environ=env)
    with pytest.raises(InputError, match="^ANDREAS_FAKE_GPUS: unknown GPU type 'Foo'"):
        load_config(toml, environ={**env, "ANDREAS_FAKE_GPUS": "1xFoo"})


def test_a_million_fake_gpus_is_refused_not_sampled_for_ever(tmp_path):
    """Issue 16: `andreas-agent --fake-gpus 1000000xV100` hung building a million GPUs."""
    from agents.config import load_config

    env = {"ANDREAS_DB_URL": "sqlite:///" + str(tmp_path / "a.db")}
    for spec in ("1000000xV100", "60xV100,10xT4", "9" * 40 + "xV100"):
        with pytest.raises(InputError, match="^ANDREAS_FAKE_GPUS: "):
            load_config(None, environ={**env, "ANDREAS_FAKE_GPUS": spec})
