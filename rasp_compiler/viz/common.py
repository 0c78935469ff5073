"""Helpers shared by the pictures."""

from __future__ import annotations

import functools
import inspect
import os
import re
import warnings
from typing import Any, Callable, TypeVar

from rasp_compiler.errors import UserError

T = TypeVar("T")


def image_size(path: str) -> tuple[int, int]:
    """(width, height) in pixels of a PNG, or the viewBox size of an SVG."""
    with open(path, "rb") as fh:
        head = fh.read(4096)
    if head.startswith(b"\x89PNG"):
        return int.from_bytes(head[16:20], "big"), int.from_bytes(head[20:24], "big")
    m = re.search(rb'viewBox="[-\d.]+ [-\d.]+ ([\d.]+) ([\d.]+)"', head)
    if m:
        return int(float(m.group(1))), int(float(m.group(2)))
    return 0, 0


def shorten(text: str, width: int) -> str:
    """``text`` on one line in at most ``width`` characters, cut in the middle: a label keeps both
    what it starts with and the operator that often ends it (``aggregate(…) > 0``)."""
    text = " ".join(str(text).split())
    if len(text) <= width:
        return text
    head = (width - 1) * 2 // 3
    return text[:head] + "…" + text[len(text) - (width - 1 - head):]


def check_picture_path(path: Any, fmt: str | None) -> None:
    """Refuse, before anything is drawn, a picture matplotlib would fail to write only after
    drawing it: a missing directory, or a format (``fmt``, else the suffix) it has no writer for."""
    if not isinstance(path, (str, os.PathLike)):
        return  # a file object: matplotlib writes to it
    import matplotlib
    from matplotlib.backend_bases import FigureCanvasBase

    path = os.fspath(path)
    supported = sorted(FigureCanvasBase.get_supported_filetypes())
    chosen = fmt or os.path.splitext(path)[1][1:] or matplotlib.rcParams["savefig.format"]
    if str(chosen).lower() not in supported:
        where = f"fmt={fmt!r}" if fmt else f"the suffix of {path}"
        raise UserError(f"cannot draw {path}: unknown image format {chosen!r} ({where})",
                        hint=f"use one of: {', '.join(supported)}")
    check_directory_of(path)


def check_directory_of(path: str) -> None:
    """Refuse a picture whose path is a directory, or whose directory is missing or is a file,
    saying which (a directory there failed only when the picture was written: "Is a directory")."""
    if os.path.isdir(path):
        suffix = os.path.splitext(path)[1] or ".png"
        raise UserError(f"cannot write {path}: it is a directory, not a picture file",
                        hint=f"give the picture's file name, e.g. {os.path.join(path, 'plan' + suffix)}")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        if os.path.exists(parent):
            raise UserError(f"cannot write {path}: {parent} is not a directory")
        raise UserError(f"cannot write {path}: the directory {parent} does not exist",
                        hint="create it first, or write the picture elsewhere")


# Largest picture drawn, in pixels at 100 dpi: a 512-token trace of sort asked matplotlib for a
# 115,000 x 38,000 canvas and died in bad_alloc after 15 s (128 tokens: 107M pixels, 1.8 GB)
MAX_PIXELS = 200_000_000


# how the files a picture may replace begin: PNG, SVG (or its XML head), PDF, PostScript, JPEG, GIF
_PICTURE_HEADS = (b"\x89PNG", b"<?xml", b"<svg", b"%PDF", b"%!PS", b"\xff\xd8\xff", b"GIF8")
_PICTURE_SUFFIXES = {"png", "svg", "svgz", "pdf", "ps", "eps", "jpg", "jpeg", "tif", "tiff", "webp",
                     "gif", "pgf", "raw", "rgba"}


def refuse_replacing_a_non_picture(path: Any) -> None:
    """`rasp show prog.rasp ... -o prog.rasp` wrote a PNG over the program (any name that is not a
    picture's was drawn in PNG): a file there whose name is not a picture's, and whose bytes are
    not one, is refused, not replaced."""
    text = os.fspath(path)
    suffix = os.path.splitext(text)[1].lower().lstrip(".")
    if suffix in _PICTURE_SUFFIXES or os.path.islink(text) or not os.path.isfile(text):
        return
    try:
        with open(text, "rb") as fh:
            head = fh.read(16)
    except OSError:
        return  # unreadable: writing it says why
    if head and not head.lstrip().startswith(_PICTURE_HEADS):
        raise UserError(f"cannot write {text}: it exists and is not a picture (a .{suffix or '?'} "
                        "file); it is not replaced",
                        hint=f"give the picture a .png or .svg name, e.g. {os.path.splitext(text)[0]}.png")


def write_figure(fig: Any, path: Any, fmt: str | None, **options: Any) -> None:
    """``fig.savefig`` at 100 dpi, then close it; an unwritable file, or a picture too large to
    draw, is a UserError."""
    import matplotlib.pyplot as plt

    width, height = (round(v * 100) for v in fig.get_size_inches())
    if width * height > MAX_PIXELS:
        plt.close(fig)
        raise UserError(f"cannot draw {path}: the picture would be {width:,} x {height:,} pixels, more "
                        f"than the {MAX_PIXELS // 1_000_000} million drawn at once",
                        hint="draw a shorter input, or a smaller program")
    import matplotlib

    chosen = str(fmt or (os.path.splitext(os.fspath(path))[1][1:] if isinstance(path, (str, os.PathLike))
                         else "") or matplotlib.rcParams["savefig.format"]).lower()
    # the same picture twice gives the same bytes: an SVG carried the time it was drawn and random
    # ids (svg.hashsalt unset), a PDF its creation date
    undated = {"svg": {"Date": None}, "svgz": {"Date": None}, "pdf": {"CreationDate": None}}
    if chosen in undated and "metadata" not in options:
        options["metadata"] = undated[chosen]
    def save(target: Any) -> None:
        with matplotlib.rc_context({"svg.hashsalt": "rasp-compiler"}):
            fig.savefig(target, format=fmt or chosen, dpi=100, **options)

    if isinstance(path, (str, os.PathLike)):
        refuse_replacing_a_non_picture(path)
    try:
        if isinstance(path, (str, os.PathLike)):
            from rasp_compiler.atomic_dir import write_file

            # beside it, renamed over it, as every artifact: savefig wrote in place, so a killed
            # draw left half a picture, and a link there had the file it names overwritten
            write_file(path, save, example_name="plan.png")
        else:  # a file object of the caller's
            save(path)
    except OSError as err:
        raise UserError(f"cannot write {path}: {err.strerror or err}") from None
    finally:
        plt.close(fig)


def notes_missing_glyphs(draw: Callable[..., T]) -> Callable[..., T]:
    """``draw`` (a function with a ``path`` argument) with matplotlib's warnings about characters
    its font lacks turned into one note on stderr naming them (see ``_say_missing_glyphs``)."""
    signature = inspect.signature(draw)

    @functools.wraps(draw)
    def drawn(*args: Any, **kwargs: Any) -> T:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            result = draw(*args, **kwargs)
        _say_missing_glyphs(caught, signature.bind(*args, **kwargs).arguments.get("path"))
        return result
    return drawn


def _say_missing_glyphs(caught: list[warnings.WarningMessage], path: Any) -> None:
    """One note naming the characters the font cannot draw (a token '日' or '👍'), where matplotlib
    warned once per character and place with its own source line ("UserWarning: Glyph 26412 (...)
    missing from font(s) DejaVu Sans.  box = t.get_window_extent(renderer)"); other warnings are
    passed on as they were."""
    import sys

    missing: list[str] = []
    for w in caught:
        m = re.match(r"Glyph (\d+) ", str(w.message))
        if m and "missing from" in str(w.message):
            char = chr(int(m.group(1)))
            if char not in missing:
                missing.append(char)
        else:
            warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    if missing:
        shown = ", ".join(repr(c) for c in missing)
        print(f"note: {os.fspath(path) if isinstance(path, (str, os.PathLike)) else 'the picture'}: the font "
              f"has no glyph for {shown}, drawn as empty boxes", file=sys.stderr)
