"""A SageMaker training job per benchlab run, for the SageMaker recipe of docs/launchers.md.

    python sagemaker_job.py submit NAME --run-dir DIR --cwd DIR --env-file FILE --image IMAGE
                                --role ROLE --instance-type TYPE [--output URI] [--code URI] [--max-run S]
    python sagemaker_job.py find|status|logs|cancel|copy NAME --run-dir DIR --instance-type TYPE

Run it with a Python that has the SageMaker Python SDK 2.x (``pip install 'sagemaker[local]>=2.200,<3'``).
The instance type picks the session: ``local`` (or ``local_gpu``) is the SDK's local mode, a
``LocalSession`` that runs the image with ``docker compose`` on this machine and needs no AWS
account; any other (``ml.g5.2xlarge``) is a ``Session`` on AWS with the caller's credentials.

On AWS the job lives in the service: ``status`` prints ``describe-training-job``'s status,
secondary status and failure reason, ``logs`` the job's CloudWatch stream (the SDK's
``logs_for_job``), ``cancel`` calls ``stop-training-job``, ``copy`` unpacks the job's
``model.tar.gz`` from S3 into the run's folder.

In local mode the SDK runs a job inside the Python process that submitted it (``fit`` returns when
the container has exited, whatever ``wait`` says) and keeps no state another process can read.
So ``submit`` starts that process detached and returns; it writes, under
``RUN_DIR/.sagemaker/NAME/``, what ``describe-training-job`` would say of the job (``InProgress``
while ``fit`` runs, then ``Completed``, ``Failed`` with the reason, or ``Stopped`` once cancelled),
the container's output (what CloudWatch would hold) and the job's output path. The same status
rules then read both.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path
from typing import Any

# The SDK's telemetry is off: it would call AWS from a machine that may not reach it.
SDK_CONFIG = {"SchemaVersion": "1.0", "SageMaker": {"PythonSDK": {"Modules": {"TelemetryOptOut": True}}}}
ENDED = ("Completed", "Failed", "Stopped")
# docker compose writes each container line as "<container> | <line>", coloured.
COMPOSE_LINE = re.compile(r"^\S+-algo-\d+-\w+\s+\|\s?(.*)$")
ANSI = re.compile(r"\x1b\[[0-9;]*m")


def is_local(instance_type: str) -> bool:
    return instance_type in ("local", "local_gpu")


def state_dir(run_dir: str, name: str) -> Path:
    return Path(run_dir) / ".sagemaker" / name


def write_json(path: Path, data: dict[str, Any]) -> None:
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, default=str))
    os.replace(tmp, path)


def sagemaker_client(region: str | None) -> Any:
    import boto3

    return boto3.client("sagemaker", region_name=region)


# -- submit ---------------------------------------------------------------------


def job_environment(env_file: str) -> dict[str, str]:
    """The run's variables for the job, its folder moved to the one SageMaker packs up."""
    env = {}
    for line in Path(env_file).read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep:
            env[key] = value
    env["BENCHLAB_RUN_DIR"] = "/opt/ml/model"
    # It names this machine's ledger, which marks this machine's processes of an attempt; a job is not one.
    env.pop("BENCHLAB_ATTEMPT_KEY", None)
    return env


def estimator(a: argparse.Namespace, session: Any, output: str) -> Any:
    from sagemaker.estimator import Estimator

    env = job_environment(a.env_file)
    env["BENCHLAB_COMMAND"] = a.command
    return Estimator(image_uri=a.image, role=a.role, instance_count=1, instance_type=a.instance_type,
                     output_path=output, max_run=a.max_run or 24 * 3600, environment=env,
                     sagemaker_session=session)


def submit(a: argparse.Namespace) -> None:
    if not is_local(a.instance_type):
        import sagemaker

        if not a.output.startswith("s3://"):
            sys.exit(f"--output must be an s3:// path on AWS, got {a.output!r}")
        session = sagemaker.Session(sagemaker_config=SDK_CONFIG)
        est = estimator(a, session, a.output)
        est.fit({"code": a.code} if a.code else None, job_name=a.name, wait=False)
        print(f"submitted {a.name}")
        return
    here = state_dir(a.run_dir, a.name)
    here.mkdir(parents=True, exist_ok=False)  # a second job of the same name is refused
    write_json(here / "describe.json", {"TrainingJobName": a.name, "TrainingJobStatus": "InProgress",
                                        "SecondaryStatus": "Starting"})
    with open(here / "job.log", "ab") as out, open(here / "sdk.log", "ab") as err:
        runner = subprocess.Popen([sys.executable, os.path.abspath(__file__), "_run", *sys.argv[2:]],
                                  stdin=subprocess.DEVNULL, stdout=out, stderr=err, start_new_session=True,
                                  env={**os.environ, "PYTHONUNBUFFERED": "1"})
    (here / "runner.pid").write_text(str(runner.pid))
    print(f"submitted {a.name}")


def ensure_local_network() -> None:
    """Create local mode's one Docker network before ``fit``, once for all the jobs of this machine.

    Every compose file of local mode names the network ``sagemaker-local``; jobs started together
    each try to create it, and the daemon can then fail one ``up`` or make two networks of that
    name. A lock around the look-and-create makes it one network whatever the concurrency.
    """
    import fcntl
    import hashlib

    host = hashlib.sha256(os.environ.get("DOCKER_HOST", "").encode()).hexdigest()[:12]
    with open(Path(tempfile.gettempdir()) / f"benchlab-sagemaker-network-{host}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        names = subprocess.run(["docker", "network", "ls", "--filter", "name=^sagemaker-local$",
                                "--format", "{{.Name}}"], capture_output=True, text=True, timeout=60)
        if names.returncode == 0 and not names.stdout.split():
            subprocess.run(["docker", "network", "create", "sagemaker-local"], stdout=subprocess.DEVNULL,
                           stderr=sys.stderr, timeout=60)


class JobStopped(Exception):
    """The job was cancelled while ``fit`` ran."""


def run_locally(a: argparse.Namespace) -> None:
    """The detached process that holds a local-mode job: ``fit`` runs here until the container exits."""
    from sagemaker.local import LocalSession
    from sagemaker.local.image import _SageMakerContainer

    here = state_dir(a.run_dir, a.name)
    root = here / "containers"
    root.mkdir()
    stopping = False

    def compose(*args: str) -> None:
        for f in root.glob("*/docker-compose.yaml"):
            subprocess.run([*_SageMakerContainer._get_compose_cmd_prefix(), "-f", str(f), *args],
                           stdout=sys.stderr, stderr=sys.stderr, timeout=120)

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        if stopping:
            return
        stopping = True
        write_json(here / "describe.json", {"TrainingJobName": a.name, "TrainingJobStatus": "Stopping",
                                            "SecondaryStatus": "Stopping"})
        raise JobStopped()

    output = here / "output"
    described: dict[str, Any] = {"TrainingJobName": a.name, "TrainingJobStatus": "InProgress",
                                 "SecondaryStatus": "Training"}
    write_json(here / "describe.json", described)
    signal.signal(signal.SIGTERM, stop)
    try:
        ensure_local_network()
        session = LocalSession(sagemaker_config=SDK_CONFIG)
        session.config = {"local": {"local_code": True, "container_root": str(root)}}
        estimator(a, session, f"file://{output}").fit({"code": a.code or f"file://{a.cwd}"}, job_name=a.name,
                                                      wait=False)
        described = session.sagemaker_client.describe_training_job(a.name)
        described["SecondaryStatus"] = described["TrainingJobStatus"]
    except Exception as exc:  # the SDK's error is the job's failure reason
        described = {**described, "TrainingJobStatus": "Failed", "SecondaryStatus": "Failed",
                     "FailureReason": output_failure(output) or f"{type(exc).__name__}: {exc}"}
        if (output / "model.tar.gz").exists():  # local mode packs the folder of a failed job too
            described["ModelArtifacts"] = {"S3ModelArtifacts": f"file://{output / 'model.tar.gz'}"}
    finally:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        if stopping:
            # As StopTrainingJob does: SIGTERM, then SIGKILL after a grace (120 s on AWS, 2 s here).
            compose("stop", "-t", "2")
        compose("rm", "-f", "-s")
    if stopping:
        described.update(TrainingJobStatus="Stopped", SecondaryStatus="Stopped")
        described.pop("FailureReason", None)
    write_json(here / "describe.json", described)


def output_failure(output: Path) -> str | None:
    """What the container wrote to /opt/ml/output/failure (SageMaker's FailureReason), if anything."""
    packed = output / "output.tar.gz"
    if not packed.exists():
        return None
    with tarfile.open(packed) as tar:
        try:
            member = tar.extractfile("failure")
        except KeyError:
            return None
        return member.read().decode(errors="replace").strip() if member else None


# -- the job once submitted ---------------------------------------------------------


def describe(a: argparse.Namespace) -> dict[str, Any] | None:
    """``describe-training-job``'s answer, None when there is no such job."""
    if not is_local(a.instance_type):
        from botocore.exceptions import ClientError

        try:
            return sagemaker_client(a.region).describe_training_job(TrainingJobName=a.name)
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ValidationException":
                return None
            raise
    here = state_dir(a.run_dir, a.name)
    try:
        described = json.loads((here / "describe.json").read_text())
    except FileNotFoundError:
        return None
    if described["TrainingJobStatus"] not in ENDED and not alive(here):
        return {**described, "TrainingJobStatus": "Failed", "SecondaryStatus": "Failed",
                "FailureReason": "the local-mode process that ran the job is gone"}
    return described


def alive(here: Path) -> bool:
    """Whether the process holding a local-mode job still runs (a zombie does not)."""
    try:
        pid = int((here / "runner.pid").read_text())
    except FileNotFoundError:
        return True  # submit is writing it
    except ValueError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def status(a: argparse.Namespace) -> None:
    d = describe(a)
    if d is None:
        print(f"NoSuchJob\t-\tno training job named {a.name}")
        return
    reason = " ".join(str(d.get("FailureReason") or "-").split())
    print(f"{d['TrainingJobStatus']}\t{d.get('SecondaryStatus', '-')}\t{reason}")


def find(a: argparse.Namespace) -> None:
    if is_local(a.instance_type):
        if state_dir(a.run_dir, a.name).exists():
            print(a.name)
        return
    listed = sagemaker_client(a.region).list_training_jobs(NameContains=a.name)["TrainingJobSummaries"]
    print(*[j["TrainingJobName"] for j in listed if j["TrainingJobName"] == a.name])


def logs(a: argparse.Namespace) -> None:
    if not is_local(a.instance_type):
        import sagemaker

        sagemaker.Session(sagemaker_config=SDK_CONFIG).logs_for_job(a.name, wait=False)
        return
    here = state_dir(a.run_dir, a.name)
    lines = [ANSI.sub("", ln).rstrip("\r") for ln in (here / "job.log").read_text(errors="replace").splitlines()]
    said = [m.group(1) for m in map(COMPOSE_LINE.match, lines) if m]
    # No container line: the job never started, and the SDK's own words say why.
    print("\n".join(said) if said else (here / "sdk.log").read_text(errors="replace")[-4000:])


def cancel(a: argparse.Namespace) -> None:
    if not is_local(a.instance_type):
        sagemaker_client(a.region).stop_training_job(TrainingJobName=a.name)
        return
    try:
        os.kill(int((state_dir(a.run_dir, a.name) / "runner.pid").read_text()), signal.SIGTERM)
    except (OSError, ValueError):
        pass  # it has ended, or never started


def copy(a: argparse.Namespace) -> None:
    """Unpack the job's model.tar.gz (the run's folder as the job left it) into the run's folder."""
    d = describe(a) or {}
    uri = (d.get("ModelArtifacts") or {}).get("S3ModelArtifacts")
    if not uri:
        said = f"job {a.name} has no model artifacts ({d.get('TrainingJobStatus', 'no such job')})"
        if d.get("TrainingJobStatus") == "Completed":
            sys.exit(said)
        print(said)  # a job that did not complete need not have any: nothing to bring home
        return
    with tempfile.TemporaryDirectory() as tmp:
        if uri.startswith("s3://"):
            import boto3

            bucket, _, key = uri[len("s3://"):].partition("/")
            packed = os.path.join(tmp, "model.tar.gz")
            boto3.client("s3", region_name=a.region).download_file(bucket, key, packed)
        else:
            packed = uri.removeprefix("file://")
        with tarfile.open(packed) as tar:
            tar.extractall(a.run_dir, filter="data")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("action", choices=["submit", "_run", "find", "status", "logs", "cancel", "copy"])
    p.add_argument("name")
    p.add_argument("--run-dir", required=True)
    p.add_argument("--instance-type", required=True)
    p.add_argument("--region", default=os.environ.get("AWS_REGION") or os.environ.get("AWS_DEFAULT_REGION"))
    p.add_argument("--cwd", default=".")
    p.add_argument("--env-file")
    p.add_argument("--command", default="")
    p.add_argument("--image")
    p.add_argument("--role")
    p.add_argument("--output", default="", help="s3://bucket/prefix on AWS; unused in local mode")
    p.add_argument("--code", default="", help="a channel with the benchmark's code (local mode: the --cwd folder)")
    p.add_argument("--max-run", type=int, default=0)
    a = p.parse_args()
    if is_local(a.instance_type):
        # Local mode needs a region name and nothing else of AWS: no credentials, no metadata service.
        a.region = a.region or "us-east-1"
        os.environ.setdefault("AWS_DEFAULT_REGION", a.region)
        os.environ.setdefault("AWS_EC2_METADATA_DISABLED", "true")
    os.environ.setdefault("SAGEMAKER_SUPPRESS_V2_WARNING", "1")
    {"submit": submit, "_run": run_locally, "find": find, "status": status, "logs": logs, "cancel": cancel,
     "copy": copy}[a.action](a)


if __name__ == "__main__":
    main()
