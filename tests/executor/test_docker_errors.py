"""Endpoints the executor refuses or cannot reach, the allow-list, and how vendor errors
come out (no daemon needed: the clients here are stubs or point nowhere)."""

from __future__ import annotations

import requests
import pytest

from andreas.config import ExecutorSettings
from andreas.executor.base import NodeRef, StartRequest
from andreas.executor.docker import DockerExecutor
from andreas.executor.errors import ExecutorError, ImageNotAllowed, NodeUnreachable

REQ = StartRequest(job_id="j1", attempt=1, image="evil.example/miner:1", epochs=1,
                   gpu_uuids=("GPU-fake-n-0",), fake_gpus=True)


def no_client(endpoint: str):
    raise AssertionError(f"no Docker call expected (endpoint {endpoint})")


def test_image_not_in_allowlist_is_refused_before_any_docker_call(tmp_path):
    ex = DockerExecutor(ExecutorSettings(image_allowlist=("reg.example/ml/*",)),
                        client_factory=no_client)
    with pytest.raises(ImageNotAllowed, match=r"image evil.example/miner:1: not in the "
                                              r"image allowlist \(reg.example/ml/\*\)"):
        ex.start(NodeRef(name="n", docker_endpoint="unix:///nowhere.sock"), REQ)


def test_missing_socket_is_unreachable(tmp_path):
    ex = DockerExecutor(ExecutorSettings(docker_timeout_s=2.0))
    node = NodeRef(name="n7", docker_endpoint=f"unix://{tmp_path}/missing/docker.sock")
    for call in (lambda: ex.ping(node), lambda: ex.containers(node),
                 lambda: ex.start(node, REQ), lambda: ex.signal(node, "abc"),
                 lambda: list(ex.logs(node, "abc"))):
        with pytest.raises(NodeUnreachable) as e:
            call()
        msg = str(e.value)
        assert msg.startswith(f"node n7 (unix://{tmp_path}/missing/docker.sock)")
        assert "\n" not in msg
    ex.close()


@pytest.mark.parametrize("endpoint", ["tcp://10.0.0.5:2375", "http://10.0.0.5:2375",
                                      "10.0.0.5:2375", "npipe:////./pipe/docker_engine"])
def test_plain_tcp_and_unknown_schemes_are_refused(endpoint):
    ex = DockerExecutor(ExecutorSettings(), client_factory=no_client)
    node = NodeRef(name="gpu3", docker_endpoint=endpoint)
    with pytest.raises(ExecutorError) as e:
        ex.containers(node)
    assert not isinstance(e.value, NodeUnreachable)
    msg = str(e.value)
    assert msg.startswith(f"node gpu3: endpoint {endpoint}: ") and "\n" not in msg
    if endpoint.startswith("tcp://"):
        assert "tls_ca_cert" in msg


def test_tcp_with_tls_settings_builds_a_verifying_client(tmp_path):
    made = []
    ex = DockerExecutor(ExecutorSettings(tls_ca_cert=str(tmp_path / "ca.pem")),
                        client_factory=lambda ep: made.append(ep) or Stub())
    ex.containers(NodeRef(name="gpu3", docker_endpoint="tcp://10.0.0.5:2376"))
    assert made == ["tcp://10.0.0.5:2376"]
    # the default factory: missing certificate files are a clear error, not a crash
    ex = DockerExecutor(ExecutorSettings(tls_ca_cert=str(tmp_path / "ca.pem")))
    with pytest.raises(ExecutorError, match="node gpu3: connect: .*certificate"):
        ex.ping(NodeRef(name="gpu3", docker_endpoint="tcp://10.0.0.5:2376"))
    ex = DockerExecutor(ExecutorSettings(tls_ca_cert="/ca.pem", tls_client_cert="/c.pem"),
                        client_factory=no_client)
    with pytest.raises(ExecutorError, match="tls_client_cert and tls_client_key"):
        ex.ping(NodeRef(name="gpu3", docker_endpoint="tcp://10.0.0.5:2376"))


class StubApi:
    def __init__(self, fail: int = 0) -> None:
        self.fail = fail

    def containers(self, **kw):
        if self.fail:
            self.fail -= 1
            raise requests.exceptions.ConnectionError("connection reset by peer")
        return []


class Stub:
    def __init__(self, fail: int = 0) -> None:
        self.api = StubApi(fail)
        self.closed = False

    def close(self) -> None:
        self.closed = True


def test_an_engine_that_stops_answering_gets_a_fresh_client():
    made: list[Stub] = []

    def factory(endpoint: str) -> Stub:
        made.append(Stub(fail=1 if not made else 0))
        return made[-1]

    ex = DockerExecutor(ExecutorSettings(), client_factory=factory)
    node = NodeRef(name="n1", docker_endpoint="ssh://root@n1")
    with pytest.raises(NodeUnreachable, match="node n1 .*list containers: connection reset"):
        ex.containers(node)
    assert made[0].closed
    assert ex.containers(node) == [] and len(made) == 2
    assert ex.containers(node) == [] and len(made) == 2     # cached again
    ex.close()
    assert made[1].closed


def test_ssh_endpoint_failure_is_a_one_line_error_naming_the_node():
    # Without paramiko (docker[ssh]) the SDK cannot speak ssh://: a clear ExecutorError;
    # with it, a host that does not resolve is unreachable. Either way: one line, the node.
    ex = DockerExecutor(ExecutorSettings(docker_timeout_s=2.0))
    with pytest.raises(ExecutorError) as e:
        ex.ping(NodeRef(name="n9", docker_endpoint="ssh://andreas@node9.invalid"))
    assert str(e.value).startswith("node n9") and "\n" not in str(e.value)
    try:
        import paramiko  # noqa: F401
    except ImportError:
        assert "paramiko" in str(e.value)
    else:
        assert isinstance(e.value, NodeUnreachable)
