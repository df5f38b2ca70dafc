"""`dvc plots show` through the repository's page template renders with no network (issue #33, D200): the page
carries Vega, Vega-Lite and vega-embed inline, loads nothing, and every plot it embeds renders with that Vega."""

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import vl_convert
import yaml

from conftest import ROOT
from repro.reporting.plots import PLOTS_TEMPLATE, offline_plots_template, save_plot_data


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("template") / "offline.html"
    path.write_text(offline_plots_template(), encoding="utf-8")
    return path


def dvc(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}")
    result = subprocess.run(["dvc", *args], cwd=cwd, env=env, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    return result


@pytest.mark.slow
def test_dvc_plots_show_writes_a_page_that_loads_nothing_and_whose_plots_render(tmp_path, template, monkeypatch):
    """A repository with the project's DVC config, its `series` template, one figure's data and the plots section
    of dvc.yaml: `dvc plots show` writes a page with one inline script and no remote resource."""
    subprocess.run(["git", "init", "-q"], cwd=tmp_path, check=True)
    shutil.copytree(ROOT / ".dvc", tmp_path / ".dvc", ignore=shutil.ignore_patterns("cache", "tmp", "offline.html"))
    shutil.copy(template, tmp_path / PLOTS_TEMPLATE)
    plots = yaml.safe_load((ROOT / "dvc.yaml").read_text())["plots"]
    (tmp_path / "dvc.yaml").write_text(yaml.safe_dump({"plots": plots[1:2]}))  # Figure 5's: x noise, y EM
    monkeypatch.chdir(tmp_path)
    save_plot_data(pd.DataFrame({"dataset": ["NQ"] * 4, "method": ["EviOmni", "EviOmni", "Full", "Full"],
                                 "noise": [0, 2, 0, 2], "EM": [40.0, 38.5, 41.0, 35.0]}),
                   "figure5_noise_robustness", x="noise", y="EM", series="method", panel="dataset")
    dvc("plots", "show", "-o", "shown", cwd=tmp_path)

    page = (tmp_path / "shown" / "index.html").read_text(encoding="utf-8")
    bundle = template.read_text(encoding="utf-8").split("<script>\n", 1)[1].split("\n</script>", 1)[0]
    assert bundle in page and "window.vegaEmbed=" in bundle
    markup = page.replace(bundle, "")  # the page without the libraries' text: what a browser would fetch
    assert not re.search(r"\b(src|href)\s*=", markup) and "cdn.jsdelivr" not in markup, markup
    specs = re.findall(r"var spec = (.*);\n\s*vegaEmbed", markup)
    assert len(specs) == 1
    svg = vl_convert.vegalite_to_svg(json.loads(specs[0]))  # the Vega that vl-convert bundles into the page
    assert svg.startswith("<svg") and "EviOmni" in svg and "Full" in svg


@pytest.mark.skipif(shutil.which("node") is None, reason="needs Node.js to run the page's script")
def test_the_pages_script_defines_vega_embed_without_a_network(template):
    script = template.read_text(encoding="utf-8").split("<script>\n", 1)[1].split("\n</script>", 1)[0]
    runner = "const window = {}; " + script + "\nprocess.stdout.write(typeof window.vegaEmbed);"
    result = subprocess.run(["node"], input=runner, capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout == "function"
