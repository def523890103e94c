"""Measuring: what touches a GPU or the simulator. Sweeps, points, latency chases and probes are
planned here against the timing interface every device offers (measure.launch.TimingDevice);
the rooms below answer it: ``gpu/`` the real device (torch, Triton, NVML), ``sim/`` the
simulated GPU. Imports the ground floor (detect_caches.*), never detector, reports or pipeline."""
