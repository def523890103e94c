"""The pipeline that joins the layers: measure -> detector -> reports, for the command line and
the Python API alike (one path for both), and the runs of many GPUs."""
