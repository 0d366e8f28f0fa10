"""`benchlab serve` (the evaluation server) and `benchlab eval` (one evaluation, as a run command)."""

from __future__ import annotations

import os
from pathlib import Path

import typer

from benchlab.cli.app import app, err_console
from benchlab.errors import UsageError
from benchlab.names.run_files import METRICS_FILE


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@app.command()
def serve(
    host: str = typer.Option(
        "127.0.0.1", help="Address to bind; anything but loopback needs a token."
    ),
    port: int = typer.Option(9050, help="Port to listen on."),
    config: Path | None = typer.Option(
        None, "--config", "-c", help="Server config YAML (default: the shipped sample)."
    ),
    no_auth: bool = typer.Option(
        False, "--no-auth", help="Accept requests without a bearer token (loopback only)."
    ),
    state_dir: Path | None = typer.Option(
        None, help="Where jobs.sqlite and job outputs go (overrides the config)."
    ),
    log_level: str = typer.Option("info", help="uvicorn log level."),
    max_concurrent_requests: int | None = typer.Option(
        None, "--max-concurrent-requests", min=1,
        help="Requests in flight to the model endpoint (NeMo-Skills' flag; overrides model.concurrency).",
    ),
    openai_model_name: str | None = typer.Option(
        None, "--openai-model-name",
        help="The 'model' field of each request to the router (NeMo-Skills' flag; overrides model.name).",
    ),
) -> None:
    """Serve evaluation requests (POST /evaluate) from a trainer such as slime's eval delegate."""
    from benchlab.names.extras import require

    require("serve", "benchlab serve")
    from benchlab.evaluate.config import load_config

    cfg = load_config(config)
    if state_dir is not None:
        cfg.server.state_dir = state_dir
    if max_concurrent_requests is not None:
        cfg.model.concurrency = max_concurrent_requests
    if openai_model_name is not None:
        cfg.model.name = openai_model_name
    token = os.environ.get(cfg.server.token_env) or None
    if token is not None and not no_auth:
        from benchlab.evaluate.server import check_token

        check_token(token, f"${cfg.server.token_env}")  # refused before anything listens
    if no_auth:
        if not _is_loopback(host):
            raise UsageError(
                f"--no-auth is only allowed on a loopback address, not {host}; "
                f"set a token in ${cfg.server.token_env} instead"
            )
        token = None
    elif token is None:
        if not _is_loopback(host):
            raise UsageError(
                f"refusing to listen on {host} without a token: set ${cfg.server.token_env} "
                "(clients send 'Authorization: Bearer <token>')"
            )
        raise UsageError(
            f"no token: set ${cfg.server.token_env}, or pass --no-auth to serve on {host} without one"
        )

    import logging

    from benchlab.evaluate.guard import build_server
    from benchlab.evaluate.server import create_app

    logging.basicConfig(
        level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    from benchlab.ui.hosts import served_hosts

    # Without a token, a web page whose name was made to resolve here (DNS rebinding) must not reach it.
    application = create_app(cfg, token=token, allowed_hosts=served_hosts(host) if token is None else None)
    for warning in application.state.bench.warnings:
        err_console.print(f"[bold yellow]warning:[/] {warning}")
    err_console.print(
        f"benchlab evaluation server on http://{host}:{port} "
        f"({len(cfg.benchmarks)} benchmarks; API docs at /docs, with the token)"
    )
    build_server(application, cfg, host, port, log_level).run()


@app.command("eval")
def eval_(
    model_url: str = typer.Option(
        ...,
        "--model-url",
        help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:30000 (with or without /v1).",
    ),
    model: str = typer.Option("default", "--model", help="Model name sent in each request."),
    benchmarks: str = typer.Option(
        ..., "--benchmarks", "-b", help="Comma-separated benchmark names from the config."
    ),
    out: Path | None = typer.Option(
        None, "--out", help="Where metrics.json goes (default: $BENCHLAB_RUN_DIR, else .)."
    ),
    config: Path | None = typer.Option(
        None, "--config", "-c", help="Config YAML (default: the shipped sample)."
    ),
    n_samples: int | None = typer.Option(
        None, "--n-samples", min=1, help="Samples per prompt (default: each benchmark's)."
    ),
    temperature: float | None = typer.Option(
        None, min=0.0, help="Sampling temperature (default: each benchmark's)."
    ),
    max_response_len: int | None = typer.Option(
        None, min=1, help="max_tokens per response (default: each benchmark's)."
    ),
    concurrency: int | None = typer.Option(
        None, min=1, help="Requests in flight (default: the config's model.concurrency)."
    ),
    api_key_env: str = typer.Option(
        "OPENAI_API_KEY", help="Environment variable with the endpoint's API key, if any."
    ),
) -> None:
    """Evaluate a model once and write metrics.json ({"<benchmark>/<mode>/<metric>": value})."""
    import asyncio
    import json

    from benchlab.names.extras import require

    require("serve", "benchlab eval", modules=("httpx", "math_verify"))

    from benchlab.evaluate.config import load_config
    from benchlab.evaluate.oneshot import run_once

    cfg = load_config(config)
    names = list(dict.fromkeys(b.strip() for b in benchmarks.split(",") if b.strip()))
    unknown = [n for n in names if n not in cfg.benchmarks]
    if not names or unknown:
        raise UsageError(
            f"unknown benchmark(s) {', '.join(unknown) or '(none given)'}; "
            f"known: {', '.join(sorted(cfg.benchmarks))}"
        )
    if not model_url.startswith(("http://", "https://")):
        raise UsageError(f"--model-url must start with http:// or https://, got {model_url!r}")
    out_dir = out or Path(os.environ.get("BENCHLAB_RUN_DIR") or ".")
    out_dir.mkdir(parents=True, exist_ok=True)
    api_key = os.environ.get(api_key_env)
    result = asyncio.run(
        run_once(
            cfg,
            names,
            model_url,
            model,
            out_dir=out_dir,
            n_samples=n_samples,
            temperature=temperature,
            max_response_len=max_response_len,
            concurrency=concurrency,
            api_key=api_key,
            log=lambda line: err_console.print(line, markup=False),
        )
    )
    if result.warning:
        err_console.print(f"[bold yellow]warning:[/] {result.warning}")
    err_console.print(f"{result.samples_scored} of {result.samples_asked} samples scored")
    err_console.print(f"wrote {out_dir / METRICS_FILE}")
    typer.echo(json.dumps(json.loads((out_dir / METRICS_FILE).read_text()), indent=2))
