"""``python -m pipeline.review serve|invite|report [RUN_DIR]``: blind review of a finished run, the reviewers' personal
links, and the agreement report.

serve   draw (or reopen) the run's review sample and serve the page on 127.0.0.1 (``--host`` for another
        address, with a warning); answers go to ``RUN_DIR/review/answers.jsonl`` as they are given. Reviewers
        answer through their personal links (``--reviewers ann,bob`` prints them at start); ``--open`` lets anyone
        who reaches the page pick a name instead (e.g. one person on 127.0.0.1).
invite  print each reviewer's personal link (``--reviewer ann --reviewer bob``, ``--url`` the page's address) and
        the owner's link to the agreement page; the links hold keys made from the review folder's secret.
report  the agreement of every answer so far with the judge and between reviewers: printed, written to
        ``RUN_DIR/review/agreement.csv``, ``confusion.csv`` and ``labels.csv``, and logged to MLflow (a child run
        of the run's own, in the store ``--tracking-uri`` names or the project's own: never the one the run
        folder's ``tracking.json`` names).

RUN_DIR is a run folder, a folder's name or an MLflow run id (``make runs`` lists them), under ``--root`` (default
``paths.output_root`` as configured); it defaults to the latest finished run there. Errors a user can fix print their message and
exit with status 2.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from pipeline.contracts.errors import UserError

LOOPBACK = ("127.0.0.1", "localhost", "::1")


def _run_dir(value: str | None, root: str | None) -> Path:
    """The run folder ``value`` names (a folder, a folder's name or an MLflow run id; default the latest finished
    run) under ``root`` (default ``paths.output_root`` as configured)."""
    from pipeline.run.runs import find_run

    return find_run(value, _root(root))


def _root(root: str | None) -> Path:
    from pipeline.run.runs import configured_root

    return Path(root).resolve() if root else configured_root()


def _tracking_uri(args: argparse.Namespace, run_dir: Path) -> str | None:
    """Where the agreement is logged: ``--tracking-uri``, else the project's own store."""
    from pipeline.review.results import own_tracking_uri

    return args.tracking_uri or own_tracking_uri(run_dir, Path(args.root).resolve() if args.root else None)


def _count(least: int):
    """An argument's type: an integer of at least ``least`` (refused by argparse, with the usage, otherwise)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = least - 1
        if value < least:
            raise argparse.ArgumentTypeError(f"{text!r} is not an integer of at least {least}")
        return value

    return parse


def parser() -> argparse.ArgumentParser:
    from pipeline.review.sample import Strategy

    top = argparse.ArgumentParser(prog="python -m pipeline.review", description=__doc__.split("\n\n")[0])
    commands = top.add_subparsers(dest="command", required=True)
    for name, help_ in (
        ("serve", "serve the review page"),
        ("invite", "print the reviewers' personal links"),
        ("report", "the agreement report"),
    ):
        sub = commands.add_parser(name, help=help_)
        sub.add_argument(
            "run_dir",
            nargs="?",
            help="the run: its folder, its folder's name or its MLflow run id (default: the latest finished run)",
        )
        sub.add_argument(
            "--root", help="the output root the runs are under (default: paths.output_root as configured)"
        )
        sub.add_argument("--folder", help="the review folder (default: RUN_DIR/review)")
        sub.add_argument(
            "--tracking-uri",
            help="the MLflow store to log the agreement to (default: the project's own, tracking.tracking_uri or "
            "the local store under the output root; never the one a run folder names)",
        )
        if name == "invite":
            sub.add_argument(
                "--reviewer", action="append", required=True, help="a reviewer (repeat for more)"
            )
            sub.add_argument("--url", default="http://127.0.0.1:8765/", help="the review page's address")
        if name == "serve":
            sub.add_argument(
                "--reviewers", help="comma-separated reviewers whose personal links are printed at start"
            )
            sub.add_argument(
                "--open",
                action="store_true",
                help="an open review: anyone who reaches the page picks a name and answers (no personal links)",
            )
            sub.add_argument("--reviewer", help="open the page as this reviewer (else the page asks)")
            sub.add_argument(
                "--strategy",
                choices=[s.value for s in Strategy],
                help="how the sample is drawn (default stratified over judge confidence)",
            )
            sub.add_argument("--n", type=_count(1), help="comparisons in the sample (default 40)")
            sub.add_argument(
                "--seed", type=_count(0), help="the sample's and the slot orders' seed (default 0)"
            )
            sub.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
            sub.add_argument("--port", type=int, default=8765, help="port (default 8765; 0 picks a free one)")
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # no line per request on the console
    try:
        return _main(args)
    except UserError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2


def _main(args: argparse.Namespace) -> int:
    from pipeline.review import agreement as report
    from pipeline.review import results
    from pipeline.review.answers import AnswerLog, check_reviewer
    from pipeline.review.sample import Strategy, open_sample

    run_dir = _run_dir(args.run_dir, args.root)
    folder = Path(args.folder).resolve() if args.folder else run_dir / "review"
    if args.command == "invite":
        from pipeline.review.keys import personal_links, review_secret

        names = [check_reviewer(r) for r in args.reviewer]
        for name, link in personal_links(review_secret(folder), args.url, names).items():
            print(f"{name}: {link}")
        return 0
    if args.command == "report":
        if not (folder / "sample.json").exists():
            raise UserError(
                f"no review in {folder}: start one with `python -m pipeline.review serve {run_dir}`"
            )
        sample = open_sample(run_dir, folder)
        uri = _tracking_uri(args, run_dir)
        result = report.agreement(sample, AnswerLog(folder / "answers.jsonl").read())
        files = results.write(result)
        print(result.text())
        print(f"\ntables: {', '.join(str(p) for p in files)}")
        try:
            child = results.log_to_mlflow(result, files, uri)
        except Exception as exc:  # the tables are written; say why MLflow is not up to date
            print(f"error: could not log to MLflow: {exc}", file=sys.stderr)
            return 1
        print(f"MLflow: run {child} (a child of the run's own)" if child else "MLflow: the run has none")
        return 0

    from pipeline.review.app import ReviewState, serve

    if args.reviewer:
        check_reviewer(args.reviewer)
    invited = [check_reviewer(r.strip()) for r in (args.reviewers or "").split(",") if r.strip()]
    strategy = Strategy(args.strategy) if args.strategy else None
    sample = open_sample(run_dir, folder, strategy, args.n, args.seed)
    state = ReviewState.open(
        sample, args.reviewer, open_review=args.open, tracking_uri=_tracking_uri(args, run_dir)
    )
    if args.host not in LOOPBACK:
        print(
            f"warning: serving on {args.host}: anyone who can reach this machine can read the run's texts"
            + (" and answer as any reviewer (--open)" if args.open else ""),
            file=sys.stderr,
        )
    done = len(state.answers.read().rows)

    def ready(url: str) -> None:
        print(f"review: {url}", flush=True)
        print(
            f"  {sample.items.height} comparisons ({sample.spec.strategy.value}, seed {sample.spec.seed}) of "
            f"{sample.n_pairs} judged pairs; {done} answer(s) so far; answers go to {state.answers.path}",
            flush=True,
        )
        if not args.open:
            from pipeline.review.keys import personal_links

            base = url.split("/r/", 1)[0]
            for name, link in personal_links(state.secret, base, invited).items():
                print(f"  {name}: {link}", flush=True)
        print("  Ctrl-C stops; answers are on disk as they are given", flush=True)

    try:
        serve(state, args.host, args.port, ready)
    except KeyboardInterrupt:
        pass
    except OSError as exc:
        raise UserError(f"cannot listen on {args.host}:{args.port}: {exc}") from exc
    return 0


if __name__ == "__main__":
    sys.exit(main())
