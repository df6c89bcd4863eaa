#!/usr/bin/env bash
# Submit the same run to an existing Ray cluster with `ray job submit`.
#
#   RAY_ADDRESS=http://<head-node>:8265 jobs/submit.sh [hydra overrides ...]
#
# e.g. a GPU cluster with a shared file system and an MLflow server:
#   RAY_ADDRESS=http://head:8265 jobs/submit.sh dataset=summeval judge=gpu judge.model=/shared/models/Llama-3.1-8B-Instruct \
#       paths.output_root=/shared/ca-outputs paths.cache_dir=/shared/ca-cache tracking.tracking_uri=http://mlflow:5000
#
# The project folder is shipped as the job's working_dir; Ray unpacks it into a temporary folder deleted with the
# cluster's session, so the job refuses to write its run folder or a local MLflow store there: give
# paths.output_root on shared storage and tracking.tracking_uri (a server, or a folder on shared storage).
# `runtime=cluster` makes the run join the cluster (ray.init(address="auto")) instead of starting a local Ray.
#
# Authentication (Ray 2.59+ turns token authentication on by default): the token is the cluster's, from
#   RAY_AUTH_TOKEN            the token itself (e.g. from your secret manager or the KubeRay Secret), or
#   RAY_AUTH_TOKEN_PATH       a file holding it, or
#   ~/.ray/auth_token         Ray's default file (`ray get-auth-token` on the head node prints it;
#                             `ray get-auth-token --generate` makes one before `ray start --head`).
# When any of these is there, RAY_AUTH_MODE=token is set for the client (unless you set RAY_AUTH_MODE).
#
# Other settings: RUNTIME_ENV (default jobs/runtime_env.yaml; what the cluster's image lacks), SUBMISSION_ID
# (resubmit under a new id after `ray job stop`), NO_WAIT=1 (return once submitted), DRY_RUN=1 (print the
# command instead of running it).
set -euo pipefail
cd "$(dirname "$0")/.."
: "${RAY_ADDRESS:?set RAY_ADDRESS to the cluster dashboard, e.g. http://head-node:8265}"

if [[ -z "${RAY_AUTH_MODE:-}" ]]; then
  if [[ -n "${RAY_AUTH_TOKEN:-}" || -n "${RAY_AUTH_TOKEN_PATH:-}" || -s "${HOME}/.ray/auth_token" ]]; then
    export RAY_AUTH_MODE=token
  fi
fi
if [[ "${RAY_AUTH_MODE:-}" == token && -z "${RAY_AUTH_TOKEN:-}" && -z "${RAY_AUTH_TOKEN_PATH:-}" \
      && ! -s "${HOME}/.ray/auth_token" ]]; then
  echo "RAY_AUTH_MODE=token but no token: set RAY_AUTH_TOKEN or RAY_AUTH_TOKEN_PATH, or put it in ~/.ray/auth_token" >&2
  exit 2
fi

RAY_BIN="${RAY_BIN:-$(command -v ray || echo .venv/bin/ray)}"
RUNTIME_ENV="${RUNTIME_ENV:-jobs/runtime_env.yaml}"
# The entrypoint (jobs/rayjob.yaml runs the same one).
entrypoint=(python -m pipeline.cli runtime=cluster)
cmd=("$RAY_BIN" job submit --address "$RAY_ADDRESS" --working-dir . --runtime-env "$RUNTIME_ENV")
[[ -n "${SUBMISSION_ID:-}" ]] && cmd+=(--submission-id "$SUBMISSION_ID")
[[ "${NO_WAIT:-0}" == 1 ]] && cmd+=(--no-wait)
cmd+=(-- "${entrypoint[@]}" "$@")
if [[ "${DRY_RUN:-0}" == 1 ]]; then
  [[ -n "${RAY_AUTH_MODE:-}" ]] && printf 'RAY_AUTH_MODE=%q ' "$RAY_AUTH_MODE"
  printf '%q ' "${cmd[@]}"; echo
else
  exec "${cmd[@]}"
fi
