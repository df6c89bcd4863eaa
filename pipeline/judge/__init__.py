"""The LLM judge: engines that read first-token label log-probabilities, and the stage that drives them."""
