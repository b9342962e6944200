"""Where the tests' data lives, named once for every test folder (however deep it sits)."""

from __future__ import annotations

from pathlib import Path

TESTS_DIR = Path(__file__).resolve().parent.parent
REPO_ROOT = TESTS_DIR.parent
FIXTURES_DIR = TESTS_DIR / "fixtures"
JS_DIR = TESTS_DIR / "js"
SHARED = REPO_ROOT.parent / "shared"
CONFORMANCE_DIR = SHARED / "conformance"
CAPTURES_DIR = SHARED / "captures"
