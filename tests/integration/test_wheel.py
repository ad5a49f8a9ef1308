"""`actormq` from a wheel installed in a fresh venv, run outside the checkout.

The package must carry everything its commands use: `actormq bench` once imported tests.bench
from the checkout (putting the checkout on sys.path), so it failed from an installed package.
Here the wheel is built (`pip wheel . --no-deps`), installed into a new venv in tmp, and every
subcommand's --help and a one-run benchmark with tiny counts run from a directory that is not
the checkout, with nothing of the checkout on the path. The venv gets the third-party
dependencies (thespian, msgpack, sortedcontainers) as links to this venv's installed
distributions (their code and dist-info), so pip checks the wheel's requirements against them
offline; nothing of actormq is linked.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import sysconfig
import uuid
import zipfile
from pathlib import Path

import pytest

from deploy import admin, cli, procinfo
from deploy.spark import cli as spark_cli
from tests.integration.conftest import kill_pids, wait_gone

pytestmark = pytest.mark.integration

CHECKOUT = Path(__file__).resolve().parents[2]
DEPENDENCIES = ("thespian", "msgpack", "sortedcontainers",
                "flask", "werkzeug", "jinja2", "itsdangerous", "click", "blinker", "markupsafe")


def _run(argv: list[str], cwd: Path, env: dict[str, str], timeout_s: float = 300.0
         ) -> subprocess.CompletedProcess[str]:  # fmt: skip
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True,
                          timeout=timeout_s, stdin=subprocess.DEVNULL, check=False)  # fmt: skip


def _subcommands(parser: argparse.ArgumentParser) -> list[str]:
    actions = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return sorted(actions[0].choices) if actions else []


def _clean_env() -> dict[str, str]:
    """This environment without anything that would put the checkout on the path."""
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("PYTHON", "VIRTUAL_ENV", "PYTEST"))}  # fmt: skip
    env["PYTHONNOUSERSITE"] = "1"
    return env


def _link_dependencies(site: Path) -> None:
    """The installed distributions of DEPENDENCIES (package and dist-info) linked into
    `site`: the same versions as here, found offline."""
    ours = Path(sysconfig.get_paths()["purelib"])
    for name in DEPENDENCIES:
        dist = list(ours.glob(f"{name}-*.dist-info"))
        assert len(dist) == 1, (name, dist)
        for path in (ours / name, dist[0]):
            assert path.exists(), path
            (site / path.name).symlink_to(path)


@pytest.fixture
def installed(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """(the fresh venv's bin directory, the environment to run it in)."""
    env = _clean_env()
    dist = tmp_path / "dist"
    built = _run([sys.executable, "-m", "pip", "wheel", str(CHECKOUT), "--no-deps",
                  "-w", str(dist)], tmp_path, env)  # fmt: skip
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = dist.glob("actormq-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert "deploy/bench/broker_bench.py" in names
    assert not [n for n in names if n.startswith("tests/")]
    venv = tmp_path / "venv"
    made = _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path, env)
    assert made.returncode == 0, made.stderr
    py = venv / "bin" / "python"
    site = Path(_run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                     tmp_path, env).stdout.strip())  # fmt: skip
    _link_dependencies(site)
    put = _run([sys.executable, "-m", "pip", "--python", str(py), "install", "--no-index",
                str(wheel)], tmp_path, env)  # fmt: skip
    assert put.returncode == 0, put.stderr[-3000:]
    return venv / "bin", env


def test_every_subcommand_and_a_tiny_bench_run_from_the_installed_wheel(
    installed: tuple[Path, dict[str, str]], tmp_path: Path
) -> None:
    bindir, env = installed
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    where = _run([str(bindir / "python"), "-c", "import json, actors, deploy, protocol, store;"
                  "print(json.dumps([m.__file__ for m in (actors, deploy, protocol, store)]))"],
                 elsewhere, env)  # fmt: skip
    assert where.returncode == 0, where.stderr
    assert all(f.startswith(str(tmp_path / "venv")) for f in json.loads(where.stdout))
    assert _run([str(bindir / "python"), "-c", "import tests"], elsewhere, env).returncode != 0

    # --help of every subcommand, the admin and spark ones included
    commands = [[], *[[c] for c in _subcommands(cli.build_parser())],
                *[["admin", c] for c in _subcommands(admin.build_parser())],
                *[["spark", c] for c in _subcommands(spark_cli.build_parser())],
                ["bench", "--client"], ["bench", "--consumer"]]  # fmt: skip
    script = (
        "import contextlib, io, json, sys\n"
        "from deploy.cli import main\n"
        "out = {}\n"
        "for argv in json.loads(sys.argv[1]):\n"
        "    buf = io.StringIO()\n"
        "    with contextlib.redirect_stdout(buf):\n"
        "        try:\n"
        "            code = main([*argv, '--help'])\n"
        "        except SystemExit as exc:\n"
        "            code = exc.code\n"
        "    out[' '.join(argv)] = [code, buf.getvalue()]\n"
        "print(json.dumps(out))\n"
    )
    helps = _run([str(bindir / "python"), "-c", script, json.dumps(commands)], elsewhere, env)
    assert helps.returncode == 0, helps.stderr[-3000:]
    answers = json.loads(helps.stdout)
    assert len(answers) == len(commands) > 20
    bad = {c: a for c, a in answers.items() if a[0] != 0 or "usage:" not in a[1]}
    assert bad == {}
    top = _run([str(bindir / "actormq"), "--help"], elsewhere, env)  # the console script
    assert top.returncode == 0 and "bench" in top.stdout, top.stderr

    marker = uuid.uuid4().hex  # finds every process the bench starts (launcher, actors)
    out_path, err_path = tmp_path / "bench.out", tmp_path / "bench.err"
    with open(out_path, "wb") as out, open(err_path, "wb") as err:
        proc = subprocess.Popen(
            [str(bindir / "actormq"), "bench", "--runs", "1", "--a", "20", "--b", "1", "--c", "0",
             "--d", "0", "--e", "0", "--f", "0", "--warmup", "0"],
            cwd=elsewhere, env=dict(env, ACTORMQ_TEST_MARKER=marker), stdout=out, stderr=err,
            stdin=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    try:
        code = proc.wait(240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(5)
        left = wait_gone(procinfo.pids_with_env(f"ACTORMQ_TEST_MARKER={marker}"), 15.0)
        kill_pids(left)
    text = out_path.read_text()
    assert code == 0, err_path.read_text()[-3000:]
    assert left == []
    assert "A send, 1 in flight" in text and "B send, 100 in flight, JSON" in text, text
