# Sourced by the scripts whose tests run on Node (tests/browser/run.sh,
# tests/federation/run.sh).

# npm_ci DIR: `npm ci` in DIR unless what its package-lock.json names is
# installed already. npm records what it installed in
# node_modules/.package-lock.json; a package-lock.json newer than that has
# changed since.
npm_ci() {
    if [ ! "$1/node_modules/.package-lock.json" -nt "$1/package-lock.json" ]; then
        echo "== npm ci in $1"
        (cd "$1" && npm ci --no-audit --no-fund --loglevel=error)
    fi
}
