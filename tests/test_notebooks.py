"""Notebooks: stored outputs come from a default-profile papermill run, and every notebook runs
headless at the smoke profile with papermill (nbval re-executes them too: `make test`)."""

import json
import re
import shutil
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))
MAX_BYTES = 3 * 1024 * 1024


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found under notebooks/"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_notebook_is_a_default_profile_papermill_run(path):
    nb = nbformat.read(path, as_version=4)
    assert nb.metadata["kernelspec"]["name"] == "python3"
    tagged = [c for c in nb.cells if "parameters" in c.metadata.get("tags", [])]
    assert len(tagged) == 1 and "profile" in tagged[0].source
    pm = nb.metadata.get("papermill", {})
    assert pm.get("parameters", {}).get("profile") == "default", (
        f"{path.name} must carry the outputs of `make notebooks` (profile=default); "
        f"found papermill parameters {pm.get('parameters')}"
    )
    code = [c for c in nb.cells if c.cell_type == "code"]
    assert not [o for c in code for o in c.get("outputs", []) if o.get("output_type") == "error"]
    assert any(o.get("data", {}).get("image/png") for c in code for o in c.get("outputs", [])), (
        "no figure stored"
    )
    assert path.stat().st_size < MAX_BYTES, (
        f"{path.name} is {path.stat().st_size} bytes; lower figure dpi"
    )


#: The one alias under which a notebook imports its chapter module (dmlnb.experiments.<module>).
CHAPTER_ALIASES = {
    "protocol": "protocol_chapter",
    "easy_positive": "ep_chapter",
    "facility_location": "fl_chapter",
    "discriminative": "disc_chapter",
    "profs": "profs_chapter",
    "ssdml": "ssdml_chapter",
}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_imports_its_chapter_module_under_its_alias(path):
    nb = nbformat.read(path, as_version=4)
    code = "\n".join(c.source for c in nb.cells if c.cell_type == "code")
    imports = re.findall(r"from dmlnb\.experiments import (\w+)(?: as (\w+))?", code)
    assert not re.search(r"from dmlnb\.experiments\.\w+ import|import dmlnb\.experiments", code), (
        f"{path.name} imports from a chapter module directly; use `from dmlnb.experiments import "
        "<module> as <alias>`"
    )
    chapter = path.stem.split("_", 1)[1]
    assert imports == [(chapter, CHAPTER_ALIASES[chapter])], f"{path.name} imports {imports}"


class _TableHeaders(HTMLParser):
    """The header cells of every HTML table in a stored output: column headers (``thead``) and
    row headers (``th`` in ``tbody``)."""

    def __init__(self) -> None:
        super().__init__()
        self.columns: list[str] = []
        self.rows: list[str] = []
        self._section = self._text = None

    def handle_starttag(self, tag, attrs):
        if tag in ("thead", "tbody"):
            self._section = tag
        elif tag == "th":
            self._text = ""

    def handle_endtag(self, tag):
        if tag == "th" and self._text is not None:
            (self.columns if self._section == "thead" else self.rows).append(self._text.strip())
            self._text = None

    def handle_data(self, data):
        if self._text is not None:
            self._text += data


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_tables_keep_reported_and_reproduced_apart(path):
    """In every stored table, a source label ("reported (...)", "reproduced (...)") heads columns,
    names its dataset first, and never labels a row (a row of one source under another's columns);
    dmlnb.reporting.reported_vs_reproduced builds such tables."""
    from dmlnb.reporting import source_dataset

    nb = nbformat.read(path, as_version=4)
    for i, cell in enumerate(nb.cells):
        for out in cell.get("outputs", []) if cell.cell_type == "code" else []:
            html = out.get("data", {}).get("text/html")
            if not html:
                continue
            headers = _TableHeaders()
            headers.feed(html if isinstance(html, str) else "".join(html))
            rows = [
                r for r in headers.rows if re.match(r"(reported|reproduced)\b", r, re.IGNORECASE)
            ]
            assert not rows, f"{path.name} cell {i}: rows labelled as a source: {rows}"
            for label in headers.columns:
                if re.match(r"(reported|reproduced) \(", label):
                    source_dataset(label)  # raises when the label names no dataset


def _files(folder: Path) -> dict[str, tuple[int, int]]:
    """``{path under folder: (size, modification time in ns)}`` of every file below ``folder``."""
    return {
        str(f.relative_to(folder)): (f.stat().st_size, f.stat().st_mtime_ns)
        for f in folder.rglob("*")
        if f.is_file()
    }


@pytest.mark.notebook
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_at_smoke_profile_with_papermill(path, tmp_path, monkeypatch):
    """As ``make book TRAIN=1`` makes a chapter: a training pass (``python -m dmlnb train``, one
    process, the chapter without its ``skip-in-training`` cells) makes its runs, analyses and
    tables, then the whole chapter renders from them with training disabled and writes nothing
    under ``results``: a run that only a skipped cell asks for fails the render, and an analysis
    or table that only a skipped cell asks for shows as a file the render wrote."""
    papermill = pytest.importorskip("papermill")
    from dmlnb.launch import train_notebook

    monkeypatch.delenv("DMLNB_PROFILE", raising=False)  # the parameter itself must select smoke
    results = str(tmp_path / "results")
    train_notebook(path, 1, "smoke", parameters=[("results_dir", results)], say=lambda _: None)
    made = _files(tmp_path / "results")
    monkeypatch.setenv("DMLNB_NO_TRAINING", "1")
    out = tmp_path / path.name
    papermill.execute_notebook(
        str(path),
        str(out),
        parameters={"profile": "smoke", "results_dir": results},
        kernel_name="python3",
        cwd=str(path.parent),
        progress_bar=False,
    )
    assert _files(tmp_path / "results") == made, (
        "the render wrote under results/ what the training pass did not make"
    )
    nb = nbformat.read(out, as_version=4)
    assert nb.metadata["papermill"]["parameters"]["profile"] == "smoke"
    records = sorted((tmp_path / "results").rglob("record.json"))
    assert records, "the notebook wrote no run record"
    # nbval (`make test` runs it after these tests) executes the stored notebook at the smoke
    # profile in its default results folder: hand it this chapter's records, analyses and tables,
    # so that it reloads them (as on a machine that ran the suite before) instead of training the
    # chapter a third time. Their fingerprints decide: a record that does not match still trains.
    shutil.copytree(tmp_path / "results", ROOT / "results" / path.stem, dirs_exist_ok=True)
    for rec in records:
        data = json.loads(rec.read_text())
        assert data["status"] == "finished"
        assert data["config"]["dataset"] == "digits"  # the smoke profile's data
