# Sourced by the benchmark scripts. translator_home GENERATOR KIND=CHECKPOINT...: a temporary CAG
# home sharing the converted models of $CAG_HOME (default ~/.cache/cag) whose translators/ holds
# only these checkpoints (CHECKPOINT.safetensors + CHECKPOINT.json), installed as the smollm2-135m
# -> GENERATOR translator of each KIND (mot, single, ridge); prints its path.
translator_home() {
  local gen=$1 home f pair ext
  shift
  home=$(mktemp -d) && mkdir -p "$home/translators"
  for f in "${CAG_HOME:-$HOME/.cache/cag}"/*; do
    [ "$(basename "$f")" = translators ] || ln -s "$(realpath "$f")" "$home/$(basename "$f")"
  done
  for pair in "$@"; do
    for ext in safetensors json; do
      cp "${pair#*=}.$ext" "$home/translators/smollm2-135m__${gen}__${pair%%=*}.$ext"
    done
  done
  echo "$home"
}
