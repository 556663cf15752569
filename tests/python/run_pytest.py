"""ctest's entry to the Python tests: pytest over tests/python against the package in BUILD_DIR/python.

Usage: run_pytest.py BUILD_DIR cpu|gpu. Exits 77 (ctest: skipped) when the extension was not built or was built
for another Python, pytest or numpy is missing, or, for the gpu part, there is no usable GPU.
"""

import glob
import importlib.util
import os
import sys


def skip(why):
    print(f"SKIPPED: {why}")
    sys.exit(77)


def main():
    build_dir, part = sys.argv[1], sys.argv[2]
    package_dir = os.path.join(build_dir, "python")
    if not glob.glob(os.path.join(package_dir, "coda", "_coda*")):
        skip(f"the extension coda._coda is not in {package_dir} (tools/build.sh builds it when nanobind is importable)")
    for module in ("pytest", "numpy"):
        if importlib.util.find_spec(module) is None:
            skip(f"{module} is not installed for {sys.executable} (pip install {module})")
    sys.path.insert(0, package_dir)
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [package_dir, os.environ.get("PYTHONPATH")]))
    try:
        import coda
    except ImportError as e:  # e.g. a build tree carried to a machine whose Python is another version
        skip(f"the extension in {package_dir} does not import into {sys.executable} "
             f"(Python {sys.version.split()[0]}): {e}")
    import pytest

    if part == "gpu" and not coda.device_available():
        skip(f"no GPU: {coda.device_unavailable_reason()}")
    tests = os.path.dirname(os.path.abspath(__file__))
    marker = "gpu" if part == "gpu" else "not gpu"
    sys.exit(pytest.main([tests, "-m", marker, "-q", "-p", "no:cacheprovider", "-rs"]))


if __name__ == "__main__":
    main()
