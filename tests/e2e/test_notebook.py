"""examples/quickstart.ipynb runs top to bottom, offline, in a fresh kernel (nbclient), and
shows what it says it shows: items with their images, a diff whose counts add up."""

import os

import nbclient  # the test extra installs nbclient, nbformat and ipykernel (the kernel)
import nbformat


def test_quickstart_notebook_runs(repo, tmp_path, monkeypatch):
    src = str(repo / "src")
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_CACHE", str(tmp_path / "hf-cache"))
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    nb = nbformat.read(repo / "examples" / "quickstart.ipynb", as_version=4)
    assert all(not c.get("outputs") for c in nb.cells if c.cell_type == "code"), "saved outputs"
    client = nbclient.NotebookClient(
        nb,
        timeout=600,
        kernel_name="python3",
        resources={"metadata": {"path": str(tmp_path)}},
    )
    client.execute()
    errors = [o for c in nb.cells for o in c.get("outputs", []) if o.output_type == "error"]
    assert not errors, errors
    html = {
        n: "".join(o.get("data", {}).get("text/html", "") for o in c.get("outputs", []))
        for n, c in enumerate(nb.cells)
    }
    shown = [h for h in html.values() if 'class="mvqa-item"' in h]
    assert len(shown) >= 3 and all("data:image/jpeg;base64," in h for h in shown)
    assert any('<li class="correct">' in h for h in shown)
    assert "images not shown" not in "".join(shown)
