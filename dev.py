#!/usr/bin/env python3
"""Set up and run the gaugebook in one command.

    python3 dev.py book     # create .venv if needed, install, build the book readers see:
                            # every chapter at paper scale, from the committed records
    python3 dev.py test     # create .venv if needed, install, run the test suite

Everything else is optional:

    python3 dev.py book --scale quick        # recompute everything small
    python3 dev.py book --make-records --device cuda   # recompute missing paper records
    python3 dev.py check                      # check the built HTML for what a reader sees broken
    python3 dev.py layout                     # tables and code wider than their box (Chromium)
    python3 dev.py screenshots                # screenshot every built page (headless Chromium)
    python3 dev.py screenshots --width 390 --pages '11_*'   # one chapter at a phone's width
    python3 dev.py test -k gauge -x          # extra arguments go to pytest
    python3 dev.py chapter chapters/04_matrix_sensing.md   # execute one chapter to .ipynb

Environment:
    GAUGEKIT_VENV   where the virtual environment lives (default: .venv in this folder); the
                    library is installed editable, and the book's package (gaugebook/, not
                    in the wheel) is put on the venv's path by a gaugebook.pth file
    GAUGEKIT_TORCH  the pip requirement used to install torch when the environment has none
                    (default torch==2.13.0, the CPU wheel). A GPU user installs their own
                    torch into the venv first, or sets this to e.g. "torch==2.13.0" with an
                    index URL in PIP_INDEX_URL / PIP_EXTRA_INDEX_URL.
    GAUGEKIT_DATA   data folder (default: ../shared/data when it exists, else ~/.cache/gaugekit)
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import subprocess
import sys
import time
import venv
from pathlib import Path

ROOT = Path(__file__).resolve().parent
DEFAULT_TORCH = "torch==2.13.0"
# the extras the book and the test suite need (pyproject.toml); `book` and `test` both pull
# `experiments`, named here too so that the list reads as what gets installed
EXTRAS = "experiments,book,test,dev,cluster,transformers,peft"


def _venv_dir() -> Path:
    return Path(os.environ.get("GAUGEKIT_VENV", ROOT / ".venv")).resolve()


def _bin(name: str) -> Path:
    sub = "Scripts" if os.name == "nt" else "bin"
    return _venv_dir() / sub / name


def _run(cmd: list[str], **kw) -> None:
    print("+", " ".join(str(c) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def _has_module(python: Path, module: str) -> bool:
    probe = subprocess.run([str(python), "-c", f"import {module}"], capture_output=True)
    return probe.returncode == 0


def _install_stamp() -> str:
    digest = hashlib.sha256((ROOT / "pyproject.toml").read_bytes()).hexdigest()
    return f"{digest}:{EXTRAS}"


def link_book_package(python: Path) -> None:
    """Make the book's package importable in the venv: a ``.pth`` file naming this checkout.

    ``pip install -e .`` installs the library only (the wheel holds ``gaugekit`` alone); the
    book's machinery, ``gaugebook/``, lives in the checkout, and the chapters, the tests and
    ``python -m gaugebook`` import it from there, whatever their working directory."""
    purelib = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True, capture_output=True, text=True).stdout.strip()
    (Path(purelib) / "gaugebook.pth").write_text(f"{ROOT}\n")


def ensure_env() -> Path:
    """Create the venv and install the project once; reinstall when pyproject.toml changes."""
    t0 = time.perf_counter()
    vdir = _venv_dir()
    python = _bin("python")
    if not python.exists():
        print(f"creating virtual environment in {vdir}", flush=True)
        venv.EnvBuilder(with_pip=True).create(vdir)
    stamp = vdir / ".gaugekit-install"
    if stamp.exists() and stamp.read_text() == _install_stamp():
        return python
    _run([python, "-m", "pip", "install", "--quiet", "--upgrade", "pip"])
    if not _has_module(python, "torch"):
        _run(
            [
                python,
                "-m",
                "pip",
                "install",
                "--quiet",
                os.environ.get("GAUGEKIT_TORCH", DEFAULT_TORCH),
            ]
        )
    _run([python, "-m", "pip", "install", "--quiet", "-e", f"{ROOT}[{EXTRAS}]"])
    link_book_package(python)
    stamp.write_text(_install_stamp())
    print(f"[dev] install: {time.perf_counter() - t0:.0f} s", flush=True)
    return python


def _env(
    scale: str | None = None, device: str | None = None, records: str | None = None
) -> dict[str, str]:
    env = dict(os.environ)
    shared = ROOT.parent / "shared" / "data"
    if "GAUGEKIT_DATA" not in env and shared.is_dir():
        env["GAUGEKIT_DATA"] = str(shared)
    if scale:
        env["GAUGEKIT_SCALE"] = scale
    if device:
        env["GAUGEKIT_DEVICE"] = device
    if records:
        env["GAUGEKIT_RECORDS"] = records
    return env


def quiet_kernel_profile() -> Path:
    """An IPython profile for the book's kernels (under ``_build``): each kernel logs only its
    errors, so the build log does not repeat ipykernel's warning that a local kernel talks over
    TCP without encryption once per chapter. Warnings raised by a chapter's code still show."""
    folder = ROOT / "_build" / ".ipython"
    config = folder / "profile_default" / "ipython_kernel_config.py"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text('c.IPKernelApp.log_level = "ERROR"\n')
    return folder


def cmd_book(args: argparse.Namespace) -> None:
    ensure_env()
    t0 = time.perf_counter()
    if args.clean:
        shutil.rmtree(ROOT / "_build", ignore_errors=True)
    # --all: a full build, so that -W sees every warning; execution is forced in _config.yml.
    records = "make" if args.make_records else None
    env = _env(args.scale, args.device, records)
    env["IPYTHONDIR"] = str(quiet_kernel_profile())
    _run(
        [_bin("jupyter-book"), "build", ROOT, "--all", "-W", "-n", "--keep-going"],
        env=env,
    )
    print(f"[dev] book ({args.scale} scale): {time.perf_counter() - t0:.0f} s", flush=True)
    # the notebooks a reader downloads show the glued values and what the page shows for
    # its references, citations and directives, not MyST markup
    _run([_bin("python"), "-m", "gaugebook.present.notebooks", ROOT / "_build"], env=env)
    cmd_check(args)
    print(f"open {ROOT / '_build' / 'html' / 'index.html'}")


def cmd_check(args: argparse.Namespace) -> None:
    """Check every built page for what a reader would see as broken (see .ci/check_html.py)."""
    _run([_bin("python"), ROOT / ".ci" / "check_html.py", ROOT / "_build" / "html"])


def cmd_layout(args: argparse.Namespace) -> None:
    """Check every built page's layout in headless Chromium (see .ci/check_layout.py)."""
    _run([_bin("python"), ROOT / ".ci" / "check_layout.py", ROOT / "_build" / "html"])


def cmd_screenshots(args: argparse.Namespace) -> None:
    """Screenshot every built chapter with headless Chromium (Debian: apt-get install chromium)
    into _build/screenshots, to look at the pages as a reader does. ``--width`` below Chromium's
    narrowest window (500 px) lays the page out in a frame that wide, as a phone would (the
    shot is cropped to the frame where Pillow is installed); ``--pages`` picks pages by a glob."""
    browser = next((shutil.which(b) for b in ("chromium", "chromium-browser", "google-chrome")
                    if shutil.which(b)), None)
    if browser is None:
        raise SystemExit("no Chromium found: install it (Debian: apt-get install chromium)")
    html, out = ROOT / "_build" / "html", ROOT / "_build" / "screenshots"
    out.mkdir(parents=True, exist_ok=True)
    width = args.width
    for page in sorted((html / "chapters").glob("*.html")) + sorted((html / "book").glob("*.html")):
        if not page.match(args.pages):
            continue
        target = out / (f"{page.stem}.png" if width == 1280 else f"{page.stem}@{width}.png")
        opened = page
        if width < 500:  # Chromium opens no narrower window: lay the page out in a frame
            opened = page.with_name(f".{page.stem}.frame{width}.html")
            opened.write_text(f'<html><body style="margin: 0"><iframe src="{page.name}" '
                              f'style="width: {width}px; height: {args.height}px; border: 0">'
                              "</iframe></body></html>", encoding="utf-8")
        try:
            subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu",
                            "--hide-scrollbars", f"--window-size={max(width, 500)},{args.height}",
                            "--virtual-time-budget=10000", f"--screenshot={target}",
                            opened.as_uri()],
                           check=True, capture_output=True, timeout=120)
        finally:
            if opened != page:
                opened.unlink(missing_ok=True)
        if width < 500:
            try:
                from PIL import Image
            except ImportError:
                pass
            else:
                with Image.open(target) as shot:
                    cropped = shot.crop((0, 0, width, shot.height))
                cropped.save(target)
        print(f"{page.relative_to(html)} -> {target.relative_to(ROOT)}", flush=True)


def cmd_test(args: argparse.Namespace, extra: list[str]) -> None:
    ensure_env()
    t0 = time.perf_counter()
    try:
        _run([_bin("python"), "-m", "pytest", *extra], env=_env(), cwd=ROOT)
    finally:
        print(f"[dev] tests: {time.perf_counter() - t0:.0f} s", flush=True)


def cmd_chapter(args: argparse.Namespace) -> None:
    ensure_env()
    out = Path(args.path).with_suffix(".ipynb")
    _run(
        [_bin("jupytext"), "--to", "ipynb", "--execute", "--output", out, args.path],
        env=_env(args.scale, args.device),
    )
    print(f"executed notebook: {out}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    sub = parser.add_subparsers(dest="command", required=True)
    book = sub.add_parser("book", help="install if needed, then build the executed book")
    book.add_argument("--scale", choices=["quick", "paper"], default="paper",
                      help="paper (default): the paper's results from the committed records; "
                      "quick: recompute everything small")
    book.add_argument("--make-records", action="store_true",
                      help="at paper scale, compute the runs that have no record yet (slow; "
                      "a GPU helps) and append their records under results/")
    book.add_argument("--device", default=None)
    book.add_argument("--clean", action="store_true", help="remove _build first")
    sub.add_parser("check", help="check the built HTML book (_build/html) for broken output")
    sub.add_parser("layout", help="check the built book's layout in headless Chromium: tables "
                   "wider than their box, code blocks that scroll sideways, equations clipped "
                   "or scrolling with no cue on a phone")
    shots = sub.add_parser("screenshots", help="screenshot every built chapter (headless Chromium)")
    shots.add_argument("--height", type=int, default=6000, help="page height in pixels")
    shots.add_argument("--width", type=int, default=1280,
                       help="window width in pixels (390: a phone's, laid out in a frame)")
    shots.add_argument("--pages", default="*.html", help="only pages whose path matches this "
                       "glob (e.g. '01_*')")
    sub.add_parser("test", help="install if needed, then run pytest (extra args go to pytest)")
    chapter = sub.add_parser("chapter", help="execute one chapter into a notebook next to it")
    chapter.add_argument("path")
    chapter.add_argument("--scale", choices=["quick", "paper"], default=None)
    chapter.add_argument("--device", default=None)
    sub.add_parser("setup", help="only create and install the environment")
    args, extra = parser.parse_known_args(argv)
    try:
        if args.command == "book":
            cmd_book(args)
        elif args.command == "test":
            cmd_test(args, extra)
        elif args.command == "chapter":
            cmd_chapter(args)
        elif args.command == "check":
            ensure_env()
            cmd_check(args)
        elif args.command == "layout":
            ensure_env()
            cmd_layout(args)
        elif args.command == "screenshots":
            cmd_screenshots(args)
        else:
            ensure_env()
    except subprocess.CalledProcessError as err:
        return err.returncode or 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
