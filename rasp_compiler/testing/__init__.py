"""Random programs and differential checking: the compiler's tests and benches, not the compiler.

* ``random_source``: random well-typed RASP programs as source text, and ``check_generated``
  (compile one, compare the model with the interpreter);
* ``random_pyapi``: random tracr-style programs written as Python source against the Python API,
  and its own ``check_generated``.

``bench/differential.py`` runs either over a range of seeds; tests/test_differential.py and
tests/test_pyapi_differential.py run a few hundred in the default suite. A program is
deterministic in its seed, so a failing seed is a reproducer.
"""
