"""What the engine of every endpoint backend shares: its start (the endpoint, the client, the batch jobs when
``judge.endpoint.batch``, the judge's tokenizer, the seconds it took), the way its requests are sent and their failures
told, and its close. A provider's engine (:mod:`pipeline.judge.openai.engine`, :mod:`pipeline.judge.anthropic.engine`)
names its client and batch classes and builds and reads its own bodies."""

from __future__ import annotations

import logging
import time
from typing import Any, ClassVar

from pipeline.judge.endpoint.batch import BatchJobs
from pipeline.judge.endpoint.client import ApiClient, Reply
from pipeline.judge.endpoint.replies import Check
from pipeline.judge.spec import JudgeSpec
from pipeline.judge.tokenizers import load_tokenizer

log = logging.getLogger(__name__)


class EndpointEngine:
    """The judge worker's engine for an endpoint backend (the driver holds it: no worker process starts)."""

    inside = None
    #: the API in words, for the error of a judge configured without its endpoint
    api_name: ClassVar[str] = "an endpoint judge"
    client_class: ClassVar[type[ApiClient]] = ApiClient
    batches_class: ClassVar[type[BatchJobs]] = BatchJobs

    def __init__(self, spec: JudgeSpec):
        started = time.perf_counter()
        self.spec = spec
        self.endpoint = spec.endpoint_of(self.api_name)
        self.settings = self.endpoint.settings
        self.model = self.endpoint.model
        self.client = self.client_class(self.endpoint)
        # judge.endpoint.batch: the requests of each call as one batch job, recorded in the run folder
        self.batches = (
            self.batches_class(self.client, self.endpoint.record_path) if self.settings.batch else None
        )
        # the judge's tokenizer: the token ids of the words read, decoded or sent as they are
        self.tokenizer = load_tokenizer(spec)
        self.started()
        self.start_seconds = time.perf_counter() - started

    def started(self) -> None:
        """What a provider's engine does once its client and tokenizer are ready (a probe, a log line)."""

    def post(self, path: str, bodies: list[dict[str, Any]], checks: list[Check]) -> list[Reply]:
        """The bodies answered by the endpoint: request by request, or as one batch job (``judge.endpoint.batch``); a reply
        is an answer only if its check passes (:mod:`pipeline.judge.endpoint.replies`). The failures are told once."""
        if self.batches is not None:
            replies = self.batches.post(path, bodies, checks)
        else:
            replies = self.client.post(path, bodies, check=checks)
        failed = [r for r in replies if r.body is None]
        if failed:
            log.warning(
                "%d of %d request(s) to %s failed after retries (first: %s)",
                len(failed),
                len(replies),
                self.client.base_url,
                failed[0].error,
            )
        return replies

    @property
    def dtype(self) -> str:
        return "api"

    def close(self) -> None:
        self.client.close()
