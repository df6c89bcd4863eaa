"""What a run prints, writes and logs: the summary, the MLflow metrics, the adaptive rounds' report and the plots."""
