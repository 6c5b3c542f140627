# Sourced by the GPU-box scripts: puts the studio's packages the box lacks (Django, Celery, DRF, pytest-django, ...:
# wheels in .whl, downloaded on the dev box as docs/benchmarks.md §16 says) into SITE once per wheel set, and puts
# SITE on PYTHONPATH. The box has torch, numpy, httpx, psutil, filelock, tqdm and PyYAML itself.
# Needs: PY (the interpreter), SITE (the folder), and a say() function. Returns non-zero with a message on failure.
install_box_site() {
  ls .whl/*.whl >/dev/null 2>&1 || { say "no wheels in .whl: build the wheelhouse on the dev box (docs/benchmarks.md §16) and carry .whl"; return 1; }
  local stamp
  stamp=$(ls .whl | sort | cksum | cut -d' ' -f1)
  if [ "$(cat "$SITE/.kstudio-wheels" 2>/dev/null)" = "$stamp" ]; then
    say "wheels already installed in $SITE"
  else
    say "installing $(ls .whl/*.whl | wc -l) wheels from .whl into $SITE (no index; no dependencies resolved:" \
        ".whl holds all that the box lacks)"
    rm -rf "$SITE"
    $PY -m pip install -q --disable-pip-version-check --root-user-action=ignore --no-index --no-deps --find-links .whl \
        --target "$SITE" .whl/*.whl || { say "pip could not install .whl into $SITE"; return 1; }
    echo "$stamp" > "$SITE/.kstudio-wheels"
  fi
  export PYTHONPATH="$SITE${PYTHONPATH:+:$PYTHONPATH}"
}
