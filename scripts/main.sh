#!/usr/bin/env bash
# The main job: set up; build the default preset (clang 14, Release, the libFuzzer harnesses with
# coverage of the kernels), the one build every step below runs in and the one installed on the
# PATH; then the self-checks, the property suite and every fuzz harness's ctest, a short fuzzing
# campaign on every op and the kill matrix of the seeded-bug variants, each printed as it runs and
# timed, and a last block saying what passed, where the fuzz cases went and what to run next. Every
# step's whole output is also kept in build/default/main-logs/. The sanitizer build (ASan + UBSan:
# the three seeded reads past a view whose values are never used, host-side memory errors) is
# scripts/test.sh's, with the rest of the suite.
#
# Environment:
#   MLACHECK_MAIN_CASES         RapidCheck cases per property (default 100; the test command runs
#                               250 under the sanitizers and 1000 in Release)
#   MLACHECK_MAIN_FUZZ_SECONDS  seconds of fuzzing per op harness (default 10)
#   MLACHECK_PREFIX             where the tool (bin/, share/mlacheck/corpus, share/mlacheck/plugins)
#                               and the fuzz harnesses (fuzz/) are installed (default /opt/mlacheck as
#                               root, else ~/.local/opt/mlacheck)
#   MLACHECK_BIN_DIR            the folder on the PATH that gets the link `mlacheck` (default
#                               /usr/local/bin as root, else ~/.local/bin)
#   MLACHECK_INSTALL=0          install nothing
# Exit 0 when every step passed, 1 when one failed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
jobs=$(nproc)
cases="${MLACHECK_MAIN_CASES:-100}"
fuzz_seconds="${MLACHECK_MAIN_FUZZ_SECONDS:-10}"
release=build/default
logs="$release/main-logs"
fuzz_out="$release/main-fuzz"
tool="$release/tools/mlacheck"

# How long since $1 (a value of SECONDS), in words.
took() {
  local s=$((SECONDS - $1))
  if [ $s -ge 60 ]; then echo "$((s / 60)) min $((s % 60)) s"; else echo "$s s"; fi
}
# A step's heading.
heading() { printf '\n== %s\n' "$*"; }
# The summary rows: result, step, what it found.
results=()
record() { results+=("$(printf '  %-5s %-18s %s' "$1" "$2" "$3")"); }
next=()
status=0

job_start=$SECONDS
heading "setting up (scripts/setup.sh: Debian's packages; scripts/pyenv.sh: the Python environment, made while the build runs)"
t=$SECONDS
bash scripts/setup.sh --no-python
mkdir -p "$logs"
# The Python environment (about 0.9 GB from PyPI the first time) downloads and unpacks beside the
# build, which does not need it, only its path (baked into mlacheck as --python's default): .venv
# links to where it will be (pyenv.sh --path) before the build is configured.
pyenv_python=$(bash scripts/pyenv.sh --path)
ln -sfn "$(dirname "$(dirname "$pyenv_python")")" .venv
bash scripts/pyenv.sh >"$logs/pyenv.log" 2>&1 &
pyenv_pid=$!
echo "packages set up in $(took $t); the Python environment is being made beside the build ($logs/pyenv.log)"

heading "building the default preset ($release: clang 14, Release, libFuzzer harnesses; $cases cases per property)"
t=$SECONDS
# The test binaries' own sources and the generators at -O0 (MLACHECK_TEST_COMPILE_OPTIONS): they
# hold RapidCheck's and GoogleTest's templates, not a case's work (docs/building.md). scripts/test.sh
# builds them at -O2 again.
if ! cmake --preset default -DMLACHECK_PROPERTY_CASES="$cases" -DMLACHECK_TEST_COMPILE_OPTIONS=-O0 \
     >"$logs/configure.log" 2>&1; then
  cat "$logs/configure.log"
  echo "main job: configuring the default preset failed (above; also in $logs/configure.log)"
  exit 1
fi
# Only what the stages below run (the target main_job: the tool, the fuzz harnesses, the property
# and fuzz test binaries) and the example plugin with its buggy twin, installed beside the tool as
# a plugin to try `check` on; scripts/test.sh builds the rest.
cmake --build --preset default -j "$jobs" --target main_job mlacheck_example_plugin mlacheck_example_plugin_buggy ||
  { echo "main job: building the default preset failed (the errors are above)"; exit 1; }
echo "built in $(took $t)"

t=$SECONDS
if ! wait $pyenv_pid; then
  cat "$logs/pyenv.log"
  echo "main job: making the Python environment failed (above; also in $logs/pyenv.log)"
  exit 1
fi
echo "$(tail -1 "$logs/pyenv.log") (waited $(took $t) for it after the build)"

if [ "${MLACHECK_INSTALL:-1}" != 0 ]; then
  if [ "$(id -u)" -eq 0 ]; then
    prefix="${MLACHECK_PREFIX:-/opt/mlacheck}"
    bin_dir="${MLACHECK_BIN_DIR:-/usr/local/bin}"
  else
    prefix="${MLACHECK_PREFIX:-$HOME/.local/opt/mlacheck}"
    bin_dir="${MLACHECK_BIN_DIR:-$HOME/.local/bin}"
  fi
  heading "installing mlacheck in $prefix, linked from $bin_dir/mlacheck"
  # The tool and the fuzz harnesses (the installed mlacheck finds them in $prefix/fuzz, its seeds in
  # $prefix/share/mlacheck/corpus).
  if cmake --install "$release" --prefix "$prefix" --component tool >"$logs/install.log" 2>&1 &&
     cmake --install "$release" --prefix "$prefix" --component fuzz >>"$logs/install.log" 2>&1 &&
     mkdir -p "$bin_dir" && ln -sfn "$prefix/bin/mlacheck" "$bin_dir/mlacheck" &&
     "$bin_dir/mlacheck" list >/dev/null 2>>"$logs/install.log"; then
    echo "installed: $prefix/bin/mlacheck (Release), $prefix/fuzz/ (the harnesses), $prefix/share/mlacheck/corpus/," \
         "$prefix/share/mlacheck/plugins/ (the example plugin and its buggy twin)"
    on_path=$(command -v mlacheck || true)
    if [ "$on_path" = "$bin_dir/mlacheck" ]; then
      record PASS install "mlacheck on the PATH: $bin_dir/mlacheck -> $prefix/bin/mlacheck (Release)"
    else
      record PASS install "$bin_dir/mlacheck -> $prefix/bin/mlacheck (Release); $bin_dir is not first on the PATH"
      next+=("export PATH=\"$bin_dir:\$PATH\"        # then \`mlacheck\` is the installed one${on_path:+ (now: $on_path)}")
    fi
    # The Python package, connected to the interpreter that has torch (mlacheck's environment,
    # scripts/pyenv.sh): a .pth file puts the installed package (with its libmlacheck_guard.so) on
    # that interpreter's path, so `import mlacheck` and `pytest -p mlacheck` work from any folder
    # (-I: neither the current folder nor PYTHONPATH helps the import checked here).
    py=$(ls -d "${XDG_CACHE_HOME:-$HOME/.cache}"/mlacheck/pyenv-*/bin/python 2>/dev/null | head -1 || true)
    if [ -n "$py" ] && site=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>>"$logs/install.log") &&
       echo "$prefix/share/mlacheck/python" > "$site/mlacheck.pth" &&
       ver=$("$py" -I -c 'import mlacheck, torch; print(torch.__version__)' 2>>"$logs/install.log"); then
      record PASS python "import mlacheck works in $py (torch $ver) from any folder: the Python with torch (--python callables run in it; $py -m pytest -p mlacheck ...)"
    else
      record FAIL python "the Python package was not connected to mlacheck's Python environment (${py:-none found}; $logs/install.log)"
      status=1
    fi
  else
    cat "$logs/install.log"
    record FAIL install "cmake --install into $prefix failed (above; $logs/install.log)"
    next+=("MLACHECK_PREFIX=DIR MLACHECK_BIN_DIR=DIR bash scripts/main.sh   # install somewhere writable")
    status=1
  fi
fi
echo "the steps below run this build: $tool"

heading "self-checks (mlacheck selfcheck)"
t=$SECONDS
rc=0
"$tool" selfcheck 2>&1 | tee "$logs/selfcheck.log" || rc=$?
line=$(grep -E '[0-9]+ passed, [0-9]+ failed' "$logs/selfcheck.log" | tail -1 | sed 's/^[a-z ]*: //')
if [ $rc -eq 0 ]; then
  record PASS selfcheck "${line:-passed} ($(took $t))"
else
  record FAIL selfcheck "${line:-exit $rc} ($(took $t)); the FAIL lines above say which checker"
  next+=("$tool selfcheck          # rerun the self-checks")
  status=1
fi

heading "property suite and fuzz harnesses (ctest -L 'property|fuzz', $cases cases per property, $jobs at a time)"
echo "one line per test as it ends; a failing test's whole output follows its line"
t=$SECONDS
rc=0
# Only the "Start N: name" lines ctest prints when a test begins are left out (the end lines name
# every test again, with its result and time).
ctest --preset default -L 'property|fuzz' -j "$jobs" --output-on-failure 2>&1 |
  sed -u '/^ *Start  *[0-9][0-9]*: /d' | tee "$logs/ctest.log" || rc=$?
line=$(grep -E 'tests passed, [0-9]+ tests? failed out of' "$logs/ctest.log" | tail -1 || true)
# ctest counts a skipped test as passed: the skipped ones are counted apart (each says why above).
skipped=$(grep -cE '^[[:space:]]*[0-9]+ - .* \(Skipped\)$' "$logs/ctest.log" || true)
[ "${skipped:-0}" -gt 0 ] && line="$line, $skipped of them skipped (listed above under 'did not run')"
if [ $rc -eq 0 ]; then
  record PASS "property suite" "${line:-passed} ($(took $t))"
else
  record FAIL "property suite" "${line:-ctest exited $rc} ($(took $t)); the failed tests' output is above"
  next+=("ctest --preset default --rerun-failed --output-on-failure   # rerun only the tests that failed")
  status=1
fi

heading "fuzzing campaign: every op's harness on the host backend for $fuzz_seconds s each (mlacheck fuzz --target all)"
echo "a line per harness every 5 s: executions per second, coverage, corpus size, crashes"
t=$SECONDS
rc=0
rm -rf "$fuzz_out"
"$tool" fuzz --target all --time "$fuzz_seconds" --jobs "$jobs" --minimize 10 --out "$fuzz_out" 2>&1 |
  tee "$logs/fuzz.log" || rc=$?
found=()
if [ -d "$fuzz_out" ]; then
  while IFS= read -r f; do found+=("$f"); done < <(find "$fuzz_out" -path '*/cases/*.case' | sort)
fi
if [ $rc -eq 0 ]; then
  # The time each harness fuzzed, as its own line says (setup and the corpus merge come out of --time).
  spent=$(grep -E '^fuzz [a-z_]+: .*; [0-9]+ s$' "$logs/fuzz.log" | sed -E 's/.*; ([0-9]+) s$/\1/' | sort -n |
    awk 'NR == 1 { lo = $1 } { hi = $1; n++ } END { if (n) printf "%d harness(es), %s to %s s each", n, lo, hi }' || true)
  record PASS fuzzing "no crash: ${spent:-every harness} of fuzzing (--time $fuzz_seconds); the grown corpora are in $fuzz_out/<target>/corpus/ ($(took $t))"
elif [ $rc -eq 1 ]; then
  record FAIL fuzzing "${#found[@]} crash case(s) in $fuzz_out/<target>/cases/, each replayed by mlacheck repro ($(took $t))"
  for f in "${found[@]:0:3}"; do next+=("$tool repro $f   # a fuzz finding, replayed"); done
  status=1
else
  record FAIL fuzzing "mlacheck fuzz exited $rc, its message is above ($(took $t)); $logs/fuzz.log"
  next+=("$tool fuzz --target all --time $fuzz_seconds --out $fuzz_out   # rerun the campaign")
  status=1
fi

heading "kill matrix: the seeded-bug variants of docs/bugs.md on the host backend (mlacheck mutants; this build runs all but the 3 that need the sanitizer build)"
echo "a line per variant as it starts; the table follows when all have run"
t=$SECONDS
rc=0
# The variants' own stderr (the sanitizer report of the bug a variant seeds, a glibc abort) goes to
# a log whole; mlacheck's own lines and each sanitizer report's SUMMARY line are shown as they come.
"$tool" mutants --backend host --budget 60 2>&1 >"$logs/mutants.log" |
  awk -v logf="$logs/mutants.stderr.log" '
    { print > logf; fflush(logf) }
    /^(mutants|mlacheck)[: ]/ { print "  " $0; fflush(); next }
    /SUMMARY: / { print "      " $0; fflush(); next }
    { other++ }
    END { if (other) printf "  (%d more lines on stderr from the variants themselves, the reports of the bugs they seed: %s)\n", other, logf }' ||
  rc=$?
echo
cat "$logs/mutants.log"
line=$(grep -E '^[0-9]+ of [0-9]+ (runnable )?killed' "$logs/mutants.log" | tail -1 | sed 's/; time to kill.*//' || true)
if [ $rc -eq 0 ]; then
  record PASS "kill matrix" "${line:-every variant killed} ($(took $t))"
elif [ $rc -eq 1 ]; then
  record FAIL "kill matrix" "${line:-a variant survived}: the table above says which ($(took $t))"
  next+=("$tool mutants --backend host --only OP@ID   # one variant that survived, with its checks")
  status=1
else
  echo "mlacheck mutants exited $rc; its whole stderr ($logs/mutants.stderr.log):"
  cat "$logs/mutants.stderr.log"
  record FAIL "kill matrix" "mlacheck mutants exited $rc, its stderr is above ($(took $t))"
  next+=("$tool mutants --backend host --budget 60   # rerun the kill matrix")
  status=1
fi

heading "main job summary ($(took $job_start), setup included; every step's output in $logs/)"
printf '%s\n' "${results[@]}"
if [ $status -eq 0 ]; then
  echo "main job: all checks passed"
  next+=("mlacheck repro corpus/regressions/R1-topk-decode-view-past-num-decode-tokens.case --impl indexer_decode_step@R1"
         "                                   # a seeded bug caught: the guard's buffer, row and column"
         "mlacheck fuzz --target topk_decode --time 3600 --out campaign/   # an hour on one op")
  [ -n "${prefix:-}" ] && next+=(
         "mlacheck check --plugin $prefix/share/mlacheck/plugins/libmlacheck_example_plugin_buggy.so --budget 20"
         "                                   # a plugin to try (its correct twin: libmlacheck_example_plugin.so)")
  next+=(
         "mlacheck check --plugin ./libmy_kernels.so --budget 60           # your kernels (docs/plugins.md)"
         "bash scripts/test.sh               # the whole suite, with the sanitizer build (the 3 variants this build cannot run)")
else
  echo "main job: FAILED (the FAIL rows above; each step's output is above and in $logs/)"
fi
echo "next:"
printf '  %s\n' "${next[@]}"
exit $status
