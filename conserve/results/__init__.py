"""What a run returns: the Solution, its diagnostics, sensors, reactions, export and files,
plots and animation."""
