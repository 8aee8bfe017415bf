"""Sphinx + MyST-NB configuration of the course website (``make book``; output in build/site/).

The source folder is the repository root (``-c book .``): the site is built from the committed, executed notebooks
in ``notebooks/`` (never re-executed: ``nb_execution_mode = "off"``), the derivation notes in ``docs/`` and the
landing page ``book/index.md``, which includes the README and its course map. ``-W`` makes every warning an error
(broken cross-references, missing images, unknown output types).
"""

from pathlib import Path

project = "CalibMed"
author = "the CalibMed contributors"
copyright = "CalibMed contributors; code MIT, datasets under their own licences"

extensions = ["myst_nb", "sphinx.ext.mathjax", "sphinx-mathjax-offline", "sphinx.ext.autodoc",
              "sphinx.ext.autosummary"]
root_doc = "book/index"
include_patterns = ["book/index.md", "book/api.rst", "book/generated/*.rst", "docs/*.md", "CHANGELOG.md",
                    "notebooks/[0-9][0-9]_*.ipynb"]
exclude_patterns = ["build", "runs", ".venv", "**/.ipynb_checkpoints"]

# The API reference (book/api.rst; an .rst file because autosummary looks for the stubs to generate in .rst files
# only): one page per module of helpers/, generated from the docstrings into book/generated/ (ignored by git, rebuilt
# by every `make book`) with the template templates/autosummary/module.rst. templates_path is absolute: autosummary
# reads it relative to the source folder (the repository root), the HTML builder relative to this folder.
templates_path = [str(Path(__file__).resolve().parent / "templates")]
autosummary_generate = True
autosummary_imported_members = False
autodoc_default_options = {"member-order": "bysource"}
autodoc_typehints = "description"  # the signatures stay readable; the types go under the description
autodoc_preserve_defaults = True  # show `n_bins=DEFAULT_N_BINS`, not the value of the day

# the notebooks are shown as committed: executing them belongs to `make course`
nb_execution_mode = "off"
nb_merge_streams = True
# widget views need the saved widget state, which the notebooks do not keep: show their text form instead
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_dmath_double_inline = True  # the notebooks write $$…$$ inside paragraphs, as Jupyter allows
myst_heading_anchors = 3

html_theme = "sphinx_book_theme"
html_title = "CalibMed · calibration-aware losses for medical image classification"
html_theme_options = {
    "show_navbar_depth": 1,
    "show_toc_level": 2,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "home_page_in_toc": True,
}
html_last_updated_fmt = None
# The download button of a notebook page links to _sources/notebooks/<name>.ipynb: the committed notebook itself
# (Sphinx copies each page's source file there; html_sourcelink_suffix is "" under sphinx-book-theme).
html_copy_source = True
html_show_sourcelink = False  # the download button already offers the source
html_extra_path = ["extra"]  # index.html at the site root: a redirect to the landing page book/index.html

WIDGET_NOTE = ("Interactive widget: run this notebook in JupyterLab (make lab) to move its sliders; the static figure "
               "above shows the same plot for the default setting.")


def replace_widget_reprs(app, doctree):
    """A widget view cannot be drawn without the widget state the notebooks do not store; its text form
    (``interactive(children=(IntSlider(...``) would only puzzle a reader, so it becomes one explanatory line."""
    from docutils import nodes

    for block in list(doctree.findall(nodes.literal_block)):
        if block.astext().startswith("interactive(children="):
            note = nodes.paragraph(text=WIDGET_NOTE, classes=["widget-note"])
            block.replace_self(nodes.container("", note, classes=["output", "widget-note"]))


def setup(app):
    app.connect("doctree-resolved", lambda app, doctree, docname: replace_widget_reprs(app, doctree))
html_context = {"default_mode": "light"}  # pydata-sphinx-theme logs a console error when no mode is set
html_favicon = "favicon.svg"
html_static_path = ["static"]
html_css_files = ["calibmed.css"]
html_js_files = ["download.js"]  # the notebook link of the download button saves the file instead of opening it
