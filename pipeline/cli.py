"""``python -m pipeline.cli [overrides]``: compose the Hydra config, convert it once, run, print the summary.

The console shows the pipeline's own lines (input, judge, progress with rate and ETA, where the outputs went,
the summary table); the engines' and Ray's output goes to the run folder (``run.log``, ``logs/``), unless
``verbose=true``. Expected errors (a config value, the input data, the judge model) print their message and
exit with status 2; anything else keeps its traceback and exits with status 1. A run whose outputs are all written
but whose results MLflow did not take (its server down, a key refused) says so and exits with status 3.
"""

from __future__ import annotations

import os
import sys
import traceback
from datetime import datetime

import hydra
from omegaconf import DictConfig

from pipeline import PROJECT_ROOT
from pipeline.config.hydra import CONF_DIR, config_error_message, register_configs, to_run_config
from pipeline.contracts.errors import UserError
from pipeline.runtime.logs import (
    capture_process_output,
    captured_output_path,
    console,
    results,
    setup_logging,
)

register_configs()
# Exit status of an expected error (config, input, model), of anything else, and of a run whose outputs are written but
# not logged to MLflow.
USER_ERROR, FAILURE, NOT_LOGGED = 2, 1, 3


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def _main(cfg: DictConfig) -> None:
    from hydra.core.hydra_config import HydraConfig

    run_cfg = to_run_config(cfg, dict(HydraConfig.get().runtime.choices))
    if not run_cfg.verbose:
        from pipeline.config.derived import resolve_path

        stamp = datetime.now().strftime("%Y-%m-%d_%H-%M-%S")
        pending = (
            resolve_path(run_cfg.paths.output_root, PROJECT_ROOT) / "logs" / f"{stamp}-{os.getpid()}.log"
        )
        capture_process_output(pending)  # moved into the run folder's run.log once it exists
    setup_logging(str(run_cfg.log_level), run_cfg.verbose)
    from pipeline.run.context import run

    result = run(run_cfg, PROJECT_ROOT)
    console().flush()
    out = results()
    out.write("\n" + result.summary + "\n\n")
    out.write(f"outputs: {result.run_dir}\n")
    if result.mlflow_run_id:
        out.write(f"MLflow run {result.mlflow_run_id} in {result.tracking_uri}\n")
    out.flush()
    if result.reporting_error:
        _report(
            f"error: the outputs are written, but MLflow did not take them: {result.reporting_error}",
            NOT_LOGGED,
        )


def main() -> None:
    from hydra.errors import HydraException
    from omegaconf.errors import OmegaConfBaseException

    # Hydra re-raises instead of printing its own report: expected errors are reported here, without a traceback.
    os.environ.setdefault("HYDRA_FULL_ERROR", "1")
    try:
        _main()
    except UserError as exc:
        _report(f"error: {exc}", USER_ERROR)
    except (HydraException, OmegaConfBaseException) as exc:
        _report(f"config error: {config_error_message(exc)}", USER_ERROR)
    except Exception:
        _report(traceback.format_exc().rstrip(), FAILURE)


def _report(message: str, status: int) -> None:
    out = console()
    out.write(message + "\n")
    details = captured_output_path()
    if details is not None:
        out.write(f"(the run's full output is in {details})\n")
    out.flush()
    sys.exit(status)


if __name__ == "__main__":
    main()
