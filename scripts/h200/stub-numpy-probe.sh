#!/usr/bin/env bash
# Which of the H200 venv's compiled packages import under the Triton stub's NumPy 1.26.4
# (a venv holding NumPy 1.26.4, the machine's venv after it through a .pth file, as
# `crossover engines install triton --engine-python` builds it). carry: [".pack/tenv"].
set -uo pipefail
V=/tmp/stubprobe; rm -rf $V
/usr/bin/python3.12 -m venv $V || exit 1
$V/bin/pip install -q --no-index --find-links .pack/tenv numpy==1.26.4 || exit 1
SP=$($V/bin/python -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
/opt/torch/.venv/bin/python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])" > $SP/engine.pth
probe() {
PYTHONPATH= $V/bin/python - <<'PY'
import importlib, importlib.metadata as md, traceback
import numpy
print("numpy", numpy.__version__, numpy.__file__)
mods = ["scipy", "scipy.sparse", "scipy.linalg", "scipy.special", "numba", "llvmlite",
        "pandas", "pyarrow", "cv2", "PIL.Image", "sklearn", "cupy", "ml_dtypes", "torch",
        "torchvision", "torchaudio", "sentencepiece", "tokenizers", "transformers",
        "matplotlib", "h5py", "safetensors", "tiktoken", "jax", "onnxruntime",
        "transformers.modeling_utils", "transformers.loss.loss_utils"]
dists = {"scipy": "scipy", "numba": "numba", "llvmlite": "llvmlite", "pandas": "pandas",
         "pyarrow": "pyarrow", "cv2": "opencv-python-headless", "PIL.Image": "pillow",
         "sklearn": "scikit-learn", "cupy": "cupy-cuda13x", "ml_dtypes": "ml-dtypes",
         "matplotlib": "matplotlib", "h5py": "h5py", "jax": "jax", "onnxruntime": "onnxruntime"}
for m in mods:
    v = ""
    d = dists.get(m.split(".")[0]) or dists.get(m)
    if d:
        try: v = md.version(d)
        except Exception: v = "?"
    try:
        importlib.import_module(m); print(f"OK   {m} {v}")
    except BaseException as e:
        print(f"FAIL {m} {v}: {type(e).__name__}: {str(e).splitlines()[0][:160] if str(e) else ''}")
PY
}
probe
# with a SciPy built for both NumPy 1 and 2 in the stub's environment (carry .pack/scipy)
if ls .pack/scipy/scipy-*.whl > /dev/null 2>&1; then
  $V/bin/pip install -q --no-index --no-deps .pack/scipy/scipy-*.whl && echo "== with $(ls .pack/scipy)" && probe
fi
