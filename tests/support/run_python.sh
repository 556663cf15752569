#!/bin/sh
# ctest's way to a Python interpreter, found when the test runs rather than when the tree was configured, so that a
# build tree carried to another machine (the GPU machine) runs its Python tests there: $CODA_TEST_PYTHON, else the
# interpreter the build was configured with where it exists, else python3 on PATH; none of them: exit 77 (skipped).
# Usage: run_python.sh CONFIGURED_PYTHON SCRIPT [ARGS...]
configured=$1
shift
for candidate in "${CODA_TEST_PYTHON:-}" "$configured" python3; do
  [ -n "$candidate" ] || continue
  if command -v "$candidate" >/dev/null 2>&1; then
    exec "$candidate" "$@"
  fi
done
echo "SKIPPED: no Python interpreter (set CODA_TEST_PYTHON; the configured one, '$configured', is not on this machine)"
exit 77
