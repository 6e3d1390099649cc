"""The real data in ../shared (never copied into the project) and the project's root."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SHARED = ROOT.parent / "shared"
PCS = SHARED / "data" / "pcs"
TRACES = ("0e4a51", "b436b2", "6214e9", "6c71a0", "ee9e8c")
