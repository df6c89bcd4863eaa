#!/usr/bin/env bash
# Submit the same run to an existing Ray cluster with `ray job submit`.
#
#   RAY_ADDRESS=http://<head-node>:8265 jobs/submit.sh [hydra overrides ...]
#
# e.g. a GPU cluster with a shared file system and an MLflow server:
#   RAY_ADDRESS=http://head:8265 jobs/submit.sh dataset=summeval judge=gpu judge.model=/shared/models/Llama-3.1-8B-Instruct \
#       paths.output_root=/shared/ca-outputs tracking.tracking_uri=http://mlflow:5000 CA_DATASETS=/shared/datasets
#
# The project folder is shipped as the job's working_dir (jobs/runtime_env.yaml lists what is left out and
# the Python packages installed on top of the cluster's image, which must provide ray and vllm).
# `runtime=cluster` makes the run join the cluster (ray.init(address="auto")) instead of starting a local Ray.
# Set DRY_RUN=1 to print the command instead of running it.
set -euo pipefail
cd "$(dirname "$0")/.."
: "${RAY_ADDRESS:?set RAY_ADDRESS to the cluster dashboard, e.g. http://head-node:8265}"

RAY_BIN="${RAY_BIN:-$(command -v ray || echo .venv/bin/ray)}"
cmd=("$RAY_BIN" job submit --address "$RAY_ADDRESS" --working-dir . --runtime-env jobs/runtime_env.yaml
     -- python -m pipeline.cli runtime=cluster "$@")
if [[ "${DRY_RUN:-0}" == 1 ]]; then
  printf '%q ' "${cmd[@]}"; echo
else
  exec "${cmd[@]}"
fi
