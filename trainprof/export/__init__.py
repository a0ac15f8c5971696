"""Exports of a run to the tools users already watch: TensorBoard, Prometheus.

Each exporter uses the library made for its format and is an optional extra of trainprof;
``extras.need`` says which extra to install when it is missing.
"""
