#!/usr/bin/env bash
# testnet/stop.sh - stop exactly the nodes that testnet/run.sh started in
# DIR, by the pids it recorded in DIR/pids. A pid is signalled only while
# /proc/PID/cmdline still says "nightshift node --datadir <that datadir>",
# so a pid reused by another process is never touched. Idempotent.
set -u -o pipefail

PROG=testnet/stop.sh

usage() {
    cat <<EOF
usage: $PROG -d DIR [-w WAIT_S]

Stop the nodes that testnet/run.sh started in DIR: SIGTERM to each pid in
DIR/pids that is still that node, up to WAIT_S seconds (default 5) for it
to exit, then SIGKILL. Reports what it did for each node. Running it again,
or on a testnet that already stopped, changes nothing.

Exit status: 0 when none of DIR's nodes is running afterwards; 1 if one
survived or DIR/pids is unreadable; 2 on a usage error.
EOF
}

DIR="" WAIT_S=5
for a in "$@"; do
    if [ "$a" = "--help" ] || [ "$a" = "-h" ]; then
        usage
        exit 0
    fi
done
while getopts ":d:w:" opt; do
    case $opt in
    d) DIR=$OPTARG ;;
    w) WAIT_S=$OPTARG ;;
    :) echo "$PROG: -$OPTARG needs a value (see --help)" >&2; exit 2 ;;
    *) echo "$PROG: unknown option -$OPTARG (see --help)" >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -ne 0 ] || [ -z "$DIR" ]; then
    echo "$PROG: -d DIR is required (see --help)" >&2
    exit 2
fi
[[ $WAIT_S =~ ^[0-9]+$ ]] || {
    echo "$PROG: -w needs a number of seconds (see --help)" >&2
    exit 2
}

if [ ! -e "$DIR/pids" ]; then
    echo "nothing to stop: $DIR/pids does not exist (no testnet was started there)"
    exit 0
fi
[ -r "$DIR/pids" ] || {
    echo "$PROG: cannot read $DIR/pids" >&2
    exit 1
}

# The pid still runs "... node ... --datadir DATADIR ..." and is no zombie.
is_node() { # PID DATADIR
    local pid=$1 dd=$2 state
    [ -r "/proc/$pid/stat" ] || return 1
    state=$(sed -E 's/^.*\) ([A-Za-z]).*$/\1/' "/proc/$pid/stat" 2>/dev/null) || return 1
    [ "$state" != Z ] || return 1
    tr '\0' '\n' <"/proc/$pid/cmdline" 2>/dev/null |
        awk -v dd="$dd" 'prev == "--datadir" && $0 == dd { f = 1 }
                         $0 == "node" { n = 1 } { prev = $0 }
                         END { exit !(f && n) }'
}

name_of() { basename "$1"; }

pids=() dds=()
while read -r pid dd; do
    [ -n "${pid:-}" ] || continue
    if ! [[ $pid =~ ^[0-9]+$ ]] || [ -z "${dd:-}" ]; then
        echo "$PROG: skipping malformed line in $DIR/pids: '$pid $dd'" >&2
        continue
    fi
    pids+=("$pid")
    dds+=("$dd")
done <"$DIR/pids"

# SIGTERM every node that is still ours.
signalled=()
for k in "${!pids[@]}"; do
    pid=${pids[k]} dd=${dds[k]}
    if is_node "$pid" "$dd"; then
        if kill -TERM "$pid" 2>/dev/null; then
            signalled+=("$k")
        else
            echo "$(name_of "$dd"): pid $pid could not be signalled"
        fi
    else
        echo "$(name_of "$dd"): not running (pid $pid has exited)"
    fi
done

# Wait for them, then SIGKILL the ones that stay.
deadline=$((SECONDS + WAIT_S))
left=("${signalled[@]}")
while [ ${#left[@]} -gt 0 ] && [ "$SECONDS" -lt "$deadline" ]; do
    sleep 0.1
    still=()
    for k in "${left[@]}"; do
        if is_node "${pids[k]}" "${dds[k]}"; then
            still+=("$k")
        else
            echo "$(name_of "${dds[k]}"): stopped (pid ${pids[k]}, SIGTERM)"
        fi
    done
    left=("${still[@]}")
done
status=0
for k in "${left[@]}"; do
    pid=${pids[k]} dd=${dds[k]}
    kill -KILL "$pid" 2>/dev/null
    for _ in 1 2 3 4 5 6 7 8 9 10; do
        is_node "$pid" "$dd" || break
        sleep 0.1
    done
    if is_node "$pid" "$dd"; then
        echo "$(name_of "$dd"): pid $pid survived SIGKILL" >&2
        status=1
    else
        echo "$(name_of "$dd"): killed (pid $pid did not exit within ${WAIT_S}s of SIGTERM)"
    fi
done
echo "testnet in $DIR: ${#signalled[@]} of ${#pids[@]} nodes were running and are stopped$([ $status -ne 0 ] && echo ', some survived')"
exit $status
