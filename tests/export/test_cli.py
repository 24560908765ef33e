"""aiayn-export without its optional packages: a cheap import, and a clear error naming the missing
package and the extra that installs it."""

from __future__ import annotations

import importlib
import subprocess
import sys

import pytest

from aiayn.export import cli, targets


def test_importing_the_module_imports_neither_torch_nor_the_export_packages():
    code = (
        "import sys, aiayn.export; "
        "print(sorted(m for m in ('torch', 'transformers', 'ctranslate2', 'lightning') if m in sys.modules))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


@pytest.mark.parametrize(("target", "package"), [("hf", "transformers"), ("ct2", "ctranslate2")])
def test_a_missing_package_is_named_with_the_extra_that_installs_it(target, package, monkeypatch, tmp_path, capsys):
    real = importlib.import_module

    def without(name, *args, **kwargs):
        if name == package:
            raise ModuleNotFoundError(f"No module named '{package}'")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(importlib, "import_module", without)
    with pytest.raises(ImportError, match=rf"`{package}`.*pip install -e \"\.\[export\]\""):
        targets.require(target)
    # The command says so before it opens the run (which need not even exist).
    assert cli.main([str(tmp_path / "no-run"), str(tmp_path / "out"), "--to", target]) == 2
    err = capsys.readouterr().err
    assert package in err and 'pip install -e ".[export]"' in err
    assert not (tmp_path / "out").exists()


def test_quantization_is_for_ct2_only(tmp_path, capsys):
    pytest.importorskip("transformers")
    assert cli.main([str(tmp_path), str(tmp_path / "out"), "--to", "hf", "--quantization", "int8"]) == 2
    assert "--quantization is for --to ct2" in capsys.readouterr().err
