"""The routing config: the shipped schema and the checks beyond it, each error naming its path."""

from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from llmchat.errors import LLMChatError
from llmchat.proxy.routing import (
    DIALECTS,
    ConfigError,
    KeyPolicy,
    NodeConfig,
    RoutingOptions,
    Tier,
    load_config,
    parse_config,
)
from llmchat.proxy.routing.config_checks import glob_problem, path_text, schema

from ...support.paths import REPO_ROOT

EXAMPLE = REPO_ROOT / "examples" / "routing.yaml"


def valid() -> dict[str, Any]:
    return {
        "nodes": [
            {"name": "gpu-a", "url": "http://127.0.0.1:8080/v1"},
            {"name": "gpu-b", "url": "http://127.0.0.1:8081/v1", "max_conns": 2, "weight": 3},
            {"name": "cloud", "url": "https://api.example/v1", "api_key_env": "CLOUD_KEY"},
        ],
        "models": {
            "fast": [
                {"model": "qwen3", "nodes": ["gpu-a", "gpu-b"]},
                {"model": "gpt-oss", "nodes": ["cloud"], "wait_ms": 0},
            ],
            "claude-*": [{"model": "qwen3", "nodes": ["gpu-a"]}],
        },
        "keys": [{"name": "alice", "key_env": "ALICE_KEY", "models": ["fast"]}],
        "routing": {"wait_timeout_ms": 500, "affinity": "none"},
    }


def errors_of(data: object) -> list[str]:
    with pytest.raises(ConfigError) as info:
        parse_config(data)
    return info.value.errors


# -- what a valid config becomes --------------------------------------------


def test_a_valid_config_parses_into_the_shared_shapes() -> None:
    config = parse_config(valid(), "routes.yaml")
    assert config.nodes[0] == NodeConfig("gpu-a", "http://127.0.0.1:8080/v1")
    assert config.nodes[1] == NodeConfig("gpu-b", "http://127.0.0.1:8081/v1", "openai", None, 2, 3)
    assert config.nodes[2].api_key_env == "CLOUD_KEY"
    assert list(config.models) == ["fast", "claude-*"]  # the file's order
    assert config.models["fast"] == (
        Tier("qwen3", ("gpu-a", "gpu-b")),
        Tier("gpt-oss", ("cloud",), 0),
    )
    assert config.keys == (KeyPolicy("alice", "ALICE_KEY", ("fast",)),)
    assert config.routing == RoutingOptions(500, "none")
    assert config.source == "routes.yaml" and config.node("cloud") is config.nodes[2]


def test_defaults_and_immutability() -> None:
    data = valid()
    del data["keys"], data["routing"]
    config = parse_config(data)
    assert config.keys == () and config.routing == RoutingOptions(2000, "prefix")
    assert config.nodes[0].dialect == "openai" and config.nodes[0].weight == 1
    assert config.nodes[0].max_conns is None and config.models["fast"][0].wait_ms is None
    with pytest.raises(TypeError):
        config.models["new"] = ()  # type: ignore[index]
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.nodes[0].url = "http://elsewhere"  # type: ignore[misc]


def test_operations_keys_parse_admin_prices_and_budgets() -> None:
    from llmchat.proxy.routing.config import AdminOptions, Budget, BudgetOptions, Price

    data = valid()
    data["admin"] = {"key_env": "ADMIN_KEY"}
    data["prices"] = {"gpt-*": {"input": 2.5, "output": 10, "cache_read": 1.25}}
    data["budgets"] = {"refresh_s": 2}
    data["keys"][0]["budget"] = {"period": "week", "cost": 5, "rpm": 60}
    config = parse_config(data)
    assert config.admin == AdminOptions("ADMIN_KEY")
    assert config.prices == {"gpt-*": Price(2.5, 10, 1.25, None)}
    assert config.budgets == BudgetOptions(2.0)
    assert config.keys[0].budget == Budget("week", 5, None, 60)
    defaults = parse_config(valid())
    assert defaults.admin is None and dict(defaults.prices) == {}
    assert defaults.keys[0].budget is None and defaults.budgets.refresh_s == 5.0


@pytest.mark.parametrize(
    ("where", "value", "path"),
    [
        ("admin", {}, "admin"),
        ("prices", {"m": {"input": -1}}, "prices.m.input"),
        ("prices", {"m": {}}, "prices.m"),
        ("budgets", {"refresh_s": -1}, "budgets.refresh_s"),
    ],
)
def test_operations_keys_are_checked(where: str, value: Any, path: str) -> None:
    data = valid()
    data[where] = value
    assert any(path in error for error in errors_of(data))


def test_parse_does_not_touch_its_input() -> None:
    data = valid()
    before = copy.deepcopy(data)
    parse_config(data)
    assert data == before


def test_every_dialect_is_accepted() -> None:
    assert DIALECTS == ("openai", "anthropic", "responses", "ollama", "gemini")
    data = valid()
    for dialect in DIALECTS:
        data["nodes"][0]["dialect"] = dialect
        assert parse_config(data).nodes[0].dialect == dialect


def test_the_example_is_complete_and_valid() -> None:
    config = load_config(EXAMPLE)
    assert config.digest == hashlib.sha256(EXAMPLE.read_bytes()).hexdigest()
    assert config.source == str(EXAMPLE)
    llama = [n for n in config.nodes if n.api_key_env is None]
    cloud = [n for n in config.nodes if n.api_key_env is not None]
    assert len(llama) == 2 and len(cloud) == 1
    aliases = dict(config.models)
    assert any(len(tiers) >= 2 for tiers in aliases.values())
    assert "claude-*" in aliases
    assert len(config.keys) == 2
    assert config.routing.affinity == "prefix"


def test_the_schema_ships_in_the_package() -> None:
    import llmchat.proxy.routing as routing

    assert (Path(routing.__file__).parent / "config.schema.json").is_file()
    assert schema()["$defs"]["node"]["properties"]["dialect"]["enum"] == list(DIALECTS)
    assert "config.schema.json" in (REPO_ROOT / "setup.cfg").read_text()


# -- errors, each naming its path, all at once ----------------------------------


def test_the_issues_examples_read_as_written() -> None:
    data = valid()
    data["models"]["fast"][1]["nodes"] = ["gpu-c"]
    data["nodes"].append({"name": "gpu-a", "url": "http://127.0.0.1:9/v1"})
    data["nodes"][0]["dialect"] = "grpc"
    errors = errors_of(data)
    assert "models.fast[1].nodes[0]: unknown node 'gpu-c'" in errors
    assert "nodes[3].name: duplicate 'gpu-a' (also nodes[0])" in errors
    expected = "nodes[0].dialect: 'grpc' is not one of openai, anthropic, responses, ollama, gemini"
    assert expected in errors
    assert len(errors) == 3


def test_unknown_keys_are_refused_everywhere_and_say_so() -> None:
    data = valid()
    data["nodes"][0]["max_con"] = 4
    data["modles"] = {}
    data["models"]["fast"][0]["wait"] = 1
    data["keys"][0]["model"] = ["x"]
    data["routing"]["affinty"] = "none"
    errors = errors_of(data)
    assert errors[0].startswith("modles: unknown key;")
    assert "nodes[0].max_con: unknown key; did you mean 'max_conns'?" in errors[1]
    assert "known: name, url, dialect, api_key_env, max_conns, weight" in errors[1]
    assert any(e.startswith("models.fast[0].wait: unknown key") for e in errors)
    assert any(e.startswith("keys[0].model: unknown key; did you mean 'models'?") for e in errors)
    assert any(e.startswith("routing.affinty: unknown key") for e in errors)
    assert len(errors) == 5


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        (("nodes", 0, "max_conns"), 0, "nodes[0].max_conns: must be >= 1, got 0"),
        (("nodes", 0, "weight"), -2, "nodes[0].weight: must be >= 1, got -2"),
        (("nodes", 0, "max_conns"), True, "nodes[0].max_conns: expected an integer, got a boolean"),
        (("nodes", 0, "weight"), 1.5, "nodes[0].weight: expected an integer, got a number"),
        (("models", "fast", 1, "wait_ms"), -1, "models.fast[1].wait_ms: must be >= 0, got -1"),
        (("routing", "wait_timeout_ms"), -5, "routing.wait_timeout_ms: must be >= 0, got -5"),
        (("routing", "health_interval_s"), 0, "routing.health_interval_s: must be > 0, got 0"),
        (
            ("routing", "affinity"),
            "sticky",
            "routing.affinity: 'sticky' is not one of prefix, none",
        ),
        (("nodes", 0, "url"), "ftp://h/v1", "nodes[0].url: 'ftp://h/v1' must start with http://"),
        (("nodes", 0, "url"), "127.0.0.1:8080", "nodes[0].url: '127.0.0.1:8080' must start"),
        (("nodes", 0, "url"), "http:///v1", "nodes[0].url: 'http:///v1' names no host"),
        (
            ("nodes", 0, "url"),
            "http://h:99999/v1",
            "nodes[0].url: 'http://h:99999/v1' is not a URL",
        ),
        (("nodes", 0, "url"), "", "nodes[0].url: must not be empty"),
        (("nodes", 0, "name"), "a b", "nodes[0].name: 'a b' is not a name"),
        (("nodes", 0, "api_key_env"), "MY-KEY", "nodes[0].api_key_env: 'MY-KEY' is not an env"),
        (("keys", 0, "key_env"), "$ALICE", "keys[0].key_env: '$ALICE' is not an environment"),
        (("keys", 0, "models"), ["fa[st"], "keys[0].models[0]: unclosed '[' in glob 'fa[st'"),
        (("models", "fast", 0, "nodes"), [], "models.fast[0].nodes: must not be empty"),
        (("models", "fast"), [], "models.fast: must not be empty"),
        (("models", "fast", 0, "model"), 3, "models.fast[0].model: expected a string, got an int"),
        (("nodes",), {}, "nodes: expected a list, got a mapping"),
        (("models",), {}, "models: must not be empty"),
    ],
)
def test_each_check_names_its_path(where: tuple[Any, ...], value: object, message: str) -> None:
    data = valid()
    target: Any = data
    for step in where[:-1]:
        target = target[step]
    target[where[-1]] = value
    errors = errors_of(data)
    assert any(e.startswith(message) for e in errors), errors


def test_missing_required_keys_are_named() -> None:
    data = valid()
    del data["nodes"][1]["url"]
    del data["models"]["fast"][0]["nodes"]
    del data["keys"][0]["key_env"]
    assert errors_of(data) == [
        "nodes[1].url: required, missing",
        "models.fast[0].nodes: required, missing",
        "keys[0].key_env: required, missing",
    ]
    assert errors_of({}) == ["nodes: required, missing", "models: required, missing"]
    assert errors_of(None) == ["(top level): expected a mapping, got null"]


def test_names_and_key_variables_are_unique_and_tiers_list_a_node_once() -> None:
    data = valid()
    data["keys"].append({"name": "alice", "key_env": "ALICE_KEY"})
    data["models"]["fast"][0]["nodes"] = ["gpu-a", "gpu-a"]
    assert errors_of(data) == [
        "models.fast[0].nodes[1]: 'gpu-a' is listed twice in this tier",
        "keys[1].name: duplicate 'alice' (also keys[0])",
        "keys[1].key_env: duplicate 'ALICE_KEY' (also keys[0])",
    ]


def test_glob_aliases_are_checked_and_odd_names_quoted_in_paths() -> None:
    data = valid()
    data["models"]["gpt-[45"] = [{"model": "m", "nodes": ["nowhere"]}]
    data["models"][3.5] = [{"model": "m", "nodes": ["gpu-a"]}]
    errors = errors_of(data)
    assert "models[\"gpt-[45\"]: unclosed '[' in glob 'gpt-[45'" in errors
    assert "models[\"gpt-[45\"][0].nodes[0]: unknown node 'nowhere'" in errors
    assert "models: the name 3.5 is not a string (quote it in YAML)" in errors


def test_the_checks_survive_any_shape() -> None:
    for data in ([], "x", {"nodes": [1, "a", None], "models": {"a": [1, {"nodes": "x"}]}}):
        assert errors_of(data)
    bad: dict[str, Any] = {"nodes": {"a": 1}, "models": [], "keys": {}, "routing": []}
    assert len(errors_of(bad)) == 4


@pytest.mark.parametrize(
    ("pattern", "broken"),
    [
        ("claude-*", False),
        ("gpt-?", False),
        ("[ab]x", False),
        ("[!a]x", False),
        ("[]]", False),
        ("[!]]", False),
        ("a[", True),
        ("a[!", True),
        ("a[]", True),
        ("x[a-", True),
    ],
)
def test_glob_problem(pattern: str, broken: bool) -> None:
    assert (glob_problem(pattern) is not None) is broken


def test_path_text() -> None:
    assert path_text(["models", "fast", 1, "nodes", 0]) == "models.fast[1].nodes[0]"
    assert path_text(["models", "claude-*", 0]) == 'models["claude-*"][0]'
    assert path_text([]) == "(top level)"


def test_config_error_is_both_kinds_and_lists_everything() -> None:
    exc = ConfigError(["a: x", "b: y"], "f.yaml")
    assert isinstance(exc, ValueError) and isinstance(exc, LLMChatError)
    assert str(exc) == "f.yaml: 2 errors:\n  a: x\n  b: y"
    assert str(ConfigError(["a: x"])) == "<config>: 1 error:\n  a: x"


# -- files ---------------------------------------------------------------------


def test_a_yaml_file(tmp_path: Path) -> None:
    path = tmp_path / "routes.yaml"
    path.write_text(
        "nodes:\n  - {name: gpu-a, url: 'http://127.0.0.1:8080/v1'}\n"
        "models:\n  fast: [{model: m, nodes: [gpu-a]}]\nrouting: {affinity: none}\n"
    )
    config = load_config(path)
    assert config.routing.affinity == "none"  # YAML's `none` is a string, not null
    assert config.digest == hashlib.sha256(path.read_bytes()).hexdigest()


def test_json_loads_without_pyyaml(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "yaml", None)  # import yaml: ImportError
    named = tmp_path / "routes.json"
    named.write_text(json.dumps(valid()))
    assert load_config(named).digest == hashlib.sha256(named.read_bytes()).hexdigest()
    content = tmp_path / "routes.yaml"  # JSON content under any name
    content.write_text(json.dumps(valid(), indent=2))
    assert load_config(content).nodes == load_config(named).nodes
    yaml_file = tmp_path / "real.yaml"
    yaml_file.write_text("nodes: []\n")
    with pytest.raises(ConfigError) as info:
        load_config(yaml_file)
    assert info.value.errors == [
        "not JSON, so read as YAML, which needs PyYAML: pip install 'llmchat[proxy]' "
        "(or write the config as JSON)"
    ]
    assert str(yaml_file) in str(info.value)


@pytest.mark.parametrize(
    ("name", "raw", "message"),
    [
        ("a.json", b'{"nodes": [', "line 1, column 12: not valid JSON: Expecting value"),
        ("a.json", b'{"models": {}, "models": {}}', "duplicate key 'models' in one object"),
        ("a.yaml", b"nodes: [\n", "line 2, column 1: "),
        ("a.yaml", b"models: {}\nmodels: {}\n", "line 2, column 1: duplicate key 'models'"),
        ("a.yaml", b"models:\n  fast: []\n  fast: []\n", "line 3, column 3: duplicate key 'fast'"),
        ("a.yaml", b"\xff\xfe", "not UTF-8 (byte 0)"),
        ("a.yaml", b"", "(top level): expected a mapping, got null"),
        ("a.yaml", b"x: !!python/object:os.system x\n", "line 1, column 4: "),
    ],
)
def test_unreadable_files(tmp_path: Path, name: str, raw: bytes, message: str) -> None:
    path = tmp_path / name
    path.write_bytes(raw)
    with pytest.raises(ConfigError) as info:
        load_config(path)
    assert info.value.errors[0].startswith(message), info.value.errors
    assert info.value.source == str(path)


def test_a_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path / "nope.yaml")
    assert info.value.errors == ["cannot read the file: No such file or directory"]
