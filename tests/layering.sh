#!/usr/bin/env bash
# Layering rules that a grep can check (docs/ARCHITECTURE.md, "Layers"):
#  - cli/ only parses, calls node/ and prints: no ledger appends, no market
#    message packing, no chunk transfers;
#  - a layer includes only its own headers and those below it.
# Prints each violation and "layering: N passed, M failed".
set -u
cd "$(dirname "$0")/.."
passed=0
failed=0
rule() { # rule NAME DIR REGEX: no line of DIR/*.c|*.h matches REGEX
    local hits
    hits=$(grep -nE "$3" "$2"/*.c "$2"/*.h 2>/dev/null || true)
    if [ -n "$hits" ]; then
        echo "FAIL $1:"
        echo "$hits" | sed 's/^/  /'
        failed=$((failed + 1))
    else
        passed=$((passed + 1))
    fi
}
headers() { # the public headers of a layer's modules, as an include regex
    echo "#include \"nightshift/($1)\.h\""
}
rule "cli appends no ledger entry" cli \
    'ns_ledger_(sync_)?append|ns_node_append|ns_ledger_ingest'
rule "cli packs no market message" cli \
    'ns_(announce|bid|fetch|chunk|awarded)_(encode|decode)|NS_MSG_MKT_'
rule "cli moves no chunks" cli \
    'ns_fetch_(init|add|pump|on_chunk)|ns_transfer_serve|NS_CHUNK_BYTES'
rule "core includes no upper layer" core \
    "$(headers 'p2p|loop|ledger|ledger_sync|market|policy|node|node_io|provider|requester|transfer|control|slash|jobdir|money|runner|worker|verify|challenge|devbench|devices|cl')"
rule "exec includes neither p2p, market nor node" exec \
    "$(headers 'p2p|loop|ledger|ledger_sync|market|policy|node|node_io|provider|requester|transfer|control|slash|jobdir|money')"
rule "p2p includes neither market, exec nor node" p2p \
    "$(headers 'ledger|ledger_sync|market|policy|node|node_io|provider|requester|transfer|control|slash|jobdir|money|runner|worker|verify|challenge|devbench|devices|cl')"
rule "market includes neither exec nor node" market \
    "$(headers 'node|node_io|provider|requester|transfer|control|slash|jobdir|money|runner|worker|verify|challenge|devbench|cl')"
rule "node includes nothing of cli" node '#include "(cli|ctl|opts|jobspec|jobflags)\.h"'
echo "layering: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
