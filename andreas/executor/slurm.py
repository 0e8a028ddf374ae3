"""The Slurm executor: andreas plans, Slurm runs; one batch job per attempt.

An attempt is ``sbatch --parsable --job-name andreas-<job>-<attempt> --nodelist <node>
--gres=gpu:<g> --partition <p> --output <output_dir>/andreas-<job>-<attempt>.out
--no-requeue --export=ALL --wrap <command>``; its "container id" is the Slurm job id. The
environment sbatch exports is built here (:meth:`SlurmCli.base_env`, the job's own
variables, the job contract's), so nothing of the manager's environment but a PATH, the
locale and SLURM_CONF reaches a job. Due dates are never given to Slurm (``--deadline``
cancels a job at its deadline; andreas plans around due dates instead); no requeue
(requeuing the same job id delays its restart by about two minutes; every attempt is a
job of its own).

- **Duplicates**: before sbatch, the tick's ``squeue -t all`` (the jobs this executor
  submitted since added): a job of that name is a ContainerConflict, so a manager that
  crashed between sbatch and recording the id finds its job (adopted by name) instead of
  submitting a second one.
- **Reading**: one ``sinfo`` of the partition's nodes and then one ``squeue -t all`` of
  this user's jobs in the partition per tick, shared by every node's :meth:`containers`
  and the inventory (cached for ``LISTING_TTL_S``). ``scontrol -o -d show job`` only when a job is
  first seen running (the GPU indexes Slurm chose, Slurm's IDX, mapped to the node's
  UUIDs by index) and when it has ended (its ``ExitCode=c:s``; a signal s is 128 + s);
  ended jobs do not change again.
- **States**: pending (with Slurm's reason), running (COMPLETING too: processes may still
  run), ended. A node Slurm marks down, has powered down (or is powering up or down), or
  does not have in the partition is NodeUnreachable; its jobs are not "gone" before
  Slurm says so, whatever they do. A job that was
  never given a node ended without starting. A node failure without the node down
  (NODE_FAIL, BOOT_FAIL) reads as killed (137), resumable.
- **Stop**: ``scancel --signal=TERM --full`` (the batch shell, which waits for the
  command, and every process of the job; a pending job is simply cancelled); after the
  grace period :meth:`kill`: ``scancel`` (SIGTERM again, SIGKILL after Slurm's KillWait:
  a job that ignores SIGTERM ends 137; ``scancel --signal=KILL`` is the same cancel). The
  batch script runs the command in the background and waits, also for processes of its
  process group that outlive it (a ``sh -c`` between it and the training process dies at
  SIGTERM while the process writes its checkpoint), so Slurm sees the job end only when
  the training process has.
- **Logs** are the output file; :meth:`remove` (after the manager kept its end) lists the
  job no more and deletes the file ``KEEP_OUTPUT_S`` after the job ended, when the node's
  agent has read it (an ended job that had started and has no output file was removed).
"""

from __future__ import annotations

import logging
import re
import shlex
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from andreas.config import ExecutorSettings
from andreas.executor.base import (Capability, ContainerState, EngineNodeState, Executor,
                                   NodeInventory, NodeRef, StartRequest, container_name)
from andreas.executor.errors import (ContainerConflict, EngineUnavailable, ExecutorError,
                                     ImageNotAllowed, NodeUnreachable, StartUncertain)
from andreas.executor.slurm_cli import (PENDING_STATES, RUNNING_STATES, SEP, SINFO_FIELDS,
                                        SQUEUE_FIELDS, JobDetail, NodeRow, QueueRow, SlurmCli,
                                        exit_status, parse_job_detail, parse_sinfo,
                                        parse_squeue)
from andreas.job import job_environment

log = logging.getLogger("andreas.executor")

LISTING_TTL_S = 0.5            # one squeue / sinfo serves every node of a tick
BATCH_DETAILS = 3              # more jobs than this to inspect: one scontrol for all
RECENT_END_S = 10.0            # an andreas job that ended this recently: its GPUs still ours
KEEP_OUTPUT_S = 30.0           # a removed job's output file outlives its end this long
NAME = re.compile(r"andreas-(?P<job>[A-Za-z0-9][A-Za-z0-9_.-]{0,63})-(?P<attempt>[0-9]{1,9})")
FOLLOW_POLL_S = 0.5
_GONE = ("invalid job id", "already completing or completed", "not found", "job has finished")


def wrap_script(command: Sequence[str]) -> str:
    """The batch script around a command (``--wrap``): the command in the background, the
    shell waiting for it through SIGTERM (``scancel --full`` signals every process of the
    job) and then for the rest of its process group (``pgrep``; without it, not), so the
    job ends when the training process does; its exit status is the job's."""
    return (f"{shlex.join(command)} & c=$!; trap : TERM; "
            "while :; do wait $c; r=$?; kill -0 $c 2>/dev/null || break; done; "
            'while [ "$(pgrep -c -g $$ 2>/dev/null)" -gt 1 ] 2>/dev/null; do sleep 0.2; done; '
            "exit $r")


@dataclass(frozen=True, kw_only=True)
class _Listing:
    at: float
    rows: tuple[QueueRow, ...]
    nodes: dict[str, NodeRow]


class SlurmExecutor(Executor):
    """Slurm through its command-line tools (module docstring). ``cli``: for tests."""

    capabilities = (Capability.COMMANDS | Capability.PENDING | Capability.PICKS_GPUS
                    | Capability.INVENTORY | Capability.POWER)

    def __init__(self, settings: ExecutorSettings, *, cli: SlurmCli | None = None,
                 clock: Callable[[], float] = time.time, user: str | None = None) -> None:
        self.settings = settings
        self.slurm = settings.slurm
        self.cli = cli or SlurmCli(settings.slurm)
        self.clock = clock
        self.output_dir = Path(self.slurm.output_dir)
        if not self.output_dir.is_dir():
            raise ExecutorError(f"[executor.slurm] output_dir {self.slurm.output_dir}: not a "
                                "directory the manager sees (it must be shared with the nodes)")
        import getpass

        self.user = user or getpass.getuser()
        self._lock = threading.Lock()
        self._listing: _Listing | None = None
        self._details: dict[str, tuple[str, JobDetail]] = {}    # job id -> (state, detail)
        self._removed: set[str] = set()
        self._doomed: dict[Path, float] = {}           # output file -> delete after

    # ------------------------------------------------------------------ reading

    def _queue(self, *, fresh: bool = False) -> tuple[QueueRow, ...]:
        """This user's andreas jobs in the partition, any state (cached a moment)."""
        return self._look(fresh=fresh).rows

    def _node_rows(self) -> dict[str, NodeRow]:
        return self._look().nodes

    def _look(self, *, fresh: bool = False) -> _Listing:
        """One look at Slurm, shared by the nodes' calls for ``LISTING_TTL_S``: ``sinfo``
        of the partition's nodes, *then* ``squeue`` of this user's jobs there (so a job
        whose GPUs sinfo counts is listed running, not pending: the inventory tells
        andreas' GPUs from others' by subtraction)."""
        with self._lock:
            now = time.monotonic()
            if not fresh and self._listing is not None and now - self._listing.at < LISTING_TTL_S:
                return self._listing
            text = self.cli.run("sinfo", ["--noheader", "--Node",
                                          f"--partition={self.slurm.partition}",
                                          f"--Format={SINFO_FIELDS}"], what="list nodes")
            nodes = {r.name: r for r in parse_sinfo(text)}
            text = self.cli.run("squeue", ["--noheader", "--states=all",
                                           f"--partition={self.slurm.partition}",
                                           f"--user={self.user}",
                                           f"--format={SEP.join(SQUEUE_FIELDS)}"],
                                what="list jobs")
            rows = tuple(r for r in parse_squeue(text) if NAME.fullmatch(r.name))
            listing = self._listing = _Listing(at=time.monotonic(), rows=rows, nodes=nodes)
            listed = {r.job_id for r in rows}          # Slurm forgot the others (MinJobAge)
            for gone in [k for k in self._details if k not in listed]:
                self._details.pop(gone, None)
            self._removed &= listed
        self._delete_due()
        return listing

    def _listed(self, row: QueueRow) -> None:
        """A job this executor just submitted, in the shared listing until the next
        squeue (so the next start of the tick checks its name without asking again)."""
        with self._lock:
            if self._listing is not None:
                self._listing = replace(self._listing, rows=(*self._listing.rows, row))

    def _invalidate(self) -> None:
        with self._lock:
            self._listing = None

    def _node_row(self, node: NodeRef) -> NodeRow:
        """The node as Slurm sees it; NodeUnreachable when Slurm marks it down, has it
        powered down (or on its way up or down: the manager's power-down probes until it
        is up), or does not have it in the partition."""
        row = self._node_rows().get(node.name)
        if row is None:
            raise NodeUnreachable(f"node {node.name}: not a node of Slurm partition "
                                  f"{self.slurm.partition!r}")
        if row.state in (EngineNodeState.DOWN, EngineNodeState.POWERED_DOWN,
                         EngineNodeState.POWERING_UP, EngineNodeState.POWERING_DOWN):
            raise NodeUnreachable(f"node {node.name}: Slurm says {row.raw_state}"
                                  + (f" ({row.reason})" if row.reason not in ("", "none")
                                     else ""))
        return row

    def _detail(self, row: QueueRow) -> JobDetail:
        """``scontrol -o -d show job``, once per state of the job."""
        cached = self._details.get(row.job_id)
        if cached is not None and cached[0] == row.state:
            return cached[1]
        text = self.cli.run("scontrol", ["-o", "-d", "show", "job", row.job_id],
                            what=f"job {row.job_id}")
        detail = parse_job_detail(text, row.node)
        self._details[row.job_id] = (row.state, detail)
        return detail

    def _details_for(self, rows: Sequence[QueueRow]) -> None:
        """Details of many jobs in one ``scontrol -o -d show job`` (every job; one line
        each) when more than a few are missing: a manager that starts reads the ended jobs
        of the last ``MinJobAge`` once, not with one command each."""
        wanted = {r.job_id: r for r in rows
                  if (r.state in RUNNING_STATES or (r.ran and r.state not in PENDING_STATES))
                  and self._details.get(r.job_id, ("",))[0] != r.state}
        if len(wanted) <= BATCH_DETAILS:
            return
        text = self.cli.run("scontrol", ["-o", "-d", "show", "job"], what="every job")
        for line in text.splitlines():
            m = re.match(r"JobId=(\d+)\s", line)
            row = wanted.get(m.group(1)) if m else None
            if row is not None:
                self._details[row.job_id] = (row.state, parse_job_detail(line, row.node))

    def _output(self, name: str, detail: JobDetail | None = None) -> Path:
        if detail is not None and detail.stdout and detail.stdout != "(null)":
            return Path(detail.stdout)
        return self.output_dir / f"{name}.out"

    def _state(self, row: QueueRow, node: NodeRef) -> ContainerState | None:
        m = NAME.fullmatch(row.name)
        assert m is not None
        common: dict[str, Any] = dict(container_id=row.job_id, name=row.name, job_id=m["job"],
                      attempt=int(m["attempt"]), submitted_s=row.submit_s)
        if row.state in PENDING_STATES:
            reason = (row.reason if row.state == "PENDING" and row.reason not in ("", "None")
                      else "queued" if row.state == "PENDING" else row.state.lower())
            return ContainerState(**common, running=False, pending=True,
                                  pending_reason=reason)
        if row.state in RUNNING_STATES:
            detail = self._detail(row)
            uuids = tuple(u for u in (node.uuid_of(i) for i in detail.gpu_idx) if u)
            return ContainerState(**common, running=True, gpu_uuids=uuids,
                                  started_s=row.start_s)
        if row.job_id in self._removed:
            return None
        if not row.ran:              # cancelled (or refused) before it was given a node
            return ContainerState(**common, running=False, error=row.reason)
        detail = self._detail(row)
        if not self._output(row.name, detail).exists():
            return None              # removed (its output file deleted after its log was kept)
        code = exit_status(detail.code, detail.signal)
        error = ""
        if row.state in ("NODE_FAIL", "BOOT_FAIL"):
            code, error = 137, f"Slurm {row.state} ({row.reason})"
        elif row.state == "CANCELLED" and not code:
            code = 143                # scancel: stopped by the andreas stop or an operator
        elif row.state in ("TIMEOUT", "PREEMPTED", "DEADLINE") and not code:
            code, error = 143, f"Slurm {row.state}"
        return ContainerState(**common, running=False, exit_code=code if code is not None else -1,
                              oom_killed=row.state == "OUT_OF_MEMORY", error=error,
                              started_s=row.start_s, finished_s=row.end_s)

    # ------------------------------------------------------------------ Executor

    def ping(self, node: NodeRef) -> None:
        self._node_row(node)

    def containers(self, node: NodeRef) -> list[ContainerState]:
        self._node_row(node)
        rows = [r for r in self._queue() if r.node == node.name]
        self._details_for(rows)
        out = []
        for row in rows:
            if row.node == node.name:
                state = self._state(row, node)
                if state is not None:
                    out.append(state)
        return out

    def start(self, node: NodeRef, request: StartRequest) -> str:
        name = container_name(request.job_id, request.attempt)
        if request.image:
            raise ImageNotAllowed(f"job {request.job_id}: the Slurm executor runs commands, "
                                  f"not images (image {request.image}); submit it with --cmd")
        if not request.command:
            raise ImageNotAllowed(f"job {request.job_id}: no command to run; submit it with "
                                  "--cmd")
        found = [r.job_id for r in self._queue() if r.name == name]
        if found:
            raise ContainerConflict(f"Slurm job {found[0]} named {name} exists already")
        argv, env = self.sbatch(node, request)
        try:
            out = self.cli.run("sbatch", argv, what=f"submit {name} to node {node.name}",
                               env=env)
        except EngineUnavailable as e:
            self._invalidate()
            if "did not answer" in str(e):          # it may have been queued meanwhile
                raise StartUncertain(str(e)) from None
            raise
        except ExecutorError:
            self._invalidate()
            raise
        job_id = out.strip().split(";", 1)[0]
        if not job_id.isdigit():
            self._invalidate()
            raise ExecutorError(f"Slurm: sbatch ({name}): unexpected answer {out.strip()!r}")
        self._listed(QueueRow(job_id=job_id, state="PENDING", node=node.name, ran=False,
                              submit_s=self.clock(), start_s=None, end_s=None,
                              user=self.user, name=name, reason="queued"))
        log.info("submitted %s as Slurm job %s to node %s (%d GPU(s))", name, job_id, node.name,
                 len(request.gpu_uuids))
        return job_id

    def sbatch(self, node: NodeRef, request: StartRequest) -> tuple[list[str], dict[str, str]]:
        """sbatch's arguments and environment for one attempt (pure but for mkdir)."""
        name = container_name(request.job_id, request.attempt)
        checkpoint = Path(self.settings.checkpoint_root) / request.job_id
        try:
            contract = job_environment(request.job_id, checkpoint, request.epochs,
                                       request.restart_count)
        except ValueError as e:
            raise ExecutorError(f"job {request.job_id!r} attempt {request.attempt}: {e}") from e
        if checkpoint.parent.is_dir():
            try:
                checkpoint.mkdir(exist_ok=True)
            except OSError as e:
                log.warning("checkpoint directory %s: %s", checkpoint, e.strerror or e)
        env = {**self.cli.base_env(), **request.env, **contract}
        argv = ["--parsable", f"--job-name={name}", f"--nodelist={node.name}",
                f"--partition={self.slurm.partition}",
                f"--output={self.output_dir / (name + '.out')}", "--open-mode=append",
                f"--chdir={self.output_dir}", "--no-requeue", "--export=ALL"]
        if request.gpu_uuids:
            argv.append(f"--gres=gpu:{len(request.gpu_uuids)}")
        if self.slurm.account:
            argv.append(f"--account={self.slurm.account}")
        argv += [*self.slurm.sbatch_args, f"--wrap={wrap_script(request.command)}"]
        return argv, env

    def signal(self, node: NodeRef, container_id: str, signal: str = "SIGTERM") -> None:
        sig = signal.upper().removeprefix("SIG")
        row = next((r for r in self._queue(fresh=True) if r.job_id == container_id), None)
        if row is not None and row.state in PENDING_STATES:
            self._scancel([container_id])          # never ran: nothing to checkpoint
        elif sig == "KILL":
            self.kill(node, container_id)         # Slurm turns SIGKILL into its cancel
        else:
            self._scancel([f"--signal={sig}", "--full", container_id])

    def kill(self, node: NodeRef, container_id: str) -> None:
        """``scancel``: Slurm's own end of a job, SIGTERM to every process and SIGKILL
        after its KillWait (COMPLETING, reported running, until then)."""
        self._scancel([container_id])

    def _scancel(self, args: list[str]) -> None:
        """``scancel ARGS``; a job that has ended or is unknown already is no error."""
        try:
            self.cli.run("scancel", args, what=f"job {args[-1]}")
        except EngineUnavailable:
            raise
        except ExecutorError as e:
            if not any(g in str(e).lower() for g in _GONE):
                raise
        finally:
            self._invalidate()

    def remove(self, node: NodeRef, container_id: str) -> None:
        """Forget the job: no longer listed; its output file is deleted ``KEEP_OUTPUT_S``
        after the job ended (the node's agent may still be reading its last lines)."""
        row = next((r for r in self._queue() if r.job_id == container_id), None)
        detail = self._details.get(container_id)
        if row is not None:
            ended = row.end_s if row.end_s is not None else self.clock()
            self._doomed[self._output(row.name, detail[1] if detail else None)] = (
                ended + KEEP_OUTPUT_S)
        self._removed.add(container_id)
        self._delete_due()

    def _delete_due(self) -> None:
        now = self.clock()
        for path, due in list(self._doomed.items()):
            if now >= due:
                try:
                    path.unlink(missing_ok=True)
                except OSError as e:
                    log.warning("output %s of an ended Slurm job: %s", path, e.strerror or e)
                self._doomed.pop(path, None)

    def logs(self, node: NodeRef, container_id: str, *, follow: bool = False,
             tail: int | None = None) -> Iterator[bytes]:
        row = next((r for r in self._queue() if r.job_id == container_id), None)
        if row is None:
            raise ExecutorError(f"node {node.name}: no Slurm job {container_id} of andreas")
        detail = self._details.get(container_id)
        path = self._output(row.name, detail[1] if detail else None)
        return self._read(path, container_id, follow=follow, tail=tail)

    def _read(self, path: Path, container_id: str, *, follow: bool,
              tail: int | None) -> Iterator[bytes]:
        try:
            with path.open("rb") as f:
                data = f.read()
                if tail is not None:
                    data = b"".join(data.splitlines(keepends=True)[-tail:]) if tail else b""
                if data:
                    yield data
                while follow:
                    chunk = f.read()
                    if chunk:
                        yield chunk
                        continue
                    row = next((r for r in self._queue(fresh=True)
                                if r.job_id == container_id), None)
                    if row is None or (row.state not in PENDING_STATES
                                       and row.state not in RUNNING_STATES):
                        rest = f.read()
                        if rest:
                            yield rest
                        return
                    time.sleep(FOLLOW_POLL_S)
        except FileNotFoundError:
            return                       # not started yet, or removed: no output
        except OSError as e:
            raise ExecutorError(f"output of Slurm job {container_id} ({path}): "
                                f"{e.strerror or e}") from e

    # ------------------------------------------------------------------ inventory, power

    def inventory(self, nodes: Sequence[NodeRef]) -> Mapping[str, NodeInventory]:
        rows = self._node_rows()
        ours: dict[str, set[int]] = {}
        now = self.clock()
        for row in self._queue():
            ended_now = row.ran and row.end_s is not None and now - row.end_s < RECENT_END_S
            if row.state in RUNNING_STATES or ended_now:   # sinfo may still count its GPUs
                ours.setdefault(row.node, set()).update(self._detail(row).gpu_idx)
        out = {}
        for ref in nodes:
            r = rows.get(ref.name)
            if r is None:
                out[ref.name] = NodeInventory(
                    name=ref.name, state=EngineNodeState.UNKNOWN,
                    reason=f"not a node of Slurm partition {self.slurm.partition!r}")
                continue
            foreign = tuple(i for i in r.used_idx if i not in ours.get(ref.name, set()))
            out[ref.name] = NodeInventory(name=ref.name, state=r.state, gpu_type=r.gpu_type,
                                          gpus=r.gpus, foreign_gpus=foreign,
                                          reason="" if r.reason == "none" else r.reason)
        return out

    def power(self, node: NodeRef, on: bool) -> None:
        state = "POWER_UP" if on else "POWER_DOWN_ASAP"
        try:
            self.cli.run("scontrol", ["update", f"nodename={node.name}", f"state={state}"],
                         what=f"node {node.name} {state}")
        finally:
            self._invalidate()
