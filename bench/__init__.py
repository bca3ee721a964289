"""The lineup service's benchmarks: what a buyer and an operator wait for, measured
against the targets, beside what a user would pick instead (Datasette).

    python -m bench                 # the workloads
    python -m bench WORKLOAD --help

Each workload is one module with a `main(argv)`; a run writes one small JSON file under
`bench/results/`, and `python -m bench report` makes docs/benchmarks.md (the latest
figure of each beside its target and the machine it was measured on) from them.
"""
