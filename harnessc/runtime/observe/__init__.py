"""What a run tells the people watching it, read off its state and events: the live view and
summary (display.py), status/log views (report.py), periodic summaries (summaries.py), alerts
(alerts.py), notifications to a command or webhook (notify.py), OpenTelemetry traces
(telemetry.py), the ETA (eta.py) and cache savings (cachesaving.py)."""
