"""ldpgraph from Python.

* LDP mechanisms on NumPy arrays, the C++ code agents and the curator run
  (:mod:`ldpgraph.mechanisms`): :func:`perturb`, :func:`estimate`,
  :func:`estimate_mean`, :func:`moments`, :func:`perturb_labels`,
  :func:`estimate_label_counts`.
* The curator's admin API (:mod:`ldpgraph.admin`): :class:`Admin`, with
  ``ids, X = admin.export(result_id)``; failures raise :class:`AdminError`.
* The names of the wire's enums (mechanism kinds, attributes, pipeline
  methods and tasks) as the command line spells them, derived from the
  proto (:mod:`ldpgraph.names`).
"""
from .admin import Admin, AdminError, read_config
from .mechanisms import (MECHANISMS, estimate, estimate_label_counts, estimate_mean,
                         moments, perturb, perturb_labels)

__version__ = "0.1.0"

__all__ = ["Admin", "AdminError", "read_config", "MECHANISMS", "perturb", "estimate",
           "estimate_mean", "moments", "perturb_labels", "estimate_label_counts"]
