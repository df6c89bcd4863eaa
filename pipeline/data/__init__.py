"""Reading, validating and generating the input data (contexts with candidate texts and human scores)."""
