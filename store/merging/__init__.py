"""The merge engine (C2): stored records in, one row per vessel call out; provenance."""
