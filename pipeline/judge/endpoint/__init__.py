"""What every judge behind an endpoint shares, whatever its provider: the HTTP client with its retries and reply cache
(``client``), replies parsed within limits and checked (``parse``, ``replies``), batch jobs and their one polling loop
(``batch``, ``batch_lines``), sampled verdicts (``sampled``). The providers' backends build on it: OpenAI's wire
format (:mod:`pipeline.judge.openai`, the ``api`` backend) and Anthropic's (:mod:`pipeline.judge.anthropic`)."""
