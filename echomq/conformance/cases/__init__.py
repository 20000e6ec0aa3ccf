"""The hand-written conformance cases, one module per script of ``lua/``
(``CASES``: a list of ``dsl.case``). The generator records their outcomes."""
