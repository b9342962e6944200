"""README.md's promises that other files rely on: the test command CI runs, and a reason for
every dependency.

`.ci/run` runs "exactly the README's test command"; setup.cfg's extras and
tests/js/package.json's packages each need their line under "Dependencies and
why". Pure text checks: nothing is installed or run.
"""

from __future__ import annotations

import configparser
import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def section(title: str) -> str:
    """The text of README's ``## title`` section, up to the next ``## `` heading."""
    found = re.search(rf"^## {re.escape(title)}\n(.*?)(?=^## |\Z)", README, re.M | re.S)
    assert found, f"README has no '## {title}' section"
    return found.group(1)


def readme_test_command() -> str:
    """The command of the line commented "run the tests" in "Install, run, test"."""
    block = re.search(r"```bash\n(.*?)```", section("Install, run, test"), re.S)
    assert block, "the section opens with the commands in a bash block"
    commands = [line.partition("#") for line in block.group(1).splitlines()]
    [command] = [cmd.strip() for cmd, _, comment in commands if "run the tests" in comment]
    return command


def test_ci_runs_exactly_the_readmes_test_command() -> None:
    script = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    # .ci/run's last command runs the suite, between `set +e` and the saved status.
    ran = re.search(r"^set \+e\n(.+)\nstatus=\$\?$", script, re.M)
    assert ran, ".ci/run runs the suite after `set +e` and saves its status"
    assert ran.group(1).strip() == readme_test_command() == "pytest"


def python_dependencies() -> set[str]:
    """Every distribution setup.cfg names: install_requires and every extra, bare names."""
    config = configparser.ConfigParser()
    config.read(ROOT / "setup.cfg", encoding="utf-8")
    lines = config["options"]["install_requires"].splitlines()
    for extra in config["options.extras_require"].values():
        lines += extra.splitlines()
    names = set()
    for line in lines:
        requirement = line.split("#")[0].split(";")[0].strip()
        if requirement:
            names.add(re.split(r"[<>=!~\[ ]", requirement, maxsplit=1)[0])
    return names


def test_every_python_dependency_has_its_reason_in_the_readme() -> None:
    reasons = section("Dependencies and why")
    names = python_dependencies()
    assert {"requests", "urllib3", "jsonschema", "jinja2", "orjson", "gunicorn"} <= names
    # LiteLLM's proxy's own imports are named as a group ("and the rest"), not one by one.
    litellm_proxy = {"backoff", "apscheduler", "pyjwt", "python-multipart", "cryptography"}
    litellm_proxy |= {"websockets", "redis", "semver", "expression", "fastapi-sso", "mcp"}
    litellm_proxy |= {"soundfile"}
    missing = sorted(n for n in names - litellm_proxy if f"`{n}" not in reasons)
    assert not missing, f"no line under 'Dependencies and why' names: {missing}"
    assert "what LiteLLM's proxy imports" in reasons


def test_every_npm_client_has_its_reason_in_the_readme() -> None:
    reasons = section("Dependencies and why")
    package = json.loads((ROOT / "tests" / "js" / "package.json").read_text(encoding="utf-8"))
    missing = sorted(name for name in package["dependencies"] if f"`{name}`" not in reasons)
    assert not missing, f"no line under 'Dependencies and why' names: {missing}"


def test_the_readme_stays_short() -> None:
    assert len(README.splitlines()) <= 250, "the guides hold the detail (docs/)"
