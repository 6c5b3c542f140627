"""studio-cli's commands. Every failure is a CliError with a message saying what to do; main() prints it."""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import httpx

DEFAULT_CONFIG = Path(os.environ.get("XDG_CONFIG_HOME", Path.home() / ".config")) / "kstudio" / "cli.json"
FAST_P = ("0", "0.5", "0.8", "1", "1.5", "2")


class CliError(Exception):
    """Something the user can fix; printed without a traceback."""


class Api:
    """The studio's /api/v1/ with a token; an error answer becomes a CliError carrying its message."""

    def __init__(self, url: str, token: str, timeout: float = 300.0) -> None:
        self.http = httpx.Client(base_url=url.rstrip("/") + "/api/v1/", timeout=timeout,
                                 headers={"Authorization": f"Token {token}"})

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TransportError as exc:
            raise CliError(f"Cannot reach the studio at {self.http.base_url} ({exc}); check the URL given to login.") from None
        if response.status_code >= 400:
            try:
                error = response.json()["error"]
                message = error["message"] + "".join(f"\n  {i.get('line')}:{i.get('col')} {i.get('message')}"
                                                     for i in error.get("issues", []))
            except (ValueError, KeyError, TypeError):
                message = response.text[:500]
            raise CliError(f"{method} {path}: {response.status_code}: {message}")
        return response

    def get(self, path: str, **params: Any) -> Any:
        return self.call("GET", path, params=params).json()

    def post(self, path: str, body: dict[str, Any] | None = None) -> Any:
        return self.call("POST", path, json=body or {}).json()


def load_config(path: Path) -> dict[str, str]:
    if not path.exists():
        raise CliError(f"Not logged in: run `studio-cli login --url URL --token TOKEN` first (no {path}).")
    return json.loads(path.read_text())


def api_from(args: argparse.Namespace) -> Api:
    config = load_config(args.config)
    return Api(config["url"], config["token"])


def cmd_login(args: argparse.Namespace) -> int:
    api = Api(args.url, args.token)
    api.get("endpoints/")  # proves the URL and the token
    args.config.parent.mkdir(parents=True, exist_ok=True)
    args.config.write_text(json.dumps({"url": args.url.rstrip("/"), "token": args.token}))
    args.config.chmod(0o600)  # the token is a password
    print(f"Logged in to {args.url}; saved to {args.config}.")
    return 0


def python_files(paths: list[Path]) -> list[Path]:
    files: list[Path] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.glob("*.py") if p.name != "__init__.py")
        elif path.is_file():
            files.append(path)
        else:
            raise CliError(f"{path} does not exist.")
    if not files:
        raise CliError("No .py files to submit.")
    return files


def endpoint_for(api: Api, policy: str) -> str:
    endpoints = api.get("endpoints/", page_size=200)["results"]
    for endpoint in endpoints:
        if endpoint["name"] == policy or (policy == "builtin" and endpoint["kind"] == "builtin"):
            return endpoint["name"]
    names = ", ".join(e["name"] for e in endpoints) or "none"
    raise CliError(f"No enabled endpoint is called {policy!r}; choose one of: {names} (or 'builtin').")


def problem_id(api: Api, path: Path) -> int:
    """The user's problem with this exact source, made now if there is none."""
    source = path.read_text(encoding="utf-8")
    digest = hashlib.sha256(source.encode("utf-8")).hexdigest()
    found = api.get("problems/", source_hash=digest, mine="true")["results"]
    if found:
        return found[0]["id"]
    return api.post("problems/", {"name": path.name, "source": source})["id"]


def cmd_submit(args: argparse.Namespace) -> int:
    api = api_from(args)
    files = python_files(args.paths)
    endpoint = endpoint_for(api, args.policy)
    ids, skipped = [], []
    for number, path in enumerate(files, 1):
        # Each new problem is run once in the studio's sandbox before it is stored: say so, file by file.
        print(f"[{number}/{len(files)}] {path.name}: checking", file=sys.stderr, flush=True)
        try:
            ids.append(problem_id(api, path))
        except CliError as exc:
            skipped.append(f"{path.name}: {exc}")
    for line in skipped:
        print(f"skipped {line}", file=sys.stderr)
    if not ids:
        raise CliError("No file was accepted as a problem; nothing was submitted.")
    budgets = {k: v for k, v in {"turns": args.turns, "tokens": args.tokens}.items() if v is not None}
    batch = api.post("batches/", {"name": args.name or ", ".join(p.name for p in args.paths)[:200], "problems": ids,
                                  "endpoint": endpoint, "budgets": budgets, "device": args.device or ""})
    print(f"Batch {batch['id']}: {len(ids)} problems with '{endpoint}' on {batch['device']}.")
    if not args.wait:
        print(f"Follow it with `studio-cli report {batch['id']} --wait`.")
        return 0
    return show_report(api, batch["id"], wait=True, csv_path=args.csv, poll=args.poll)


def wait_for(api: Api, batch_id: int, poll: float) -> None:
    from tqdm import tqdm

    batch = api.get(f"batches/{batch_id}/")
    seen: dict[int, str] = {}
    with tqdm(total=batch["progress"]["total"], desc=f"batch {batch_id}", unit="run", file=sys.stderr) as bar:
        while True:
            for run in batch.get("runs", []):
                state = stage_line(run)
                if seen.get(run["run"]) != state:  # a line per change: from the first poll, not only at the end
                    seen[run["run"]] = state
                    bar.write(f"{run.get('problem_name', run['problem'])} (run {run['run']}): {state}", file=sys.stderr)
            bar.update(batch["progress"]["done"] - bar.n)
            if batch["status"] != "running":
                return
            time.sleep(poll)
            batch = api.get(f"batches/{batch_id}/")


def stage_line(run: dict[str, Any]) -> str:
    if run.get("status") in ("queued", "running"):
        return f"{run['status']} · stage {run.get('stage', '?')} · {run.get('candidates', 0)} candidates"
    return f"{run.get('status', '?')} · {run.get('candidates', 0)} candidates"


def show_report(api: Api, batch_id: int, wait: bool, csv_path: Path | None, poll: float) -> int:
    if wait:
        wait_for(api, batch_id, poll)
    report = api.get(f"batches/{batch_id}/report/")
    print(table(report))
    if csv_path:
        csv_path.write_bytes(api.call("GET", f"batches/{batch_id}/report/", params={"format": "csv"}).content)
        print(f"Wrote {csv_path}.")
    return 0


def _x(value: float | None) -> str:
    return f"{value:.2f}x" if value is not None else "-"


def table(report: dict[str, Any]) -> str:
    """The report as a paper's table: one line per problem, then the summary figures."""
    head = ("problem", "run", "verdict", "correct", "vs eager", "vs compile", "kernel")
    lines = [(r["problem"], str(r["run_id"]), r["verdict"], "yes" if r["correct"] else "no", _x(r["speedup_vs_eager"]),
              _x(r["speedup_vs_compile"]), str(r["kernel_id"] or "-")) for r in report["rows"]]
    widths = [max(len(row[i]) for row in [head, *lines]) for i in range(len(head))]
    text = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in [head, *lines]]
    s = report["summary"]
    text += ["", f"batch {report['batch']} ({report['status']}): {s['correct']}/{s['problems']} correct "
                 f"(correctness rate {s['correctness_rate']:.1%})",
             "fast_p: " + "  ".join(f"fast_{p}={s['fast_p'][p]:.2f}" for p in FAST_P),
             f"geomean speedup (correct kernels): vs eager {_x(s['geomean_speedup_vs_eager'])}, "
             f"vs torch.compile {_x(s['geomean_speedup_vs_compile'])}"]
    return "\n".join(text)


def cmd_report(args: argparse.Namespace) -> int:
    return show_report(api_from(args), args.batch, wait=args.wait, csv_path=args.csv, poll=args.poll)


def cmd_download(args: argparse.Namespace) -> int:
    api = api_from(args)
    response = api.call("GET", f"kernels/{args.kernel}/download/")
    out = args.output or Path(response.headers.get("content-disposition", "").partition('filename="')[2].rstrip('"')
                              or f"kernel_{args.kernel}.py")
    out.write_bytes(response.content)
    print(f"Wrote {out}.")
    return 0


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="studio-cli", description="Kernel Studio from the terminal.")
    top.add_argument("--config", type=Path, default=DEFAULT_CONFIG, help=f"where login keeps the URL and token "
                                                                          f"(default {DEFAULT_CONFIG})")
    commands = top.add_subparsers(dest="command", required=True)

    login = commands.add_parser("login", help="check and store the studio's URL and your API token")
    login.add_argument("--url", required=True, help="the studio's address, e.g. http://127.0.0.1:8000")
    login.add_argument("--token", required=True, help="from the studio's API token page (/accounts/tokens/)")
    login.set_defaults(run=cmd_login)

    submit = commands.add_parser("submit", help="submit problem files or folders as one batch")
    submit.add_argument("paths", nargs="+", type=Path, help=".py files in KernelBench's format, or folders of them")
    submit.add_argument("--policy", default="builtin", help="an endpoint's name, or 'builtin' (default)")
    submit.add_argument("--device", choices=["cpu", "cuda"], help="where candidates run (default: the studio's)")
    submit.add_argument("--turns", type=int, help="model turns per problem")
    submit.add_argument("--tokens", type=int, help="tokens per problem")
    submit.add_argument("--name", help="the batch's name")
    submit.add_argument("--wait", action="store_true", help="wait with a progress bar, then print the table")
    submit.add_argument("--csv", type=Path, help="also write the table as CSV here (with --wait)")
    submit.add_argument("--poll", type=float, default=2.0, help="seconds between progress checks")
    submit.set_defaults(run=cmd_submit)

    report = commands.add_parser("report", help="print a batch's results table")
    report.add_argument("batch", type=int)
    report.add_argument("--wait", action="store_true", help="wait for the batch to finish first")
    report.add_argument("--csv", type=Path, help="also write the table as CSV here")
    report.add_argument("--poll", type=float, default=2.0)
    report.set_defaults(run=cmd_report)

    download = commands.add_parser("download", help="download a kernel as one module")
    download.add_argument("kernel", type=int)
    download.add_argument("-o", "--output", type=Path, help="the file to write (default: the studio's name)")
    download.set_defaults(run=cmd_download)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.run(args)
    except CliError as exc:
        print(f"studio-cli: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
