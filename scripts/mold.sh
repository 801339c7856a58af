# Sourced by .ci/run and scripts/quickstart.sh: a fresh build links many large executables, and
# mold links them faster than GNU ld, so use it when the C compiler can. A flag in RUSTFLAGS is
# part of every crate's fingerprint, so only these scripts set it (a plain cargo build without
# it would rebuild every crate once); a RUSTFLAGS of the caller's own is left as it is.
if [ -z "${RUSTFLAGS:-}" ] && command -v mold >/dev/null 2>&1 &&
  echo 'int main(void) { return 0; }' | cc -fuse-ld=mold -x c - -o /dev/null 2>/dev/null; then
  export RUSTFLAGS="-C link-arg=-fuse-ld=mold"
fi
