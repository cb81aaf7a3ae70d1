"""The harness's own costs, each measured from the orchestrator's environment: the step-time
overhead against a bare hand-written loop (overhead, overhead_paired, overhead_pytorch), the
sidecar sampler (sampler_overhead), kernel tracing (tracing_overhead), the Ray executor
(ray_overhead), writing a run's record (db_write_cost), the framework probe (probe_cost), reports
and the ETA on a big database (make_big_db, report_speed, eta_cost), the reports' output before
and after a change (report_snapshot), calibration's noise
(calibration_noise), the disturbance detector (disturbance), how much timing a run needs
(autorange), the between-process spread under launch policies (process_noise), and how often
the verdict on runs errs, A/A and power (aa_power), and the UMONS poster's CPU ranking
against bench's runs (poster_ranking), and what a run's record survives as the database, the
disk and bench fail around sweeps (fault_injection, counting with fault_tally). README.md says
what each prints and how to run it.
"""
