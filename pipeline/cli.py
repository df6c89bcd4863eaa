"""``python -m pipeline.cli [overrides]``: compose the Hydra config, convert it once, run, print the summary."""

from __future__ import annotations

import sys
from pathlib import Path

import hydra
from omegaconf import DictConfig

from pipeline.config import register_configs, to_run_config
from pipeline.logs import setup_logging

register_configs()
CONF_DIR = str(Path(__file__).resolve().parent.parent / "conf")


@hydra.main(version_base="1.3", config_path=CONF_DIR, config_name="config")
def main(cfg: DictConfig) -> None:
    run_cfg = to_run_config(cfg)
    setup_logging(run_cfg.log_level)
    from pipeline.run import run

    result = run(run_cfg)
    sys.stdout.write("\n" + result.summary + "\n\n")
    sys.stdout.write(f"outputs: {result.run_dir}\n")
    if result.mlflow_run_id:
        sys.stdout.write(f"MLflow run {result.mlflow_run_id} in {result.tracking_uri}\n")


if __name__ == "__main__":
    main()
