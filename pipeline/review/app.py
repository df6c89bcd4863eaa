"""The review page: a small Flask app over one run's review folder, rendered on the server.

- ``/``: by invitation, a note to open one's personal link (with the owner's key: every reviewer's progress and
  link); in an open review, the progress and a name to start with (or straight to the reviewer given on the
  command line);
- ``/r/<reviewer>?key=...``: the reviewer's next unanswered item, blind (the criterion, the context and the two
  texts in the reviewer's own seeded slot order; no verdict, candidate id or model name); answered with the keys 1,
  2 and t (tie) or the buttons, with an optional note; after the last one, the reviewer's own agreement with the
  judge, computed from their answers alone (no other reviewer's name, answers or agreement, no file path);
- ``/agreement?key=...``: the agreement report of every answer so far (the owner's key).

**Reviewers are who they say they are.** Each reviewer's key is an HMAC of their name under the review folder's
secret (``.secret``: 32 random bytes, created whole with owner-only permissions in one step; an empty, short or
group/world-readable one is refused with what to do): the personal link ``/r/<name>?key=<key>`` that
``python -m pipeline.review invite`` (or ``serve --reviewers``) prints. Without that reviewer's key their page and
their answers are refused (403) and nothing is written; the agreement page needs the owner's key. A key or token
that is not the one issued, whatever its characters, is a 403. Only a review opened explicitly as open
(``serve --open``, e.g. one person on 127.0.0.1) lets a name be picked on the start page.

The time an item was shown is kept on the server (when this server first showed it to the reviewer); the answer's
``seconds`` is the time since then, or null when the item was shown by an earlier server.

Every text comes from the run (model outputs, user data) and goes through Jinja's autoescaping, so ``<script>``
in a candidate is shown as text; the Content-Security-Policy allows only this page's own script (by nonce),
as a second line. Only the sample's item ids are accepted, each form carries an HMAC of its reviewer and item
(a page elsewhere cannot post answers), and nothing else is served: no static folder, no file from disk.
"""

from __future__ import annotations

import hashlib
import hmac
import logging
import secrets
import threading
import time
from dataclasses import dataclass, field
from importlib.resources import files

import polars as pl
from flask import Flask, Response, abort, redirect, request, url_for
from jinja2 import Environment, StrictUndefined

from pipeline.contracts.errors import UserError
from pipeline.review import agreement as report
from pipeline.review import results
from pipeline.review.answers import CHOICES, MAX_NOTE, AnswerLog, check_reviewer
from pipeline.review.keys import owner_key, review_secret, reviewer_key, same
from pipeline.review.sample import LABELS, ReviewSample, criterion_text, reviewer_order, shown

log = logging.getLogger(__name__)


@dataclass
class ReviewState:
    sample: ReviewSample
    answers: AnswerLog
    config: dict
    secret: bytes
    contexts: dict[str, str]  # context_id -> its text, for the sampled contexts
    texts: dict[tuple[str, str], str]  # (context_id, candidate_id) -> the candidate's text
    reviewer: str | None = None  # the reviewer named on the command line, if any
    # an open review: anyone who reaches the page may answer under any name (no keys)
    open_review: bool = False
    # where the agreement is logged: the user's tracking URI or the project's own (review.results.own_tracking_uri)
    tracking_uri: str | None = None
    # one publication at a time (two reviewers finishing together must not create two MLflow child runs)
    publishing: threading.Lock = field(default_factory=threading.Lock)
    # the last agreement computed and the answers it was computed from (the bootstrap is not free)
    _agreement: tuple[int, report.Agreement] | None = None
    # each reviewer's own agreement and how many answers it was computed from (a finished reviewer's page is read
    # again and again: its bootstrap runs once per answer set, not once per request)
    _own: dict[str, tuple[int, report.Agreement]] = field(default_factory=dict)
    _own_lock: threading.Lock = field(default_factory=threading.Lock)
    # when this server first showed each (reviewer, item): the answer's time is measured from it
    _shown: dict[tuple[str, str], float] = field(default_factory=dict)
    _shown_lock: threading.Lock = field(default_factory=threading.Lock)

    def showing(self, reviewer: str, item: str) -> None:
        with self._shown_lock:
            self._shown.setdefault((reviewer, item), time.time())

    def seconds_since_shown(self, reviewer: str, item: str) -> float | None:
        with self._shown_lock:
            shown_at = self._shown.get((reviewer, item))
        return None if shown_at is None else round(max(0.0, time.time() - shown_at), 3)

    def own_agreement(self, reviewer: str) -> report.Agreement:
        """The agreement with the judge of one reviewer's answers alone."""
        answers = self.answers.read()
        mine = [a for a in answers.rows if a["reviewer"] == reviewer]
        with self._own_lock:
            known = self._own.get(reviewer)
            if known is None or known[0] != len(mine):
                known = self._own[reviewer] = (len(mine), report.agreement(self.sample, type(answers)(mine)))
        return known[1]

    def agreement(self) -> report.Agreement:
        """The agreement of every answer on disk, computed again only when there are new answers."""
        answers = self.answers.read()
        if self._agreement is None or self._agreement[0] != len(answers.rows):
            self._agreement = (len(answers.rows), report.agreement(self.sample, answers))
        return self._agreement[1]

    @classmethod
    def open(
        cls,
        sample: ReviewSample,
        reviewer: str | None = None,
        open_review: bool = False,
        tracking_uri: str | None = None,
    ) -> ReviewState:
        import json

        config = json.loads((sample.run_dir / "config.json").read_text())
        candidates = pl.read_parquet(sample.run_dir / "tables" / "candidates.parquet").filter(
            pl.col("context_id").is_in(sample.items["context_id"].unique().to_list())
        )
        texts = {(c, k): t for c, k, t in candidates.select("context_id", "candidate_id", "text").iter_rows()}
        missing = [
            (c, k)
            for c, i, j in sample.items.select("context_id", "cand_i", "cand_j").iter_rows()
            for k in (i, j)
            if (c, k) not in texts
        ]
        if missing:
            c, k = missing[0]
            raise UserError(
                f"{sample.run_dir / 'tables' / 'candidates.parquet'}: context {c!r}, candidate {k!r}, field "
                f"'text': the candidate of a judged pair is missing ({len(missing)} such)"
            )
        contexts = dict(candidates.select("context_id", "context").unique("context_id").iter_rows())
        log_ = AnswerLog(sample.folder / "answers.jsonl")
        return cls(
            sample,
            log_,
            config,
            review_secret(sample.folder),
            contexts,
            texts,
            reviewer,
            open_review,
            tracking_uri,
        )

    def token(self, reviewer: str, item: str) -> str:
        """A form's token: an HMAC in a domain of its own ("token"), so that no token is ever another reviewer's key
        (keys are ``reviewer\x1f<name>``: :func:`pipeline.review.keys.reviewer_key`)."""
        return hmac.new(self.secret, f"token\x1f{reviewer}\x1f{item}".encode(), hashlib.sha256).hexdigest()

    def reviewer_key(self, reviewer: str) -> str:
        return reviewer_key(self.secret, reviewer)

    def owner_key(self) -> str:
        return owner_key(self.secret)

    def order(self, reviewer: str) -> list[str]:
        return reviewer_order(self.sample.ids, reviewer, self.sample.spec.seed)


# The page's templates (Jinja, autoescaped) and its one script, read from the package.
TEMPLATES = files("pipeline.review") / "templates"
SCRIPT = (TEMPLATES / "answer.js").read_text()


def create_app(state: ReviewState) -> Flask:
    """The review page of ``state``: the start page, one reviewer's next comparison, an answer, the agreement."""
    app = Flask(__name__, static_folder=None)
    app.config["MAX_CONTENT_LENGTH"] = 64 * 1024
    pages = Pages(state)
    app.add_url_rule("/", "index", pages.index, methods=["GET"])
    app.add_url_rule("/r/<reviewer>", "review", pages.review, methods=["GET"])
    app.add_url_rule("/r/<reviewer>", "answer", pages.answer, methods=["POST"])
    app.add_url_rule("/agreement", "agreement", pages.agreement, methods=["GET"])
    return app


class Pages:
    """The page's views over one review's state: every text escaped, every page under a strict CSP."""

    def __init__(self, state: ReviewState):
        self.state = state
        env = Environment(autoescape=True, undefined=StrictUndefined)
        self.page, self.start, self.item_page, self.report_page, self.own_page = (
            env.from_string((TEMPLATES / f"{name}.html").read_text())
            for name in ("page", "start", "item", "report", "own_report")
        )
        self.run_name = state.sample.run_dir.name

    def render(self, title: str, subtitle: str, body: str, script: str = "", status: int = 200) -> Response:
        nonce = secrets.token_urlsafe(16)
        html = self.page.render(
            title=title, subtitle=subtitle, body=_markup(body), script=_markup(script), nonce=nonce
        )
        response = Response(html, status=status, mimetype="text/html")
        response.headers["Content-Security-Policy"] = (
            f"default-src 'none'; style-src 'nonce-{nonce}'; script-src 'nonce-{nonce}'; "
            "form-action 'self'; base-uri 'none'; frame-ancestors 'none'"
        )
        response.headers["X-Content-Type-Options"] = "nosniff"
        response.headers["Referrer-Policy"] = "no-referrer"
        response.headers["Cache-Control"] = "no-store"
        return response

    @staticmethod
    def reviewer_or_404(name: str) -> str:
        try:
            return check_reviewer(name)
        except UserError:
            abort(404)

    def key_of(self, reviewer: str) -> str:
        """The reviewer's key as the request gives it (query or form), refused (403) unless it is theirs; empty in
        an open review."""
        if self.state.open_review:
            return ""
        given = request.values.get("key", "")
        if not same(given, self.state.reviewer_key(reviewer)):
            abort(403)
        return given

    def is_owner(self) -> bool:
        return self.state.open_review or same(request.args.get("key", ""), self.state.owner_key())

    def review_url(self, reviewer: str, key: str | None = None) -> str:
        """A reviewer's page: with their key, unless the review is open."""
        if self.state.open_review:
            return url_for("review", reviewer=reviewer)
        return url_for("review", reviewer=reviewer, key=key or self.state.reviewer_key(reviewer))

    @staticmethod
    def judge_table(result: report.Agreement) -> list[dict]:
        table = []
        if result.labels.height:
            for scope, group in result.judge_rows():
                cells = {
                    s: result.cell(scope, group, s)
                    for s in ("raw_agreement", "kappa", "weighted_kappa", "kappa_no_ties")
                }
                rows = result.table.filter(
                    (result.table["scope"] == scope) & (result.table["group"] == group)
                )
                table.append({"scope": scope, "group": group, "n": rows["n"][0], **cells})
        return table

    def own_report_body(self, reviewer: str, done_message: str) -> str:
        """A finished reviewer's own agreement with the judge: their answers alone, over all the items."""
        table = [r for r in self.judge_table(self.state.own_agreement(reviewer)) if r["scope"] == "overall"]
        return self.own_page.render(done_message=done_message, table=table[:1])

    def report_body(self) -> str:
        """The owner's report: every reviewer, the confusion table, between reviewers, where the files are."""
        result = self.state.agreement()
        return self.report_page.render(
            done_message="",
            headline=result.headline(),
            notes=result.notes(),
            table=self.judge_table(result),
            labels=[f"answer {label}" for label in LABELS],
            confusion=list(result.confusion.iter_rows()),
            answers_path=str(self.state.answers.path),
            folder=str(self.state.sample.folder),
        )

    def slots(self, item_id: str, reviewer: str) -> tuple[dict, str, str]:
        """An item's row and the candidates in slot 1 and slot 2 for this reviewer (a seeded swap)."""
        state = self.state
        row = state.sample.items.row(state.sample.ids.index(item_id), named=True)
        first, second = shown(row, reviewer, state.sample.spec.seed)
        return row, first, second

    def index(self):
        state = self.state
        if state.open_review and request.args.get("reviewer"):
            return redirect(url_for("review", reviewer=self.reviewer_or_404(request.args["reviewer"])), 303)
        if state.open_review and state.reviewer:
            return redirect(url_for("review", reviewer=state.reviewer), 303)
        owner = self.is_owner()
        answers = state.answers.read()
        names = sorted({a["reviewer"] for a in answers.rows}) if owner else []
        body = self.start.render(
            n=len(state.sample.ids),
            pairs=state.sample.n_pairs,
            run=self.run_name,
            strategy=state.sample.spec.strategy.value,
            seed=state.sample.spec.seed,
            progress=[(name, len(answers.by_reviewer(name))) for name in names],
            url=self.review_url,
            start=url_for("index"),
            agreement=url_for("agreement", **({} if state.open_review else {"key": state.owner_key()})),
            listed=owner,
            open_review=state.open_review,
        )
        return self.render("Blind review", self.run_name, body)

    def review(self, reviewer: str):
        state = self.state
        reviewer = self.reviewer_or_404(reviewer)
        key = self.key_of(reviewer)
        answered = state.answers.read().by_reviewer(reviewer)
        order = state.order(reviewer)
        left = [item for item in order if item not in answered]
        subtitle = f"{reviewer}: {len(answered)} of {len(order)} answered"
        if not left:
            message = f"All {len(order)} comparisons answered. How often you and the judge agree:"
            return self.render("Review done", subtitle, self.own_report_body(reviewer, message))
        item_id = left[0]
        row, first, second = self.slots(item_id, reviewer)
        state.showing(reviewer, item_id)
        body = self.item_page.render(
            attribute=row["attribute"],
            criterion=criterion_text(state.config, row["attribute"]),
            context=state.contexts[row["context_id"]],
            slot1=state.texts[(row["context_id"], first)],
            slot2=state.texts[(row["context_id"], second)],
            item_id=item_id,
            token=state.token(reviewer, item_id),
            key=key,
            max_note=MAX_NOTE,
        )
        return self.render(f"Comparison {len(answered) + 1} of {len(order)}", subtitle, body, SCRIPT)

    def answer(self, reviewer: str):
        state = self.state
        reviewer = self.reviewer_or_404(reviewer)
        key = self.key_of(reviewer)  # another reviewer's key, or none: refused, nothing written
        item_id = request.form.get("item_id", "")
        if item_id not in state.sample.ids:
            abort(404)
        if not same(request.form.get("token", ""), state.token(reviewer, item_id)):
            abort(403)
        choice = request.form.get("choice", "")
        if choice not in CHOICES:
            abort(400)
        row, first, second = self.slots(item_id, reviewer)
        _, written = state.answers.add(
            {
                "reviewer": reviewer,
                "item_id": item_id,
                "judge": row["judge"],
                "attribute": row["attribute"],
                "template_id": row["template_id"],
                "context_id": row["context_id"],
                "slot1": first,
                "slot2": second,
                "choice": choice,
                "note": request.form.get("note", "")[:MAX_NOTE],
                "seconds": state.seconds_since_shown(reviewer, item_id),
            }
        )
        if written and len(state.answers.read().by_reviewer(reviewer)) == len(state.sample.ids):
            publish(state)  # the reviewer's last answer: the tables and MLflow are brought up to date
        return redirect(self.review_url(reviewer, key), 303)

    def agreement(self):
        if not self.is_owner():
            abort(403)
        return self.render("Agreement", self.run_name, self.report_body())


def publish(state: ReviewState) -> report.Agreement:
    """Write the agreement tables into the review folder and log them to the run's MLflow record."""
    with state.publishing:
        result = state.agreement()
        files = results.write(result)
        try:
            results.log_to_mlflow(result, files, state.tracking_uri)
        except Exception:  # the tables are on disk; `review report` brings MLflow up to date later
            log.exception("could not log the review to MLflow; the tables are in %s", state.sample.folder)
        return result


def _markup(html: str):
    from markupsafe import Markup

    return Markup(html)  # our own rendered (escaped) fragments


def serve(state: ReviewState, host: str, port: int, ready=None) -> None:
    """Serve until interrupted; ``ready(url)`` is called with the address once the socket listens."""
    from werkzeug.serving import make_server

    server = make_server(host, port, create_app(state), threaded=True)
    url = f"http://{'127.0.0.1' if host in ('0.0.0.0', '::') else host}:{server.server_port}/"
    if state.reviewer:
        url += f"r/{state.reviewer}" + (
            "" if state.open_review else f"?key={state.reviewer_key(state.reviewer)}"
        )
    if ready is not None:
        ready(url)
    try:
        server.serve_forever()
    finally:
        server.server_close()
