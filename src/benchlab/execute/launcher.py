"""The launcher backend: each attempt a job of an external launcher, driven by command templates.

Docker, Slurm, dstack, SkyPilot, SageMaker or a script of one's own: anything with a command that
submits a job and prints its id, one that prints its state, and one that stops it. The spec's
``launcher:`` section holds the templates (:class:`LauncherSection`; docs/launchers.md has tested
recipes); ``{placeholders}`` in them are filled per attempt, each value shell-quoted.

What each guarantee rests on:

- Exactly once under kill -9 of benchlab. A job is submitted only after the ledger holds the
  attempt's *intent*: a placement whose job id is ``intent:<name>``, recorded in the transaction
  that records the attempt (:attr:`ProcessInfo.placement`); ``<name>`` is the job's name, made of
  the results folder and the attempt id. Right after the submit command returns, its job id goes
  to a journal file (``.launcher/<name>.json``, written and renamed) and, at the sweep's
  next step, to the ledger in place of the intent. A sweep started after a kill re-attaches
  (:meth:`LauncherBackend.adopt`) to every job the ledger names; for an intent it reads the
  journal, then asks the launcher by name (the ``find`` template); only a job found by neither is
  submitted again, as a new attempt. Without ``find`` the one window left is a kill during the
  submit command itself.
- A status output that matches no rule is never taken as running: after ``unmatched_grace_s`` of
  such answers (a launcher's accounting may lag) the job is cancelled and the attempt fails,
  class ``launch-error``, with the output in its error.
- The timeout: passed to the launcher (``{timeout_s}``, ``{timeout_min}``) and enforced here too,
  from the moment the launcher first says the job runs: the job is cancelled and the attempt
  recorded timed out, whatever the launcher reports of the cancelled job.
- States are polled with backoff (``poll_s`` doubling by half up to ``max_poll_s`` while nothing
  changes, back to ``poll_s`` on a change), one status command per job in flight.
"""

from __future__ import annotations

import difflib
import hashlib
import json
import math
import os
import re
import shlex
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from benchlab.errors import BackendUnavailable
from benchlab.execute.base import Backend, BackendOptions, Launch, Outcome, ProcessInfo, SweepContext
from benchlab.execute.proctree import ATTEMPT_KEY_ENV
from benchlab.ledger import Placement
from benchlab.names.failures import CANCELLED, EXIT_CODE, LAUNCH, NODE_DIED, RetryClass
from benchlab.plan import Run
from benchlab.spec import Spec

#: The job id of a placement that records the intent to submit, before the launcher gave an id.
INTENT = "intent:"
JOURNAL_DIR = ".launcher"
ENV_FILE = "launcher.env"
JOB_ID_FILE = "launcher.job_id"

State = Literal["pending", "running", "completed", "failed", "cancelled", "timeout", "lost"]
_FINAL_STATES = {"completed", "failed", "cancelled", "timeout", "lost"}

#: Every placeholder a template may use, and what it holds.
PLACEHOLDERS: dict[str, str] = {
    "name": "the job's name, unique to the results folder and the attempt (letters, digits, dashes)",
    "run_id": "the run's id",
    "run_dir": "the run's folder (absolute)",
    "results_dir": "the results folder (absolute)",
    "command": "the run's command, as one shell word",
    "cwd": "the run's working directory",
    "log": "the run's log file (train.log in its folder)",
    "env_file": "a file of the run's own variables, KEY=VALUE a line (secrets left out)",
    "job_id_file": "a file the submit command may write the job id to, instead of printing it",
    "attempt": "the attempt's number (1 for the first)",
    "gpus": "GPUs the run asks for, rounded up to a whole number",
    "cpus": "CPU cores the run asks for, rounded up",
    "memory_mb": "host memory the run asks for in MiB (0: not given)",
    "timeout_s": "the run's timeout in whole seconds (0: none)",
    "timeout_min": "the run's timeout in whole minutes, rounded up (0: none)",
    "job_id": "the launcher's id of the job (not in submit and find)",
}
_BEFORE_SUBMIT = ("submit", "find")
_PLACEHOLDER_RE = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def template_problem(template: str, allowed: set[str]) -> str | None:
    """Why ``template`` cannot be filled (an unknown placeholder, one not allowed there), or None."""
    for m in _PLACEHOLDER_RE.finditer(template):
        if m.group(1) not in PLACEHOLDERS:
            close = difflib.get_close_matches(m.group(1), list(PLACEHOLDERS), n=1)
            hint = f"did you mean {{{close[0]}}}? " if close else ""
            return (f"unknown placeholder {{{m.group(1)}}}; {hint}known: "
                    f"{', '.join('{' + p + '}' for p in PLACEHOLDERS)}")
        if m.group(1) not in allowed:
            return f"{{{m.group(1)}}} is not known here: the job has no id before it is submitted"
    return None


def fill(template: str, values: dict[str, str]) -> str:
    """``template`` with each ``{placeholder}`` replaced by its value as one shell word. Braces that
    do not enclose a placeholder's name (Go templates' ``{{.State.Status}}``) are left as written."""
    return _PLACEHOLDER_RE.sub(lambda m: shlex.quote(values[m.group(1)]) if m.group(1) in values else m.group(0),
                               template)


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)



def _regex(v: str) -> str:
    """``v`` if it compiles as a regular expression, else the ValueError the spec reports at its line."""
    try:
        re.compile(v)
    except re.error as exc:
        raise ValueError(f"not a regular expression: {exc}") from None
    return v

class StateRule(_Section):
    """One rule of ``launcher.states``: where the status command's output matches ``match`` (a
    regular expression, searched), the job is in ``state``. Named groups: ``exit`` (the exit code),
    ``signal`` (the signal that killed it), ``reason`` (the launcher's words, shown and recorded),
    ``node`` (where the job runs)."""

    match: str
    state: State
    #: The failure class of a failed job whose end says it better than an exit code (dstack's
    #: "no capacity": ``launch-error``), counted against that class's retry budget.
    failure_class: RetryClass | None = Field(default=None, alias="class")

    @field_validator("match")
    @classmethod
    def _compiles(cls, v: str) -> str:
        return _regex(v)


class LauncherSection(_Section):
    """The spec's ``launcher:`` section: how to submit, watch, read and stop a job."""

    #: Submits the job; prints its id (or writes it to ``{job_id_file}``).
    submit: str
    #: Where the job id is in submit's output: group ``id``, else group 1, else the whole match.
    job_id: str = r"(\S+)\s*$"
    #: Prints the id of the job named ``{name}`` (nothing when there is none): a job submitted
    #: just before benchlab was killed is found by it instead of being submitted again.
    find: str | None = None
    #: Prints the job's state, read by ``states``.
    status: str
    states: list[StateRule] = Field(min_length=1)
    #: Prints the job's output, written to the run's log once the job ended (None: the job writes
    #: the log itself, on a shared file system).
    logs: str | None = None
    #: Run ``logs`` from the job's start, appending as it prints (``docker logs -f``), rather than once
    #: at its end: ``benchlab logs -f`` and metric curves then follow the run live.
    follow_logs: bool = False
    cancel: str
    #: Brings the run's folder home after the job ended (None: the job writes it on a shared path).
    copy_back: str | None = Field(default=None, alias="copy")
    #: Run after the job's outcome is known and its files are home (``docker rm``).
    cleanup: str | None = None
    poll_s: float = Field(default=1.0, gt=0)
    max_poll_s: float = Field(default=15.0, gt=0)
    #: Seconds of status answers that match no rule before the job is given up as failed.
    unmatched_grace_s: float = Field(default=30.0, ge=0)
    #: Seconds any one of these commands may take.
    command_timeout_s: float = Field(default=120.0, gt=0)
    #: Most jobs submitted and not ended at once (None: ``-j``).
    max_jobs: int | None = Field(default=None, ge=1)

    @field_validator("submit", "find")
    @classmethod
    def _before_submit(cls, v: str | None) -> str | None:
        problem = None if v is None else template_problem(v, set(PLACEHOLDERS) - {"job_id"})
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("status", "logs", "cancel", "copy_back", "cleanup")
    @classmethod
    def _after_submit(cls, v: str | None) -> str | None:
        problem = None if v is None else template_problem(v, set(PLACEHOLDERS))
        if problem:
            raise ValueError(problem)
        return v

    @field_validator("job_id")
    @classmethod
    def _id_regex(cls, v: str) -> str:
        return _regex(v)

    @model_validator(mode="after")
    def _one_way_to_the_id(self) -> LauncherSection:
        if self.max_poll_s < self.poll_s:
            raise ValueError(f"max_poll_s ({self.max_poll_s:g}) is below poll_s ({self.poll_s:g})")
        return self


@dataclass(frozen=True)
class LauncherOptions(BackendOptions):
    """The launcher backend's options for a Python caller (the command line has none of its own)."""

    #: The templates, over the spec's ``launcher:`` section (None: the spec's).
    section: LauncherSection | None = None


@dataclass
class _Flight:
    launch: Launch
    name: str
    submitted: float
    job_id: str | None = None
    #: Set once the caller took the attempt's intent (the sweep recorded it): the job may be submitted.
    announced: threading.Event = field(default_factory=threading.Event)
    #: Set to poll at once (a cancel), or to stop waiting.
    poke: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    #: The sweep no longer waits for this job's outcome (terminate_all reported it).
    abandoned: bool = False
    #: Its outcome was returned by ``wait`` (and is recorded once the caller waits again).
    returned: bool = False
    state: str = "SUBMITTING"
    reason: str | None = None
    node: str | None = None
    running_since: float | None = None
    next_poll: float = 0.0
    interval: float = 1.0
    unmatched_since: float | None = None
    #: Why benchlab cancelled the job: "timeout", "cancel" (a pruned trial), "interrupt".
    stopping: str | None = None
    follower: subprocess.Popen[bytes] | None = None
    reported: tuple[str | None, str | None, str | None] = (None, None, None)


@dataclass(frozen=True)
class _Called:
    """What one template's command did."""

    code: int | None  # None: it could not run, or ran past its time
    output: str

    @property
    def ok(self) -> bool:
        return self.code == 0


class LauncherBackend(Backend):
    """Runs attempts as jobs of an external launcher; see the module's docstring."""

    name = "launcher"
    section = LauncherSection

    @classmethod
    def for_sweep(cls, context: SweepContext, **options: Any) -> LauncherBackend:
        section = options.pop("section", None) or context.spec.backend_section(cls.name)
        if section is None:
            raise BackendUnavailable(cls.name, "the spec has no `launcher:` section with the commands that submit, "
                                               "watch and cancel a job (docs/launchers.md)")
        assert isinstance(section, LauncherSection)
        return cls(section, context.results_dir, spec=context.spec, jobs=context.jobs, **options)

    def __init__(self, section: LauncherSection, results_dir: Path | str, *, spec: Spec | None = None,
                 jobs: int | None = None):
        self.templates = section
        self.results_dir = Path(results_dir).resolve()
        self.journal = self.results_dir / JOURNAL_DIR
        self.limit = section.max_jobs or jobs or 1
        slug = re.sub(r"[^a-z0-9]+", "-", (spec.name if spec is not None else "run").lower()).strip("-")[:24]
        digest = hashlib.sha1(str(self.results_dir).encode()).hexdigest()[:6]
        self._prefix = f"benchlab-{slug or 'run'}-{digest}"
        self._flights: dict[int, _Flight] = {}
        self._woken = threading.Event()
        #: Set by a follower when it queued an outcome or a placement.
        self._news = threading.Event()
        self._lock = threading.Lock()
        self._placements: list[Placement] = []
        self._warnings: list[str] = []
        self._ended_queue: list[Outcome] = []
        self._to_clean: list[_Flight] = []
        self._base_env = dict(os.environ)
        self._id_re = re.compile(section.job_id, re.M)
        self._rules = [(re.compile(r.match, re.M), r) for r in section.states]

    # -- capacity -------------------------------------------------------------

    def fits(self, run: Run) -> bool:
        return len(self._flights) < self.limit

    def running(self) -> int:
        return len(self._flights)

    def job_name(self, attempt_id: int) -> str:
        """The launcher's name for attempt ``attempt_id``'s job: the same in any process that opens
        this results folder, so that a job submitted before a kill is found by it."""
        return f"{self._prefix}-{attempt_id}"

    # -- lifecycle ------------------------------------------------------------

    def start(self, launch: Launch) -> ProcessInfo:
        """Start following ``launch``. Its intent is the returned placement, which the caller records
        with the attempt (the sweep's launch transaction); its job is submitted at the caller's next
        ``wait()``, which it calls only once that is committed."""
        flight = _Flight(launch, self.job_name(launch.attempt_id), time.time(), interval=self.templates.poll_s)
        self._flights[launch.attempt_id] = flight
        self._follow(flight)
        return ProcessInfo(pid=None, pgid=None, proc_start=None, node=None,
                           placement=Placement(launch.attempt_id, INTENT + flight.name, "SUBMITTING", None))

    def placements(self) -> list[Placement]:
        """What the launcher said of jobs since the last call (job ids, states, nodes)."""
        with self._lock:
            out, self._placements = self._placements, []
        return out

    def warnings(self) -> list[str]:
        with self._lock:
            out, self._warnings = self._warnings, []
        return out

    def wake(self) -> None:
        self._woken.set()
        self._news.set()

    def _place(self, placement: Placement) -> None:
        with self._lock:
            self._placements.append(placement)
        self._news.set()

    def _warn(self, text: str) -> None:
        with self._lock:
            self._warnings.append(text)
        self._news.set()

    def wait(self, timeout: float | None) -> list[Outcome]:
        # Every attempt started before this call has its intent recorded: it may be submitted; and
        # every outcome returned before it is recorded: its job may be cleaned up.
        for flight in self._flights.values():
            flight.announced.set()
        self._clean_recorded()
        end = None if timeout is None else time.monotonic() + timeout
        while self._flights:
            with self._lock:
                ended, self._ended_queue = self._ended_queue, []
                placed = bool(self._placements)
            outcomes = []
            for o in ended:
                mine = self._flights.pop(o.launch.attempt_id, None)
                if mine is not None:
                    mine.returned = True
                    outcomes.append(o)
            if outcomes or placed:
                return outcomes
            if self._woken.is_set():
                self._woken.clear()
                return []
            now = time.monotonic()
            if end is not None and now >= end:
                return []
            self._news.wait(None if end is None else max(0.0, end - now))
            self._news.clear()
        return []

    def adopt(self, launch: Launch, job_id: str) -> bool:
        """Follow a job an earlier sweep submitted (or meant to: an intent), as if started here.
        False when the launcher knows no such job: an intent never submitted, or a job forgotten."""
        name = self.job_name(launch.attempt_id)
        if job_id.startswith(INTENT):
            found = self._journal_id(job_id[len(INTENT):]) or self._find(job_id[len(INTENT):], launch)
            if found is None:
                return False
            job_id = found
        flight = _Flight(launch, name, time.time(), job_id=job_id, state="ADOPTED", interval=self.templates.poll_s)
        flight.announced.set()
        called = self._call(self.templates.status, flight)
        if self._match(called.output) is None:
            return False
        # The timeout counts from here: when the job started is not known to this process.
        self._flights[launch.attempt_id] = flight
        self._place(Placement(launch.attempt_id, job_id, "ADOPTED", None))
        self._follow(flight)
        return True

    def cancel(self, attempt_id: int) -> bool:
        """Stop one attempt (a pruned trial) with the cancel command; its outcome comes through ``wait``."""
        flight = self._flights.get(attempt_id)
        if flight is None or flight.job_id is None:
            return False
        flight.stopping = flight.stopping or "cancel"
        self._call(self.templates.cancel, flight)
        flight.poke.set()
        return True

    def terminate_all(self, grace: float) -> list[Outcome]:
        """Cancel every job of this sweep and report them interrupted (a job not yet submitted never
        will be); each job's follower brings its files home if the job ends within ``grace``."""
        flights = list(self._flights.values())
        for flight in flights:
            flight.stopping = "interrupt"
            flight.announced.set()  # a follower still waiting to submit gives up
        for flight in flights:
            if flight.job_id is not None:
                self._call(self.templates.cancel, flight)
            flight.poke.set()
        deadline = time.monotonic() + grace
        for flight in flights:
            if flight.thread is not None:
                flight.thread.join(max(0.0, deadline - time.monotonic()))
        now = time.time()
        outcomes = []
        for flight in flights:
            flight.abandoned = True
            self._stop_follower(flight)
            outcomes.append(Outcome(launch=flight.launch, exit_code=None, interrupted=True,
                                    started=flight.running_since or flight.submitted, ended=now, node=flight.node,
                                    job_id=flight.job_id))
        self._flights.clear()
        with self._lock:
            self._ended_queue = []
        return outcomes

    def close(self) -> None:
        if self._flights:
            self.terminate_all(10.0)
        with self._lock:
            left, self._to_clean = self._to_clean, []
        self._clean([f for f in left if f.returned or f.abandoned])

    # -- one job's follower ------------------------------------------------------------

    def _follow(self, flight: _Flight) -> None:
        flight.thread = threading.Thread(target=self._run_follower, args=(flight,), daemon=True,
                                         name=f"launcher-{flight.name}")
        flight.thread.start()

    def _run_follower(self, flight: _Flight) -> None:
        """Submit the job once its intent is recorded, then poll it until it ends; its outcome goes
        to ``wait``. One thread per job, as a hand-written loop would have one per slot: a slow
        command of one launcher call holds up no other job."""
        try:
            outcome = self._follow_one(flight)
        except Exception as exc:  # noqa: BLE001 - a follower's bug is the attempt's failure, not a lost thread
            outcome = Outcome(launch=flight.launch, exit_code=None, started=flight.submitted, ended=time.time(),
                              job_id=flight.job_id, failure_class=LAUNCH,
                              error=f"following job {flight.job_id or flight.name} failed: {exc!r}")
        if outcome is not None and not flight.abandoned:
            with self._lock:
                self._ended_queue.append(outcome)
            self._news.set()

    def _follow_one(self, flight: _Flight) -> Outcome | None:
        if flight.job_id is None:
            flight.announced.wait()
            if flight.stopping is not None:
                return None
            refused = self._submit(flight)
            if refused is not None or flight.abandoned:
                return refused
            if flight.stopping is not None:  # interrupted during the submit command: stop what it started
                self._call(self.templates.cancel, flight)
        while not flight.abandoned:
            flight.poke.wait(max(0.0, flight.next_poll - time.monotonic()))
            flight.poke.clear()
            if flight.abandoned:
                return None
            outcome = self._poll(flight)
            if outcome is not None:
                return outcome
        return None

    def _submit(self, flight: _Flight) -> Outcome | None:
        launch = flight.launch
        id_file = launch.run_dir / JOB_ID_FILE
        if "{env_file}" in self.templates.submit:
            self._write_env_file(launch)
        id_file.unlink(missing_ok=True)
        called = self._call(self.templates.submit, flight)
        found = None
        if called.ok:
            text = id_file.read_text() if "{job_id_file}" in self.templates.submit and id_file.exists() \
                else called.output
            m = self._id_re.search(text.strip())
            if m is not None:
                found = (m.groupdict().get("id") or (m.group(1) if m.re.groups else m.group(0))).strip()
        if not found:
            why = f"exited with code {called.code}" if called.code not in (0, None) else \
                "could not run, or ran past command_timeout_s" if called.code is None else \
                f"printed no job id matching launcher.job_id {self.templates.job_id!r}"
            return Outcome(launch=launch, exit_code=None, started=flight.submitted, ended=time.time(),
                           error=f"the launcher's submit command {why}: {_tail(called.output)}",
                           failure_class=LAUNCH)
        flight.job_id = found
        self._write_journal(flight.name, found)
        flight.state = "PENDING"
        flight.next_poll = time.monotonic() + self.templates.poll_s
        self._place(Placement(launch.attempt_id, found, "PENDING", None))
        flight.reported = ("PENDING", None, None)
        return None

    def _poll(self, flight: _Flight) -> Outcome | None:
        called = self._call(self.templates.status, flight)
        matched = self._match(called.output)
        now = time.monotonic()
        if matched is None:
            if flight.unmatched_since is None:
                flight.unmatched_since = now
            if now - flight.unmatched_since >= self.templates.unmatched_grace_s:
                self._call(self.templates.cancel, flight)
                self._bring_home(flight)
                return Outcome(launch=flight.launch, exit_code=None, started=flight.running_since or flight.submitted,
                               ended=time.time(), node=flight.node, job_id=flight.job_id, failure_class=LAUNCH,
                               error=f"job {flight.job_id}: the launcher's status output matched no rule of "
                                     f"launcher.states for {self.templates.unmatched_grace_s:g}s: "
                                     f"{_tail(called.output) or '(no output)'}")
            flight.next_poll = now + self.templates.poll_s
            return None
        flight.unmatched_since = None
        m, rule = matched
        groups = m.groupdict()
        state = rule.state
        if groups.get("node"):
            flight.node = groups["node"]
        if state in ("pending", "running"):
            word = state.upper()
            changed = word != flight.state
            flight.state = word
            flight.reason = groups.get("reason") if state == "pending" else None
            if state == "running" and flight.running_since is None:
                flight.running_since = time.time()
                self._start_follower(flight)
            self._report(flight)
            timeout = flight.launch.timeout
            if (timeout and flight.running_since is not None and flight.stopping is None
                    and time.time() - flight.running_since > timeout):
                flight.stopping = "timeout"
                self._call(self.templates.cancel, flight)
                changed = True
            flight.interval = self.templates.poll_s if changed else \
                min(flight.interval * 1.5, self.templates.max_poll_s)
            if flight.stopping is not None:
                flight.interval = self.templates.poll_s
            flight.next_poll = now + flight.interval
            return None
        return self._ended(flight, rule, groups, called.output)

    def _ended(self, flight: _Flight, rule: StateRule, groups: dict[str, str | None], output: str) -> Outcome:
        self._bring_home(flight)
        launch = flight.launch
        base = Outcome(launch=launch, exit_code=None, started=flight.running_since or flight.submitted,
                       ended=time.time(), node=flight.node, job_id=flight.job_id, job_state=rule.state.upper())
        self._place(Placement(launch.attempt_id, flight.job_id or "", rule.state.upper(),
                                          groups.get("reason"), node=flight.node))
        said = groups.get("reason") or _tail(output)
        exit_text, signal_text = groups.get("exit") or "", groups.get("signal") or ""
        exit_code = int(exit_text) if exit_text.lstrip("-").isdigit() else None
        signum = int(signal_text) if signal_text.isdigit() else 0
        job = f"job {flight.job_id}"
        if flight.stopping == "timeout" or rule.state == "timeout":
            base.timed_out = True
            return base
        if flight.stopping == "interrupt":
            base.interrupted = True
            return base
        if rule.state == "completed":
            base.exit_code = exit_code if exit_code is not None else 0
            return base
        if rule.state == "cancelled":
            base.error, base.failure_class = f"{job} was cancelled: {said}", CANCELLED
            return base
        if rule.state == "lost":
            base.error, base.failure_class = f"the launcher lost {job}: {said}", NODE_DIED
            return base
        # failed
        if rule.failure_class is None and signum:
            base.signal = signum
            return base
        if rule.failure_class is not None or exit_code is None or exit_code == 0:
            base.error = f"{job} failed: {said}"
            base.failure_class = rule.failure_class or EXIT_CODE
            return base
        base.exit_code = exit_code
        return base

    def _report(self, flight: _Flight) -> None:
        key = (flight.state, flight.reason, flight.node)
        if key == flight.reported or flight.job_id is None:
            return
        flight.reported = key
        running = flight.state == "RUNNING"
        self._place(Placement(flight.launch.attempt_id, flight.job_id, flight.state, flight.reason,
                                          node=flight.node if running else None,
                                          started=flight.running_since if running else None))

    def _match(self, output: str) -> tuple[re.Match[str], StateRule] | None:
        for pattern, rule in self._rules:
            m = pattern.search(output)
            if m is not None:
                return m, rule
        return None

    # -- the job's files -----------------------------------------------------------

    def _bring_home(self, flight: _Flight) -> None:
        """The job's log and folder, then its cleanup; what failed is a warning, the run's own
        files (its metrics) then say what is missing."""
        t = self.templates
        if t.follow_logs:
            self._stop_follower(flight, wait_s=10.0)
        elif t.logs is not None:
            self._write_log(t.logs, flight)
        if t.copy_back is not None:
            called = self._call(t.copy_back, flight)
            if not called.ok:
                self._warn(f"job {flight.job_id}: launcher.copy failed: {_tail(called.output)}")
        # The cleanup (and the journal's entry) wait for the outcome to be recorded: a job removed
        # before that would, after a kill of benchlab, be found gone and run again.
        with self._lock:
            self._to_clean.append(flight)

    def _clean(self, flights: list[_Flight]) -> None:
        for flight in flights:
            if self.templates.cleanup is not None and flight.job_id is not None:
                self._call(self.templates.cleanup, flight)
            (self.journal / f"{flight.name}.json").unlink(missing_ok=True)

    def _clean_recorded(self) -> None:
        """Clean up after the jobs whose outcomes ``wait`` returned before this call: the caller has
        recorded them (the sweep records each outcome before it waits again). In a thread of its own,
        off the caller's path."""
        with self._lock:
            done = [f for f in self._to_clean if f.returned]
            self._to_clean = [f for f in self._to_clean if not f.returned]
        if done:
            threading.Thread(target=self._clean, args=(done,), daemon=True, name="launcher-cleanup").start()

    def _start_follower(self, flight: _Flight) -> None:
        if not self.templates.follow_logs or self.templates.logs is None or flight.follower is not None:
            return
        try:
            with open(flight.launch.log_path, "ab") as log:
                flight.follower = subprocess.Popen(["/bin/sh", "-c", fill(self.templates.logs, self._values(flight))],
                                                   stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                                   env=_env(flight.launch), start_new_session=True)
        except OSError as exc:
            self._warn(f"job {flight.job_id}: launcher.logs could not start: {exc}")

    @staticmethod
    def _stop_follower(flight: _Flight, wait_s: float = 0.0) -> None:
        proc = flight.follower
        if proc is None:
            return
        try:
            proc.wait(wait_s)
        except subprocess.TimeoutExpired:
            proc.terminate()
            proc.wait()
        flight.follower = None

    def _write_env_file(self, launch: Launch) -> None:
        from benchlab.secrets import ENV_PREFIX

        # _env's rule holds for the job too: a container or remote process carrying the attempt's key
        # would be killed as a leftover by the next sweep's recovery on this machine.
        lines = [f"{k}={v}" for k, v in _env(launch).items()
                 if self._base_env.get(k) != v and not k.startswith(ENV_PREFIX) and "\n" not in v]
        (launch.run_dir / ENV_FILE).write_text("".join(line + "\n" for line in lines))

    # -- the journal: job ids between the submit and the ledger ----------------------

    def _write_journal(self, name: str, job_id: str) -> None:
        self.journal.mkdir(parents=True, exist_ok=True)
        path = self.journal / f"{name}.json"
        tmp = path.with_suffix(".tmp")
        # Written and renamed, not synced: what it guards against is benchlab's death, after which the
        # kernel still holds the file; a machine's crash is what `find` is for.
        with open(tmp, "w") as fh:
            json.dump({"job_id": job_id, "submitted": time.time()}, fh)
        os.replace(tmp, path)

    def _journal_id(self, name: str) -> str | None:
        try:
            data = json.loads((self.journal / f"{name}.json").read_text())
        except (OSError, ValueError):
            return None
        job_id = data.get("job_id") if isinstance(data, dict) else None
        return str(job_id) if job_id else None

    def _find(self, name: str, launch: Launch) -> str | None:
        if self.templates.find is None:
            return None
        called = self._call(self.templates.find, _Flight(launch, name, time.time()))
        text = called.output.strip() if called.ok else ""
        return text.split()[0] if text else None

    # -- running a template ---------------------------------------------------------

    def _values(self, flight: _Flight) -> dict[str, str]:
        launch = flight.launch
        r = launch.run.resources
        timeout = launch.timeout
        values = {
            "name": flight.name, "run_id": launch.run.run_id, "run_dir": str(launch.run_dir),
            "results_dir": str(self.results_dir), "command": launch.command, "cwd": launch.cwd,
            "log": str(launch.log_path), "env_file": str(launch.run_dir / ENV_FILE),
            "job_id_file": str(launch.run_dir / JOB_ID_FILE), "attempt": str(launch.number),
            "gpus": str(math.ceil(r.gpus)), "cpus": str(max(1, math.ceil(r.cpus))),
            "memory_mb": str(math.ceil(r.memory * 1024)) if r.memory else "0",
            "timeout_s": str(math.ceil(timeout)) if timeout else "0",
            "timeout_min": str(math.ceil(timeout / 60)) if timeout else "0",
        }
        if flight.job_id is not None:
            values["job_id"] = flight.job_id
        return values

    def _write_log(self, template: str, flight: _Flight) -> None:
        """Run the ``logs`` template with its output going straight into the run's log: never held
        in memory, and kept within ``log_cap_mb`` on disk by the sweep as any run's log is."""
        try:
            with open(flight.launch.log_path, "wb") as log:
                subprocess.run(["/bin/sh", "-c", fill(template, self._values(flight))], stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=_env(flight.launch),
                                   cwd=flight.launch.cwd if os.path.isdir(flight.launch.cwd) else None,
                                   timeout=self.templates.command_timeout_s)
        except subprocess.TimeoutExpired:
            self._warn(f"job {flight.job_id}: launcher.logs ran past {self.templates.command_timeout_s:g}s; "
                       "its log holds what it printed until then")
        except OSError as exc:
            self._warn(f"job {flight.job_id}: its log could not be written: {exc}")

    def _call(self, template: str, flight: _Flight) -> _Called:
        """Run ``template`` filled for ``flight`` with the attempt's environment; stdout and stderr together."""
        command = fill(template, self._values(flight))
        try:
            p = subprocess.run(["/bin/sh", "-c", command], capture_output=True, env=_env(flight.launch),
                               cwd=flight.launch.cwd if os.path.isdir(flight.launch.cwd) else None,
                               timeout=self.templates.command_timeout_s, stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired as exc:
            return _Called(None, _text(exc.stdout) + _text(exc.stderr) +
                           f"\n(ran past {self.templates.command_timeout_s:g}s)")
        except OSError as exc:
            return _Called(None, str(exc))
        return _Called(p.returncode, _text(p.stdout) + _text(p.stderr))


def _env(launch: Launch) -> dict[str, str]:
    """The attempt's environment for the launcher's commands, less the key that marks this machine's
    processes of an attempt: a later sweep kills those as leftovers, and a job (or the launcher's
    client, which may hand its environment on to the job, as sbatch does) outlives its sweep on purpose."""
    return {k: v for k, v in launch.env.items() if k != ATTEMPT_KEY_ENV}


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _tail(text: str, limit: int = 300) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return (" | ".join(lines[-3:]) if lines else "")[:limit]
