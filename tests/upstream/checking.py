"""What the upstream tests share: one `mlacheck check --format json` and its row."""
import json
import subprocess


def check_json(args, env):
    """Runs the check (args: the command line), returns (exit code, the implementation's JSON row,
    the whole output); a run that printed no JSON report fails with its output's tail."""
    p = subprocess.run(args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True,
                       timeout=600)
    start = p.stdout.find("{\"backend\"")
    assert start >= 0, p.stdout[-3000:]
    row = json.loads(p.stdout[start:p.stdout.rfind("}") + 1])["implementations"][0]
    return p.returncode, row, p.stdout
