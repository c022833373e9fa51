"""The decider code fingerprint recorded with every autoscale decision."""

from __future__ import annotations

from pathlib import Path

import autoscaler
from controlplane.decider_code import decider_code, fingerprint


def _tree(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def test_any_edit_to_the_source_changes_the_fingerprint(tmp_path: Path) -> None:
    base = {"a.py": "x = 1\n", "sub/b.py": "y = 2\n"}
    one = fingerprint(_tree(tmp_path / "one", base))
    assert len(one) == 12 and int(one, 16) >= 0
    assert fingerprint(_tree(tmp_path / "same", base)) == one  # where it lives does not count
    for label, files in {
        "comment": {**base, "a.py": "x = 1  # why\n"},
        "new module": {**base, "c.py": ""},
        "renamed": {"a2.py": "x = 1\n", "sub/b.py": "y = 2\n"},
        # Bytes moved across a file boundary: same concatenation, different files.
        "moved": {"a.py": "x = 1\ny", "sub/b.py": " = 2\n"},
    }.items():
        assert fingerprint(_tree(tmp_path / label.replace(" ", "-"), files)) != one, label
    # Not source: compiled caches and data files do not count.
    _tree(tmp_path / "one", {"__pycache__/a.cpython-311.pyc": "junk", "notes.txt": "n"})
    assert fingerprint(tmp_path / "one") == one


def test_the_running_code_is_the_autoscaler_packages() -> None:
    assert decider_code() == fingerprint(Path(autoscaler.__file__).resolve().parent)
