# Sourced by thrift-compat.sh and bench-thrift.sh: happybase 1.3 (PyPI) in a virtualenv.
# happybase_venv DIR: creates DIR with happybase installed unless it already has it (Debian's
# python3-venv is installed with apt-get when `python3 -m venv` is missing). Returns non-zero,
# after saying why, when it cannot.
happybase_venv() {
  local venv="$1" sudo_cmd=""
  "$venv/bin/python" -c "import happybase" 2>/dev/null && return 0
  rm -rf "$venv"
  if ! python3 -m venv "$venv" 2>/dev/null; then
    if [ "$(id -u)" -ne 0 ]; then sudo_cmd="sudo"; fi
    $sudo_cmd apt-get update -q && $sudo_cmd apt-get install -y -q python3-venv python3-pip
    rm -rf "$venv"
    python3 -m venv "$venv" || { echo "cannot create a Python virtualenv (python3 -m venv)"; return 1; }
  fi
  "$venv/bin/pip" install -q "happybase==1.3.0" "thriftpy2==0.7.1" \
    || { echo "cannot install happybase 1.3.0 from PyPI"; return 1; }
}
