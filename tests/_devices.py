"""Run a script in a fresh process with N CPU host devices (the device count is fixed when
JAX starts) and read back the JSON it prints after ``RESULT``."""

import json
import os
import subprocess
import sys


def run_on_devices(script: str, n_devices: int, timeout: int = 300) -> dict:
    env = dict(os.environ, XLA_FLAGS=f"--xla_force_host_platform_device_count={n_devices}",
               JAX_PLATFORMS="cpu")
    p = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr[-3000:]
    line = [x for x in p.stdout.splitlines() if x.startswith("RESULT")][-1]
    return {int(k): v for k, v in json.loads(line[len("RESULT"):]).items()}
