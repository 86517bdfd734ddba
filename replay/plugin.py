"""pytest plugin: hooks and fixtures only (glue lives in replay._pytest)."""
