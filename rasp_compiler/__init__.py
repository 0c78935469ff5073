"""rasp-compiler: RASP programs to exact transformer weights."""

__version__ = "0.1.0"
