"""Sphinx configuration: the user guide (guide/) and the API reference (api.rst).

Build (warnings are errors, and nitpicky mode makes every unresolved cross reference one):

    python -m sphinx -W --keep-going -n -b html docs docs/_build/html
"""

project = "conserve"
author = "the conserve developers"
extensions = ["sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax"]
exclude_patterns = ["_build", "figures"]
autodoc_member_order = "bysource"
autodoc_typehints = "none"
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
nitpicky = True
# Docstrings write shapes and units where numpydoc puts types ("q : (N+1, n_q) m"); napoleon turns
# those into class references, so only references into conserve itself are checked.
nitpick_ignore_regex = [(r"py:class", r"(?!conserve\.).*")]
html_theme = "alabaster"
